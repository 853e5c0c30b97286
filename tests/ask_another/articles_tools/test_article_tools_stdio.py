"""The real thing: `python -m ask_another` over stdio, an `mcp.Client`, the loopback simulator and
a loopback article site (reached through ASK_ANOTHER_ALLOW_HOSTS in the server's environment).

One server process per test (litellm's import takes seconds), running a whole session in order.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
import trio
from conversation_pages import ARTICLE_FACT, tool_messages
from loopback_pages import PageServer
from stdio_server import stdio_client_for
from tool_results import call

from ask_another.conversations import DISCUSS_PROMPT
from ask_another.errors import FEEDBACK_POINTER
from ask_another.simulator import Reply, SimRequest, Simulator, Slow, Step

pytestmark = pytest.mark.slow  # starts real server processes

FAKE_KEY = "sk-test-ARTICLES-5c4b3a"


def conversation_id_of(text: str) -> str:
    last = text.rstrip().splitlines()[-1]
    assert last.startswith("conversation_id: c-"), text
    return last.split(": ", 1)[1]


def reader(request: SimRequest) -> Step:
    """A 'model' that can only answer from a read_article result in its context."""
    for message in request.messages:
        if message.get("role") == "tool" and ARTICLE_FACT in str(message.get("content")):
            if "how many ships" in request.last_user_text.lower():
                return Reply("According to the article you gave me, 4,117 ships.")
            return Reply(f"I have the article. You asked: {request.last_user_text}")
    return Reply("I have not read any article.")


async def test_a_follow_up_is_answered_from_an_article_read_two_turns_earlier(
    sim: Simulator, pages: PageServer, tmp_path: Path
):
    env = {"ASK_ANOTHER_HOME": str(tmp_path / "home"),
           "MODEL_SIM": f"openai/m1;{FAKE_KEY};{sim.openai_base}",
           "ASK_ANOTHER_ALLOW_HOSTS": pages.hostport}
    url = f"http://{pages.hostport}/ledger"
    sim.script("m1", reader)
    with (tmp_path / "stderr.log").open("w") as stderr:
        async with stdio_client_for(env, stderr) as client:
            # The client can read the article itself...
            error, text = await call(client, "read_article", url=url)
            assert not error and ARTICLE_FACT in json.loads(text)["content"]
            # ...or have the model read it: turn 1.
            error, text = await call(client, "discuss", url=url, model="sim")
            assert not error, text
            assert text.startswith("I have the article. You asked: " + DISCUSS_PROMPT)
            conversation = conversation_id_of(text)
            # Turn 2: unrelated to the article.
            error, text = await call(client, "completion", model="sim",
                                     prompt="Thanks. Is this a primary source?",
                                     conversation_id=conversation)
            assert not error and conversation_id_of(text) == conversation
            # Turn 3: answered from the article read two turns earlier.
            error, text = await call(client, "completion", model="sim",
                                     prompt="How many ships did he count?",
                                     conversation_id=conversation)
            assert not error, text
            assert text.startswith("According to the article you gave me, 4,117 ships.")
            # What the provider received: the replayed assistant call and its tool result.
            sent = sim.requests_for("m1")[-1].messages
            assert [m["role"] for m in sent] == ["assistant", "tool", "user", "assistant", "user",
                                                 "assistant", "user"]
            (call_,) = sent[0]["tool_calls"]
            assert call_["type"] == "function" and call_["function"]["name"] == "read_article"
            assert json.loads(call_["function"]["arguments"]) == {"url": url}
            (tool,) = tool_messages(sent)
            assert tool["tool_call_id"] == call_["id"]
            assert ARTICLE_FACT in json.loads(tool["content"])["content"]
            # The article never became a user message.
            assert all(ARTICLE_FACT not in str(m["content"]) for m in sent if m["role"] == "user")
            # Without the conversation id, a new conversation knows nothing of it.
            error, text = await call(client, "completion", model="sim",
                                     prompt="How many ships did he count?")
            assert text.startswith("I have not read any article.")
            assert conversation_id_of(text) != conversation
    db = sqlite3.connect(tmp_path / "home" / "ask-another.sqlite3")
    rows = db.execute("SELECT role, content, tool_calls FROM messages WHERE conversation_id = ? "
                      "ORDER BY seq", (conversation,)).fetchall()
    assert [r[0] for r in rows] == ["assistant", "user", "assistant", "user", "assistant",
                                    "user", "assistant"]
    (stored_call,) = json.loads(rows[0][2])
    assert stored_call["function"] == "read_article" and stored_call["id"] == call_["id"]
    assert stored_call["arguments"] == {"url": url}
    assert ARTICLE_FACT in stored_call["result"]["content"]
    assert all(r[2] is None for r in rows[1:])
    assert FAKE_KEY not in (tmp_path / "stderr.log").read_text()


async def test_busy_and_unknown_conversations_over_stdio(
    sim: Simulator, pages: PageServer, tmp_path: Path
):
    env = {"ASK_ANOTHER_HOME": str(tmp_path / "home"),
           "MODEL_SIM": f"openai/m1;{FAKE_KEY};{sim.openai_base}",
           "ASK_ANOTHER_ALLOW_HOSTS": pages.hostport}
    with (tmp_path / "stderr.log").open("w") as stderr:
        async with stdio_client_for(env, stderr) as client:
            error, text = await call(client, "completion", model="sim", prompt="hi",
                                     conversation_id="c-0000000000")
            assert error and "No conversation has the id 'c-0000000000'" in text
            assert FEEDBACK_POINTER not in text
            error, text = await call(client, "discuss", url=f"http://{pages.hostport}/ledger",
                                     model="sim", conversation_id="c-0000000000")
            assert error and "No conversation has the id" in text

            error, text = await call(client, "completion", model="sim", prompt="first")
            assert not error, text
            conversation = conversation_id_of(text)
            sim.script("m1", [Slow(3.0, then=Reply("the slow answer"))])
            slow: dict[str, tuple[bool, str]] = {}

            async def slow_turn() -> None:
                slow["result"] = await call(client, "completion", model="sim",
                                            prompt="think hard", conversation_id=conversation)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(slow_turn)
                with trio.fail_after(20):
                    while len(sim.requests_for("m1")) < 2:  # noqa: ASYNC110 - another process
                        await trio.sleep(0.02)
                for tool, args in [("completion", {"prompt": "me too"}),
                                   ("discuss", {"url": f"http://{pages.hostport}/ledger"})]:
                    error, text = await call(client, tool, model="sim",
                                             conversation_id=conversation, **args)
                    assert error, text
                    assert f"Conversation {conversation} is busy" in text
                    assert FEEDBACK_POINTER not in text
                # Another conversation is not held up by the busy one.
                with trio.fail_after(10):
                    error, text = await call(client, "completion", model="sim", prompt="other")
                assert not error and conversation_id_of(text) != conversation
                assert "result" not in slow
            assert slow["result"][1].startswith("the slow answer")
            # Free again once the answer is in.
            error, text = await call(client, "completion", model="sim", prompt="next",
                                     conversation_id=conversation)
            assert not error, text
            assert [m["content"] for m in sim.requests_for("m1")[-1].messages] == [
                "first", "[simulated m1] answer to: first", "think hard", "the slow answer",
                "next"]
