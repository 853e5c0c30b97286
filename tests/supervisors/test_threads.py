"""The runtime's entry points called from threads that are not its own, with real threads.

A plain thread's `cast`, `send`, `kill` and `Caller.reply` are handed to the actor's trio run
and work; anything awaited outside that run (another thread's `trio.run`), or a synchronous
entry point from such a thread, raises `WrongThread` naming what works. Nothing leaves an
actor deaf or a caller parked. (No MockClock here: its autojump cannot see other threads.)
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
import trio
import trio.testing
from actors_for_tests import Echo

from supervisors import NOREPLY, Actor, Caller, Killed, WrongThread, open_supervisor, spawn

GENEROUS = 60.0
"""Seconds a call may wait for a thread on a loaded machine; a pass takes milliseconds."""


async def test_cast_and_send_from_a_plain_thread_reach_an_idle_actor(
    nursery: trio.Nursery,
) -> None:
    ref = await spawn(nursery, Echo)
    await trio.testing.wait_all_tasks_blocked()  # the actor is parked on its empty mailbox

    def worker() -> None:
        ref.cast("from a thread")
        ref.send("info from a thread")

    await trio.to_thread.run_sync(worker)
    # Not deaf: the cast was handled, and the actor answers as before.
    assert await ref.call("casts", timeout=GENEROUS) == ["from a thread"]


async def test_kill_from_a_plain_thread_kills(nursery: trio.Nursery) -> None:
    ref = await spawn(nursery, Echo)
    await trio.to_thread.run_sync(ref.kill)
    assert await ref.wait() == Killed()


class HandsToAThread(Actor):
    """Answers each call from a thread of its own (say, a blocking client's callback)."""

    async def init(self) -> None:
        self.threads: list[threading.Thread] = []

    async def handle_call(self, msg: Any, caller: Caller) -> Any:
        thread = threading.Thread(target=caller.reply, args=(f"{msg} from a thread",))
        self.threads.append(thread)
        thread.start()
        return NOREPLY

    async def terminate(self, reason: Any) -> None:
        for thread in self.threads:
            await trio.to_thread.run_sync(thread.join)


async def test_a_reply_from_a_plain_thread_reaches_the_caller(nursery: trio.Nursery) -> None:
    ref = await spawn(nursery, HandsToAThread)
    for n in range(3):
        assert await ref.call(n, timeout=GENEROUS) == f"{n} from a thread"
    await ref.stop()


async def test_awaitables_from_a_thread_work_through_from_thread(nursery: trio.Nursery) -> None:
    ref = await spawn(nursery, Echo)

    def worker() -> Any:
        return trio.from_thread.run(ref.call, "hello")

    assert await trio.to_thread.run_sync(worker) == "hello"


async def test_another_threads_trio_run_gets_wrong_thread_and_the_actor_is_unharmed(
    nursery: trio.Nursery,
) -> None:
    ref = await spawn(nursery, Echo)
    await trio.testing.wait_all_tasks_blocked()
    errors: list[str] = []

    async def elsewhere() -> None:
        for name, attempt in [
            ("call", lambda: ref.call("x")),
            ("stop", lambda: ref.stop()),
            ("wait", lambda: ref.wait()),
            ("spawn", lambda: spawn(nursery, Echo)),
            ("supervisor", lambda: _open_supervisor_in(nursery)),
        ]:
            with pytest.raises(WrongThread, match="trio") as raised:
                await attempt()
            errors.append(name)
            assert "trio_token" in str(raised.value)
        for sync in (lambda: ref.cast("x"), lambda: ref.send("x"), ref.kill):
            with pytest.raises(WrongThread, match="from_thread"):
                sync()

    await trio.to_thread.run_sync(trio.run, elsewhere)
    assert errors == ["call", "stop", "wait", "spawn", "supervisor"]
    assert ref.alive
    assert await ref.call("still here", timeout=GENEROUS) == "still here"
    assert await ref.call("casts", timeout=GENEROUS) == []


async def _open_supervisor_in(nursery: trio.Nursery) -> None:
    from supervisors import start_supervisor

    await start_supervisor(nursery, [])


async def test_a_call_awaited_by_another_threads_run_is_refused_before_it_is_sent() -> None:
    async with open_supervisor([]) as sup:

        def other_run() -> None:
            with pytest.raises(WrongThread):
                trio.run(sup.which_children)

        await trio.to_thread.run_sync(other_run)
        assert await sup.which_children(timeout=GENEROUS) == []
