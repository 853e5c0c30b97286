"""History replay: stored messages to what the model is sent, with and without tool exchanges."""

from __future__ import annotations

import json
from pathlib import Path

from ask_another.config import DatabaseUrl
from ask_another.conversations import build_history, tool_exchange
from ask_another.store import open_database
from ask_another.store.conversations import (
    ConversationRecord,
    NewMessage,
    StoredToolCall,
    append_messages,
    conversation_messages,
    get_conversation,
)

ARTICLE = {"success": True, "type": "article_content", "url": "https://example.org/a",
           "content": "The article's text.", "truncated": False}


def test_replay_without_tool_calls_is_role_and_content_only():
    messages = [NewMessage(role="user", content="Is 91 prime?"),
                NewMessage(role="assistant", content="No: 7 × 13."),
                NewMessage(role="user", content="And 97?")]
    assert build_history(messages) == [
        {"role": "user", "content": "Is 91 prime?"},
        {"role": "assistant", "content": "No: 7 × 13."},
        {"role": "user", "content": "And 97?"},
    ]


def test_replay_with_tool_calls_emits_the_assistant_call_and_the_tool_result():
    call = StoredToolCall(id="call_1", function="read_article",
                          arguments={"url": "https://example.org/a"}, result=ARTICLE)
    history = build_history([
        NewMessage(role="user", content="Read https://example.org/a"),
        NewMessage(role="assistant", content="", tool_calls=[call]),
        NewMessage(role="assistant", content="It says..."),
    ])
    assert history[1] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "call_1", "type": "function",
                        "function": {"name": "read_article",
                                     "arguments": '{"url": "https://example.org/a"}'}}],
    }
    assert history[2] == {"role": "tool", "tool_call_id": "call_1",
                          "content": json.dumps(ARTICLE)}
    assert history[3] == {"role": "assistant", "content": "It says..."}
    assert len(history) == 4


def test_each_call_of_a_message_gets_its_own_tool_message_in_order():
    calls = [StoredToolCall(id="a", function="read_article", arguments='{"url": "x"',
                            result="plain text result"),
             StoredToolCall(id="b", function="lookup", arguments={}, result={"n": 1})]
    history = build_history([NewMessage(role="assistant", content="Let me look.",
                                        tool_calls=calls)])
    assert history[0]["content"] == "Let me look."
    # Arguments the model sent are replayed verbatim, even when they are not valid JSON.
    assert [c["function"]["arguments"] for c in history[0]["tool_calls"]] == ['{"url": "x"', "{}"]
    assert history[1:] == [{"role": "tool", "tool_call_id": "a", "content": "plain text result"},
                           {"role": "tool", "tool_call_id": "b", "content": '{"n": 1}'}]


def test_system_messages_are_left_to_the_caller():
    assert build_history([NewMessage(role="system", content="Be brief."),
                          NewMessage(role="user", content="Hi")]) == [
        {"role": "user", "content": "Hi"}]


async def test_a_tool_exchange_survives_the_store_and_replays_identically(
    store_target: Path | DatabaseUrl
):
    exchange = tool_exchange([("read_article", {"url": "https://example.org/a"}, ARTICLE)])
    (call,) = exchange.tool_calls or []
    assert call.id.startswith("call_") and len(call.id) > 10
    new = [exchange, NewMessage(role="user", content="Discuss."),
           NewMessage(role="assistant", content="Gladly.")]
    record = ConversationRecord(id="c-1", model="openai/m1", system=None, created_at=1.0,
                                updated_at=1.0)
    async with open_database(store_target) as db:
        stored = await append_messages(db, record, new, now=2.0)
        assert [m.seq for m in stored] == [1, 2, 3]
        more = await append_messages(db, record, [NewMessage(role="user", content="More?")],
                                     now=3.0)
        assert [m.seq for m in more] == [4]
        read = await conversation_messages(db, "c-1")
        assert build_history(read) == build_history([*new, NewMessage(role="user",
                                                                      content="More?")])
        assert read[0].tool_calls == exchange.tool_calls
        again = await get_conversation(db, "c-1")
        assert again is not None and again.created_at == 1.0 and again.updated_at == 3.0
        assert await get_conversation(db, "c-2") is None
        assert await conversation_messages(db, "c-2") == []
