"""`ask_another.aio.open_runtime` from an asyncio program: the same calls as the trio runtime,
the same exceptions, callbacks on the host's loop, many calls at once."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from aio_helpers import AsyncioUI, note_tool, on_the_host
from asyncio_runs import RunAsyncio

import ask_another.aio
from ask_another import Config
from ask_another.errors import InvalidArgument, ModelNotAllowed
from ask_another.research.jobs import UnknownJob
from ask_another.simulator import Reply, Simulator, ToolCalls
from ask_another.simulator import ToolCall as SimCall


def test_complete_a_consensus_and_the_usage_from_asyncio(
    run: RunAsyncio, make_config: Callable[..., Config], sim: Simulator
):
    sim.script("m1", [Reply("Yes: 1 is not prime, though.")])

    async def main() -> tuple[str, int, str, str]:
        async with ask_another.aio.open_runtime(make_config(MODEL_SIM2=(
                f"openai/m2;k;{sim.openai_base}"))) as rt:
            result = await rt.complete("sim", "Is 1 prime?")
            panel = await rt.consensus.ask(["sim", "sim2"], "Tabs or spaces?")
            usage = await rt.usage("today")
            feedback = await rt.add_feedback("the asyncio face works")
            return result.text, len(panel.answered), usage, feedback.issue

    text, seats, usage, issue = run(main)
    assert text == "Yes: 1 is not prime, though."
    assert seats == 2
    assert "openai/m1" in usage and "3 calls" in usage
    assert issue == "the asyncio face works"


def test_library_errors_arrive_as_the_same_classes(
    run: RunAsyncio, make_config: Callable[..., Config]
):
    async def main() -> None:
        async with ask_another.aio.open_runtime(make_config()) as rt:
            with pytest.raises(ModelNotAllowed, match="Model not allowed: 'gpt-9'"):
                await rt.complete("gpt-9", "hello")
            with pytest.raises(InvalidArgument, match="the prompt is empty"):
                await rt.complete("sim", "  ")
            with pytest.raises(UnknownJob, match="r-nope"):
                await rt.jobs.get("r-nope")

    run(main)


def test_twenty_concurrent_calls(run: RunAsyncio, make_config: Callable[..., Config],
                                 sim: Simulator):
    sim.latency = 0.05  # so the calls overlap at the provider

    async def main() -> list[str]:
        async with ask_another.aio.open_runtime(make_config()) as rt:
            results = await asyncio.gather(*(rt.complete("sim", f"question {i}")
                                             for i in range(20)))
            return [r.text for r in results]

    texts = run(main)
    assert [t.endswith(f"question {i}") for i, t in enumerate(texts)] == [True] * 20
    assert len(sim.requests_for("m1")) == 20


def test_run_turn_with_an_asyncio_interaction_and_an_asyncio_tool(
    run: RunAsyncio, make_config: Callable[..., Config], sim: Simulator
):
    notes: list[str] = []
    where: list[tuple[str, bool]] = []
    sim.script("m1", [ToolCalls([SimCall("write_note", {"text": "hello"}, id="c1")]),
                      Reply("Noted, in several words.")])
    ui = AsyncioUI(where)

    async def main() -> str:
        async with ask_another.aio.open_runtime(make_config()) as rt:
            turn = await rt.run_turn("sim", "write hello", tools=[note_tool(notes, where)],
                                     interaction=ui)
            return turn.text

    assert run(main) == "Noted, in several words."
    assert ui.events == [("update", "pending"), ("permission", "write_note"),
                         ("register", "c1"), ("update", "in_progress"), ("update", "completed")]
    assert notes == ["hello"]
    assert "".join(ui.deltas) == "Noted, in several words."
    assert where == [("request_permission", True), ("tool", True)]


def test_a_conversation_turn_streams_to_an_asyncio_callback(
    run: RunAsyncio, make_config: Callable[..., Config], sim: Simulator
):
    sim.script("m1", [Reply("First this. Then that.")])
    where: list[tuple[str, bool]] = []

    async def on_delta(text: str) -> None:
        on_the_host(where, "delta")

    async def main() -> tuple[str, int]:
        async with ask_another.aio.open_runtime(make_config()) as rt:
            outcome = await rt.conversations.turn("sim", "tell me", on_delta=on_delta)
            stored = await rt.conversations.messages(outcome.conversation_id)
            return outcome.result.text, len(stored)

    text, stored = run(main)
    assert text == "First this. Then that." and stored == 2
    assert where and all(on_host for _, on_host in where)
