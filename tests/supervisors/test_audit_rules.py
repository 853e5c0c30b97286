"""Rules an OTP audit found broken (issue 24), one regression test each; each failed on the old
code: supervisors trap exits and survive bad requests, a caller queued behind a stop learns the
final exit reason, an idle timeout of 0 never pre-empts a queued message, `demonitor` of
something that is not a monitor is an error."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing
from actors_for_tests import Echo, Journal

from supervisors import (
    Actor,
    ActorExited,
    Caller,
    Crash,
    ExitReason,
    IdleTimeout,
    InvalidSpec,
    Normal,
    Registry,
    child_spec,
    open_dynamic_supervisor,
    open_supervisor,
    spawn,
)


class Linker(Echo):
    """Echo that links itself to whatever ref it is sent."""

    async def handle_call(self, msg: Any, caller: Caller) -> Any:
        match msg:
            case ("link", ref):
                self.link(ref)
                return "linked"
        return await super().handle_call(msg, caller)


async def test_a_crash_of_a_process_merely_linked_to_a_supervisor_does_not_kill_it(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    journal: Journal = []
    async with open_supervisor([child_spec(Echo, journal, "child", id="child")]) as sup:
        stranger = await spawn(nursery, Linker, journal, "stranger")
        assert await stranger.call(("link", sup)) == "linked"
        stranger.cast("crash")
        assert isinstance(await stranger.wait(), Crash)
        await trio.testing.wait_all_tasks_blocked()
        assert sup.alive
        (child,) = await sup.which_children()
        assert child.status == "running" and child.restarts == 0


async def test_terminate_child_of_a_gone_name_is_a_clear_error_and_the_supervisor_lives(
    autojump_clock: trio.testing.MockClock,
) -> None:
    registry = Registry()
    async with open_dynamic_supervisor() as sup:
        kept = await sup.start_child(child_spec(Echo))
        with pytest.raises(InvalidSpec, match=r"got None \(registry.whereis\(\) returns None"):
            await sup.terminate_child(registry.whereis("gone"))  # type: ignore[arg-type]
        assert sup.alive and kept.alive
        assert (await sup.count_children()).active == 1


@pytest.mark.parametrize("opener", [open_supervisor, open_dynamic_supervisor])
async def test_unknown_requests_and_casts_never_crash_a_supervisor(
    opener: Any, autojump_clock: trio.testing.MockClock, events: list[dict[str, Any]]
) -> None:
    async with opener(*([[child_spec(Echo)]] if opener is open_supervisor else [])) as sup:
        with pytest.raises(InvalidSpec, match="does not know the request 'garbage'"):
            await sup.call("garbage")
        sup.cast("garbage")
        await trio.testing.wait_all_tasks_blocked()
        assert sup.alive
        assert (await sup.count_children()).specs in (0, 1)
    assert any(e["event"] == "supervisor.unexpected_message" for e in events)


class FailingTerminate(Actor):
    async def handle_call(self, msg: Any, caller: Caller) -> Any:
        if msg == "busy":
            await trio.sleep(1)
        return msg

    async def terminate(self, reason: ExitReason) -> None:
        await trio.sleep(1)
        raise RuntimeError("terminate failed")


async def test_a_caller_queued_behind_a_stop_learns_the_final_exit_reason_at_the_exit(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    ref = await spawn(nursery, FailingTerminate)
    failures: list[tuple[float, ExitReason]] = []

    async def queued_call() -> None:
        with pytest.raises(ActorExited) as raised:
            await ref.call("behind the stop", timeout=None)
        failures.append((trio.current_time(), raised.value.reason))

    nursery.start_soon(ref.call, "busy")
    await trio.testing.wait_all_tasks_blocked()
    nursery.start_soon(ref.stop)
    await trio.testing.wait_all_tasks_blocked()
    nursery.start_soon(queued_call)
    reason = await ref.wait()
    await trio.testing.wait_all_tasks_blocked()
    assert isinstance(reason, Crash)  # terminate's crash after a normal stop is the reason
    assert failures == [(2.0, reason)]  # at the exit (after terminate's second), not Normal()


class Idle(Actor):
    async def init(self, seen: list[Any], keep: bool) -> None:
        self.seen = seen
        self.keep = keep
        self.set_idle_timeout(0)

    async def handle_call(self, msg: Any, caller: Caller) -> Any:
        self.seen.append(msg)
        return msg

    async def handle_cast(self, msg: Any) -> None:
        self.seen.append(msg)

    async def handle_info(self, msg: Any) -> None:
        if isinstance(msg, IdleTimeout):
            if not self.seen or self.seen[-1] != "idle":
                self.seen.append("idle")
            if not self.keep:
                self.set_idle_timeout(None)


async def test_idle_timeout_zero_never_preempts_a_queued_message(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    seen: list[Any] = []
    ref = await spawn(nursery, Idle, seen, False)
    for n in range(3):
        ref.cast(n)  # queued before the actor's task first runs
    await trio.testing.wait_all_tasks_blocked()
    assert seen == [0, 1, 2, "idle"]


async def test_idle_timeout_zero_kept_on_never_starves_the_mailbox(nursery: trio.Nursery) -> None:
    # Real clock: the old code looped on timeouts forever without ever blocking.
    seen: list[Any] = []
    ref = await spawn(nursery, Idle, seen, True)
    with trio.fail_after(5):
        assert await ref.call("answered", timeout=None) == "answered"
    assert seen[0] == "answered" or seen[:2] == ["idle", "answered"]
    assert await ref.stop() == Normal()


class Demonitor(Actor):
    async def handle_call(self, msg: Any, caller: Caller) -> Any:
        return self.demonitor(msg)


async def test_demonitor_of_something_that_is_not_a_monitor_is_an_error(
    nursery: trio.Nursery,
) -> None:
    ref = await spawn(nursery, Demonitor)
    with pytest.raises(ActorExited) as raised:
        await ref.call(ref)  # an ActorRef, not the MonitorRef monitor() returns
    assert isinstance(raised.value.reason, Crash)
    assert isinstance(raised.value.reason.exception, InvalidSpec)
