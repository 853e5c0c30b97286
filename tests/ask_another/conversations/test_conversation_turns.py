"""Conversations through the embedding API on an open runtime, the simulator and a loopback site.

Real actors, a real SQLite file, real HTTP to the simulator and to the article pages; no
MockClock (litellm runs on another thread).
"""

from __future__ import annotations

import functools
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import pytest
import trio
from conversation_pages import ARTICLE_FACT, tool_messages
from loopback_pages import Page, PageServer

from ask_another.config import Config
from ask_another.conversations import (
    DISCUSS_PROMPT,
    ArticleUnreadable,
    ConversationBusy,
    ConversationModelMismatch,
    Conversations,
    NoSuchConversation,
    conversation_name,
    conversations_spec,
)
from ask_another.errors import RateLimited
from ask_another.gateway import GatewayActor, ThreadTransport
from ask_another.runtime import Runtime
from ask_another.services import Services
from ask_another.simulator import Fail, Reply, Simulator, Slow
from ask_another.store import StoreActor
from ask_another.store.conversations import conversation_messages, get_conversation
from supervisors import Registry, child_spec, open_supervisor


async def test_a_follow_up_replays_the_earlier_turn_and_is_stored(
    conversations: Conversations, runtime: Runtime, sim: Simulator
):
    sim.script("m1", [Reply("91 is 7 times 13."), Reply("Yes, 97 is prime.")])
    first = await conversations.turn("sim", "Is 91 prime?", system="Be brief.")
    assert first.conversation_id.startswith("c-")
    assert first.result.text == "91 is 7 times 13."
    second = await conversations.turn("sim", "And 97?", first.conversation_id)
    assert second.conversation_id == first.conversation_id
    assert sim.requests_for("m1")[-1].messages == [
        {"role": "system", "content": "Be brief."},  # kept from the first turn
        {"role": "user", "content": "Is 91 prime?"},
        {"role": "assistant", "content": "91 is 7 times 13."},
        {"role": "user", "content": "And 97?"},
    ]
    db = await runtime.database()
    stored = await conversation_messages(db, first.conversation_id)
    assert [(m.seq, m.role, m.content) for m in stored] == [
        (1, "user", "Is 91 prime?"), (2, "assistant", "91 is 7 times 13."),
        (3, "user", "And 97?"), (4, "assistant", "Yes, 97 is prime.")]
    record = await get_conversation(db, first.conversation_id)
    assert record is not None and record.model == "openai/m1" and record.system == "Be brief."


async def test_without_an_id_each_turn_starts_a_new_conversation(
    conversations: Conversations, sim: Simulator
):
    a = await conversations.turn("sim", "one")
    b = await conversations.turn("sim", "two", "  ")
    assert a.conversation_id != b.conversation_id
    assert sim.requests_for("m1")[-1].messages == [{"role": "user", "content": "two"}]


async def test_an_unknown_conversation_is_a_clear_error(conversations: Conversations,
                                                        sim: Simulator):
    with pytest.raises(NoSuchConversation, match=r"No conversation has the id 'c-nope'.*leave "
                       r"conversation_id empty"):
        await conversations.turn("sim", "hello?", "c-nope")
    assert sim.requests_for("m1") == []


async def test_a_conversation_stays_with_its_model(make_config: Callable[..., Config],
                                                   sim: Simulator, pages: PageServer):
    from ask_another.runtime import open_runtime

    config = make_config(MODEL_OTHER=f"openai/m2;k;{sim.openai_base}")
    async with open_runtime(config, prewarm_after=0) as rt:
        conversations = rt.conversations
        first = await conversations.turn("sim", "hi")
        with pytest.raises(ConversationModelMismatch, match=f"Conversation {first.conversation_id}"
                           " is with openai/m1, not openai/m2.*model 'openai/m1'"):
            await conversations.turn("other", "hi again", first.conversation_id)
        # Its full id works as well as its shorthand.
        again = await conversations.turn("openai/m1", "hi again", first.conversation_id)
        assert again.conversation_id == first.conversation_id


