"""Cancellation both ways: an asyncio cancel reaches the runtime's call (the provider sees the
request hung up), and the runtime's cancel reaches the host's coroutine as CancelledError."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from asyncio_runs import RunAsyncio

import ask_another.aio
from ask_another import Config, Tool, ToolCall
from ask_another.simulator import Reply, Simulator, Slow, ToolCalls
from ask_another.simulator import ToolCall as SimCall


async def until(condition: Callable[[], bool], seconds: float = 30.0) -> None:
    """Wait for `condition` (a generous bound: the machine may be loaded)."""
    async with asyncio.timeout(seconds):
        while not condition():  # noqa: ASYNC110 - polls the simulator in its own thread
            await asyncio.sleep(0.02)


def test_wait_for_cancels_the_call_in_the_runtime(
    run: RunAsyncio, make_config: Callable[..., Config], sim: Simulator
):
    async def main() -> str:
        async with ask_another.aio.open_runtime(make_config()) as rt:
            await rt.complete("sim", "warm up")  # litellm loaded: the next call goes out at once
            sim.script("m1", [Slow(60)])
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(rt.complete("sim", "take your time"), 2.0)
            await until(lambda: len(sim.hangups) == 1)
            return (await rt.complete("sim", "and now?")).text  # the runtime goes on

    assert run(main).endswith("and now?")
    assert sim.hangups[0].last_user_text == "take your time"


def test_a_task_group_failing_cancels_the_call_in_the_runtime(
    run: RunAsyncio, make_config: Callable[..., Config], sim: Simulator
):
    sim.script("m1", [Slow(60)])

    async def main() -> None:
        async with ask_another.aio.open_runtime(make_config()) as rt:

            async def fail_once_sent() -> None:
                await until(lambda: len(sim.requests_for("m1")) == 1)
                raise LookupError("the host gave up")

            with pytest.raises(ExceptionGroup) as raised:
                async with asyncio.TaskGroup() as group:
                    group.create_task(rt.complete("sim", "hold on"))
                    group.create_task(fail_once_sent())
            assert [type(e) for e in raised.value.exceptions] == [LookupError]
            await until(lambda: len(sim.hangups) == 1)

    run(main)


def test_cancelling_the_task_cancels_a_running_host_tool(
    run: RunAsyncio, make_config: Callable[..., Config], sim: Simulator
):
    """Task.cancel on the caller: the trio turn is cancelled, which cancels the host tool it
    was awaiting (CancelledError in the tool), and the caller ends only after that."""
    seen: list[str] = []
    sim.script("m1", [ToolCalls([SimCall("wait_forever", {}, id="w1")]), Reply("never")])
    started = asyncio.Event()

    async def wait_forever(call: ToolCall) -> object:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            seen.append("tool cancelled")
            raise
        return None

    tool = Tool(name="wait_forever", description="waits", schema={"type": "object"},
                class_="read", run=wait_forever)

    async def main() -> None:
        async with ask_another.aio.open_runtime(make_config()) as rt:
            turn = asyncio.create_task(rt.run_turn("sim", "go", tools=[tool]))
            await started.wait()
            turn.cancel()
            with pytest.raises(asyncio.CancelledError):
                await turn
            seen.append("caller cancelled")

    run(main)
    assert seen == ["tool cancelled", "caller cancelled"]


def test_the_runtimes_cancel_of_a_tool_call_reaches_it_as_cancelled_error(
    run: RunAsyncio, make_config: Callable[..., Config], sim: Simulator
):
    """A `CallHandle.cancel` from the host's UI cancels that one call on the trio side, which
    the asyncio tool sees as CancelledError; the turn goes on and tells the model."""
    sim.script("m1", [ToolCalls([SimCall("wait_forever", {}, id="w1")]),
                      Reply("It was cancelled.")])
    seen: list[str] = []
    handles: dict[str, ask_another.CallHandle] = {}
    started = asyncio.Event()

    async def wait_forever(call: ToolCall) -> object:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            seen.append("tool cancelled")
            raise
        return None

    class UI:
        async def tool_updated(self, update: ask_another.ToolUpdate) -> None:
            pass

        async def request_permission(self, request: ask_another.PermissionRequest
                                     ) -> ask_another.Decision:
            return ask_another.ALLOW

        async def register_call(self, tool_call_id: str, handle: ask_another.CallHandle
                                ) -> None:
            handles[tool_call_id] = handle

        async def ask_choice(self, choice: ask_another.Choice) -> str:
            return ""

        async def text_delta(self, text: str) -> None:
            pass

    tool = Tool(name="wait_forever", description="waits", schema={"type": "object"},
                class_="read", run=wait_forever)

    async def main() -> tuple[str, list[str]]:
        async with ask_another.aio.open_runtime(make_config()) as rt:
            turn = asyncio.create_task(rt.run_turn("sim", "go", tools=[tool], interaction=UI()))
            await started.wait()
            handles["w1"].cancel("stopped from the host's UI")
            result = await turn
            return result.text, [c.status for c in result.calls]

    text, statuses = run(main)
    assert seen == ["tool cancelled"]
    assert (text, statuses) == ("It was cancelled.", ["failed"])
    told = sim.requests_for("m1")[-1].messages[-1]
    assert told["role"] == "tool" and "stopped from the host's UI" in told["content"]
