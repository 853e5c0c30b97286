"""`supervisors.aio`: trio as the guest of a running asyncio loop, calls both ways, the
cancellation of each side reaching the other, and the docs' supervised-agent example."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from types import ModuleType

import pytest
import trio
import trio.lowlevel
from asyncio_runs import RUNNERS, RunAsyncio, runner

from supervisors.aio import GuestError, HostCancelled, open_guest, run_on_host

EXAMPLES = Path(__file__).parents[2] / "docs" / "examples"


@pytest.fixture(params=RUNNERS)
def run(request: pytest.FixtureRequest) -> RunAsyncio:
    """`run(main)` under `asyncio.run`, then under uvloop."""
    return runner(request.param)


def example(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@contextlib.asynccontextmanager
async def nothing() -> AsyncIterator[str]:
    yield "value"


def test_the_supervised_agent_example_restarts_after_a_crash(run: RunAsyncio) -> None:
    said = run(example("supervised_agent_asyncio").main)
    assert said == ["(\"thought about 'the weather'\", 1)",
                    "crashed: crash (ZeroDivisionError: the agent tripped over the question)",
                    "(\"thought about 'the weather again'\", 1)",
                    "restarts: 1"]


def test_calls_both_ways_in_the_one_thread(run: RunAsyncio) -> None:
    threads: list[str] = []

    async def on_host(x: int) -> int:
        await asyncio.sleep(0)
        threads.append(threading.current_thread().name)
        return x * 2

    async def in_trio(x: int) -> int:
        await trio.lowlevel.checkpoint()
        threads.append(threading.current_thread().name)
        return await run_on_host(on_host, x) + 1

    async def main() -> tuple[str, int]:
        async with open_guest(nothing) as guest:
            return guest.value, await guest.call(in_trio, 20)

    threads_before = threading.active_count()
    assert run(main) == ("value", 41)
    assert threads == [threading.main_thread().name] * 2
    assert threading.active_count() <= threads_before + 1  # at most trio's I/O-wait thread


def test_exceptions_cross_as_themselves(run: RunAsyncio) -> None:
    class Refused(Exception):
        pass

    async def host_refuses() -> None:
        raise Refused("on the host")

    async def trio_side() -> None:
        with pytest.raises(Refused, match="on the host"):
            await run_on_host(host_refuses)
        raise Refused("in trio")

    async def main() -> None:
        async with open_guest(nothing) as guest:
            with pytest.raises(Refused, match="in trio"):
                await guest.call(trio_side)

    run(main)


def test_an_asyncio_cancel_cancels_the_trio_side_before_the_caller_goes_on(run: RunAsyncio) -> None:
    seen: list[str] = []

    async def forever() -> None:
        try:
            await trio.sleep_forever()
        finally:
            seen.append("trio side cancelled")

    async def main() -> None:
        async with open_guest(nothing) as guest:
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(guest.call(forever), 0.1)
            seen.append("caller goes on")

    run(main)
    assert seen == ["trio side cancelled", "caller goes on"]


def test_a_trio_cancel_reaches_the_host_coroutine_as_cancelled_error(run: RunAsyncio) -> None:
    seen: list[str] = []
    started = asyncio.Event()

    async def host_waits() -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            seen.append("host coroutine cancelled")
            raise

    async def trio_side() -> str:
        with trio.move_on_after(0.1):  # the trio side gives up on the host's coroutine
            await run_on_host(host_waits)
        return "moved on"

    async def main() -> str:
        async with open_guest(nothing) as guest:
            return await guest.call(trio_side)

    assert run(main) == "moved on"
    assert seen == ["host coroutine cancelled"]


def test_a_host_task_cancelled_by_the_host_is_a_failure_on_the_trio_side(run: RunAsyncio) -> None:
    async def cancels_itself() -> None:
        raise asyncio.CancelledError

    async def trio_side() -> str:
        try:
            await run_on_host(cancels_itself)
        except HostCancelled as exc:
            return str(exc)
        return "not cancelled"

    async def main() -> str:
        async with open_guest(nothing) as guest:
            return await guest.call(trio_side)

    assert "was cancelled on the host" in run(main)


def test_a_failed_start_raises_its_own_exception(run: RunAsyncio) -> None:
    @contextlib.asynccontextmanager
    async def broken() -> AsyncIterator[None]:
        raise OSError("no database")
        yield

    async def main() -> None:
        async with open_guest(broken):
            pass

    with pytest.raises(OSError, match="no database"):
        run(main)


def test_wrong_sides_say_so(run: RunAsyncio) -> None:
    async def main() -> None:
        async with open_guest(nothing) as guest:
            with pytest.raises(GuestError, match="one guest per asyncio loop"):
                async with open_guest(nothing):
                    pass
            with pytest.raises(GuestError, match="this is trio: under trio, call the trio API"):
                await guest.call(guest.call, trio.sleep, 0)
            with pytest.raises(TypeError, match="make it `async def`"):
                await guest.call(run_on_host, lambda: None)  # type: ignore[arg-type, return-value]
        with pytest.raises(GuestError, match="the trio guest run has ended"):
            guest.call_soon(print)

    run(main)


async def test_run_on_host_under_plain_trio_says_it_needs_a_guest_run() -> None:
    async def host() -> None: ...

    with pytest.raises(GuestError, match="this trio run has no asyncio host"):
        await run_on_host(host)