async def test_a_second_turn_while_one_runs_is_refused_as_busy(
    conversations: Conversations, runtime: Runtime, sim: Simulator
):
    first = await conversations.turn("sim", "start")
    sim.script("m1", [Slow(1.0, then=Reply("slow answer"))])
    outcome = {}

    async def slow_turn() -> None:
        outcome["slow"] = await conversations.turn("sim", "take your time",
                                                   first.conversation_id)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(slow_turn)
        with trio.fail_after(5):
            while len(sim.requests_for("m1")) < 2:  # noqa: ASYNC110 - another thread's state
                await trio.sleep(0.01)
        with pytest.raises(ConversationBusy, match=f"Conversation {first.conversation_id} is "
                           "busy.*Wait for that answer"):
            await conversations.turn("sim", "me too", first.conversation_id)
    assert outcome["slow"].result.text == "slow answer"
    # The refused message was not stored; the conversation is free again.
    stored = await conversation_messages(await runtime.database(), first.conversation_id)
    assert [m.content for m in stored] == ["start", stored[1].content, "take your time",
                                           "slow answer"]
    assert "me too" not in [m.content for m in stored]
    assert (await conversations.turn("sim", "now?", first.conversation_id)).result.text


async def test_a_failed_turn_stores_nothing_and_the_conversation_goes_on(
    conversations: Conversations, runtime: Runtime, sim: Simulator
):
    first = await conversations.turn("sim", "first")
    sim.script("m1", [Fail(429, "slow down")])
    with pytest.raises(RateLimited, match="slow down"):
        await conversations.turn("sim", "second", first.conversation_id)
    db = await runtime.database()
    assert len(await conversation_messages(db, first.conversation_id)) == 2
    await conversations.turn("sim", "second again", first.conversation_id)
    # The failed message is not part of the history sent next.
    assert [m["content"] for m in sim.requests_for("m1")[-1].messages] == [
        "first", first.result.text, "second again"]


async def test_a_cancelled_turn_stores_nothing_and_frees_the_conversation(
    conversations: Conversations, runtime: Runtime, sim: Simulator
):
    first = await conversations.turn("sim", "first")
    sim.script("m1", [Slow(30, then=Reply("never seen"))])
    with trio.move_on_after(0.5):
        await conversations.turn("sim", "slow one", first.conversation_id)
    with trio.fail_after(5):
        second = await conversations.turn("sim", "next", first.conversation_id)
    assert second.result.text
    contents = [m.content for m in await conversation_messages(await runtime.database(),
                                                               first.conversation_id)]
    assert "slow one" not in contents and "never seen" not in contents


async def test_discuss_stores_the_read_article_exchange_and_the_prompt_then_answers(
    conversations: Conversations, runtime: Runtime, sim: Simulator, pages: PageServer
):
    url = f"http://{pages.hostport}/ledger"
    outcome = await conversations.discuss(url, "sim")
    sent = sim.requests_for("m1")[-1].messages
    # The article is a tool result, never a wall of text in the user's message.
    assert sent[-1] == {"role": "user", "content": DISCUSS_PROMPT}
    (call,) = sent[0]["tool_calls"]
    assert sent[0]["role"] == "assistant" and call["function"]["name"] == "read_article"
    assert json.loads(call["function"]["arguments"]) == {"url": url}
    (tool,) = tool_messages(sent)
    assert tool["tool_call_id"] == call["id"]
    result = json.loads(tool["content"])
    assert result["success"] is True and result["type"] == "article_content"
    assert ARTICLE_FACT in result["content"] and "Cookie settings" not in result["content"]
    stored = await conversation_messages(await runtime.database(), outcome.conversation_id)
    assert [(m.role, m.content) for m in stored[:2]] == [("assistant", ""),
                                                         ("user", DISCUSS_PROMPT)]
    assert stored[0].tool_calls is not None and stored[0].tool_calls[0].result == result
    assert stored[2].role == "assistant" and stored[2].content == outcome.result.text
    assert outcome.result.text.endswith(DISCUSS_PROMPT)  # the simulator answered the prompt


async def test_discuss_in_an_existing_conversation_with_a_custom_prompt(
    conversations: Conversations, sim: Simulator, pages: PageServer
):
    first = await conversations.turn("sim", "I will send you an article.")
    outcome = await conversations.discuss(f"http://{pages.hostport}/ledger", "sim",
                                          first.conversation_id, "How many ships?")
    assert outcome.conversation_id == first.conversation_id
    sent = sim.requests_for("m1")[-1].messages
    assert sent[0] == {"role": "user", "content": "I will send you an article."}
    assert [m["role"] for m in sent] == ["user", "assistant", "assistant", "tool", "user"]
    assert sent[-1] == {"role": "user", "content": "How many ships?"}


