"""Kills reach every actor the same way, whatever its hooks await: at its next checkpoint,
with no queued call lost on the way."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from supervisors import (
    Actor,
    ActorExited,
    Caller,
    Crash,
    ExitReason,
    InvalidSpec,
    Killed,
    Normal,
    Shutdown,
    Start,
    spawn,
)


class Plain(Actor):
    """No await anywhere in its hooks; records what it handled and whether terminate ran."""

    async def init(self, seen: list[Any]) -> None:
        self.seen = seen

    async def handle_call(self, msg: Any, caller: Caller) -> Any:
        self.seen.append(msg)
        return msg

    async def handle_cast(self, msg: Any) -> None:
        self.seen.append(msg)
        if msg == "die":
            self.ref.kill()

    async def terminate(self, reason: ExitReason) -> None:
        self.seen.append(("terminate", reason))


async def test_idle_actor_without_awaits_is_killed_at_once(nursery: trio.Nursery) -> None:
    seen: list[Any] = []
    ref = await spawn(nursery, Plain, seen)
    assert await ref.call("hello") == "hello"
    await trio.testing.wait_all_tasks_blocked()
    ref.kill()
    assert await ref.wait() == Killed()
    assert seen == ["hello"]  # terminate does not run on a kill
    with pytest.raises(ActorExited):
        await ref.call("anyone?")


async def test_actor_without_awaits_killed_before_its_task_ran_handles_nothing(
    nursery: trio.Nursery,
) -> None:
    seen: list[Any] = []
    ref = await spawn(nursery, Plain, seen)
    ref.cast("queued before the kill")
    ref.kill()  # no checkpoint since spawn: its task has not run yet
    assert await ref.wait() == Killed()
    assert seen == []


async def test_kill_from_its_own_handler_lands_before_the_next_message(
    nursery: trio.Nursery,
) -> None:
    seen: list[Any] = []
    ref = await spawn(nursery, Plain, seen)
    failures: list[ExitReason] = []

    async def caller() -> None:
        try:
            await ref.call("after the kill", timeout=None)
        except ActorExited as exc:
            failures.append(exc.reason)

    ref.cast("die")
    ref.cast("never handled")
    nursery.start_soon(caller)
    assert await ref.wait() == Killed()
    await trio.testing.wait_all_tasks_blocked()
    assert seen == ["die"]
    assert failures == [Killed()]  # the queued call failed at once, it did not hang


async def test_kill_while_yielding_in_a_backlog_keeps_the_queued_call(
    nursery: trio.Nursery,
) -> None:
    # The actor yields to the scheduler every 32 ready messages; a kill landing there must not
    # take (and lose) the next message: the call queued behind the backlog fails with Killed.
    seen: list[Any] = []
    ref = await spawn(nursery, Plain, seen, mailbox_size=1000)
    for i in range(200):
        ref.cast(i)
    failures: list[ExitReason] = []

    async def caller() -> None:
        try:
            await ref.call("behind the backlog", timeout=None)
        except ActorExited as exc:
            failures.append(exc.reason)

    nursery.start_soon(caller)
    while len(seen) < 31:
        await trio.lowlevel.checkpoint()
    ref.kill()
    assert await ref.wait() == Killed()
    await trio.testing.wait_all_tasks_blocked()
    assert 31 <= len(seen) < 200
    assert "behind the backlog" not in seen
    assert failures == [Killed()]


async def test_link_exit_kills_an_actor_without_awaits(nursery: trio.Nursery) -> None:
    class Linker(Plain):
        async def handle_call(self, msg: Any, caller: Caller) -> Any:
            self.link(msg)
            return None

    class Crashes(Actor):
        async def handle_cast(self, msg: Any) -> None:
            raise RuntimeError("linked crash")

    seen: list[Any] = []
    ref = await spawn(nursery, Linker, seen)
    other = await spawn(nursery, Crashes)
    await ref.call(other)
    other.cast("go")
    reason = await ref.wait()
    assert isinstance(reason, Crash) and str(reason.exception) == "linked crash"


async def test_cancelling_the_nursery_stops_an_actor_without_awaits() -> None:
    seen: list[Any] = []
    async with trio.open_nursery() as nursery:
        ref = await spawn(nursery, Plain, seen)
        await trio.testing.wait_all_tasks_blocked()
        nursery.cancel_scope.cancel()
    assert ref.exit_reason == Shutdown()
    assert seen == [("terminate", Shutdown())]


async def test_subclass_whose_hook_awaits_is_cancelled_mid_await(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    # Its parent needs no cancel scope; the subclass's own hook does.
    class Sleeps(Plain):
        async def handle_info(self, msg: Any) -> None:
            async with trio.open_nursery():
                await trio.sleep(1000)

    seen: list[Any] = []
    plain = await spawn(nursery, Plain, seen)  # the parent class is checked first
    ref = await spawn(nursery, Sleeps, seen)
    ref.send("sleep")
    await trio.testing.wait_all_tasks_blocked()
    ref.kill()
    assert await ref.wait() == Killed()
    assert trio.current_time() == 0
    assert plain.alive


async def test_hook_replaced_on_the_instance_by_one_that_awaits_is_cancelled(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    class Swaps(Plain):
        async def init(self, seen: list[Any]) -> None:
            self.seen = seen
            self.handle_cast = self.slow  # type: ignore[method-assign]

        async def slow(self, msg: Any) -> None:
            await trio.sleep(1000)

    ref = await spawn(nursery, Swaps, [])
    ref.cast("sleep")
    await trio.testing.wait_all_tasks_blocked()
    assert await ref.stop(timeout=5) == Killed()
    assert trio.current_time() == pytest.approx(5)


async def test_stop_of_an_actor_without_awaits_runs_terminate(nursery: trio.Nursery) -> None:
    seen: list[Any] = []
    ref = await spawn(nursery, Plain, seen)
    assert await ref.call("first") == "first"
    assert await ref.stop() == Normal()
    assert seen == ["first", ("terminate", Normal())]


def test_start_refuses_a_bad_mailbox_size_when_made() -> None:
    # Checked once when the spec is made, not at each (re)start of the child.
    with pytest.raises(InvalidSpec, match="mailbox_size"):
        Start(Plain, ([],), mailbox_size=0)


async def test_actor_whose_hooks_await_killed_before_its_task_ran_exits_killed(
    nursery: trio.Nursery,
) -> None:
    class Awaits(Plain):
        async def handle_cast(self, msg: Any) -> None:
            await trio.lowlevel.checkpoint()
            self.seen.append(msg)

    seen: list[Any] = []
    ref = await spawn(nursery, Awaits, seen)
    ref.cast("queued before the kill")
    ref.kill()  # before its task (and so its cancel scope) exists
    assert await ref.wait() == Killed()
    assert seen == []


async def test_crash_in_a_task_of_an_actor_without_awaits_runs_terminate(
    nursery: trio.Nursery,
) -> None:
    async def fails() -> None:
        await trio.lowlevel.checkpoint()
        raise ValueError("task failed")

    class Starts(Plain):
        async def handle_cast(self, msg: Any) -> None:
            self.start_task(fails)

    seen: list[Any] = []
    ref = await spawn(nursery, Starts, seen)
    ref.cast("go")
    reason = await ref.wait()
    assert isinstance(reason, Crash) and str(reason.exception) == "task failed"
    assert seen == [("terminate", reason)]