async def test_discuss_with_an_unreadable_article_stores_nothing(
    conversations: Conversations, runtime: Runtime, sim: Simulator, pages: PageServer
):
    pages.add("/report.pdf", Page(b"%PDF-1.7 binary", content_type="application/pdf"))
    first = await conversations.turn("sim", "hello")
    cases = [f"http://{pages.hostport}/missing", f"http://{pages.hostport}/report.pdf",
             "http://127.0.0.2:9/elsewhere"]  # loopback not on the allowlist
    for url in cases:
        with pytest.raises(ArticleUnreadable, match=f"Could not fetch article content from "
                           f"{url}.*Nothing was sent to the model or stored"):
            await conversations.discuss(url, "sim", first.conversation_id)
    with pytest.raises(ArticleUnreadable):
        await conversations.discuss(f"http://{pages.hostport}/missing", "sim")
    assert len(sim.requests_for("m1")) == 1
    db = await runtime.database()
    assert len(await conversation_messages(db, first.conversation_id)) == 2
    rows = await db.fetchall("SELECT id FROM conversations")
    assert [r["id"] for r in rows] == [first.conversation_id]


@asynccontextmanager
async def conversations_idling_after(config: Config, idle_seconds: float
                                     ) -> AsyncIterator[tuple[Conversations, Registry]]:
    """A store, a gateway and the conversations under one supervisor, with a short idle time."""
    registry = Registry()
    children = [
        child_spec(StoreActor, config.database_path, name="store", registry=registry),
        child_spec(GatewayActor, functools.partial(ThreadTransport, config.secrets()),
                   config.secrets(), 0, name="gateway", registry=registry),
        conversations_spec(Services(config, registry), idle_seconds=idle_seconds),
    ]
    async with open_supervisor(children, "one_for_one"):
        yield Conversations(Services(config, registry)), registry


async def test_an_idle_conversation_stops_and_wakes_from_the_store(
    make_config: Callable[..., Config], sim: Simulator
):
    config = make_config()
    async with conversations_idling_after(config, 0.2) as (conversations, registry):
        first = await conversations.turn("sim", "remember 42")
        # A first turn needs no actor (nobody knew the conversation): the next one wakes it.
        assert registry.whereis(conversation_name(first.conversation_id)) is None
        await conversations.turn("sim", "and 43", first.conversation_id)
        assert registry.whereis(conversation_name(first.conversation_id)) is not None
        with trio.fail_after(5):
            while registry.whereis(conversation_name(first.conversation_id)):  # noqa: ASYNC110
                await trio.sleep(0.05)
        await conversations.turn("sim", "what number?", first.conversation_id)
        assert sim.requests_for("m1")[-1].messages[0]["content"] == "remember 42"


async def test_a_turn_longer_than_the_idle_time_is_not_stopped(
    make_config: Callable[..., Config], sim: Simulator
):
    async with conversations_idling_after(make_config(), 0.1) as (conversations, _):
        first = await conversations.turn("sim", "one")
        sim.latency = 0.5  # five idle times with no message while the provider answers
        second = await conversations.turn("sim", "two", first.conversation_id)
        # Answered in full by the same thread (an idle stop mid-turn would cancel it).
        assert second.conversation_id == first.conversation_id
        assert second.result.text.endswith("two")
        assert sim.requests_for("m1")[-1].messages[0]["content"] == "one"


async def test_many_turns_waking_one_conversation_at_once_take_turns_or_are_busy(
    conversations: Conversations, runtime: Runtime, sim: Simulator
):
    first = await conversations.turn("sim", "first")
    # A first turn runs without an actor, so the racing turns below all have to wake it.
    assert runtime.registry.whereis(conversation_name(first.conversation_id)) is None
    results: list[str] = []

    async def one(n: int) -> None:
        try:
            await conversations.turn("sim", f"racer {n}", first.conversation_id)
            results.append("ok")
        except ConversationBusy:
            results.append("busy")

    sim.latency = 0.2
    async with trio.open_nursery() as nursery:
        for n in range(10):
            nursery.start_soon(one, n)
    assert results.count("ok") >= 1 and len(results) == 10
    # The supervisor survived the race: a new conversation still works.
    assert (await conversations.turn("sim", "still alive?")).result.text


async def test_conversations_run_in_parallel(conversations: Conversations, sim: Simulator):
    sim.latency = 0.5
    began = trio.current_time()
    async with trio.open_nursery() as nursery:
        for n in range(20):
            nursery.start_soon(conversations.turn, "sim", f"question {n}")
    assert trio.current_time() - began < 5
