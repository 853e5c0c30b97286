"""The OTP rules of issue 12, one regression test (or two) each; each failed on the old code."""

from __future__ import annotations

import gc
import weakref
from typing import Any

import pytest
import trio
import trio.lowlevel
import trio.testing
from actors_for_tests import Echo, Journal, Stubborn

from supervisors import (
    NOREPLY,
    Actor,
    ActorExited,
    ActorRef,
    Caller,
    CallTimeout,
    Crash,
    Down,
    Exit,
    ExitReason,
    MaxChildren,
    MonitorRef,
    NoProcess,
    Registry,
    Shutdown,
    child_spec,
    open_dynamic_supervisor,
    open_supervisor,
    spawn,
    start_supervisor,
)


class Recorder(Actor):
    """Records its start and its terminate (with the reason) in a shared journal."""

    async def init(self, journal: Journal, tag: str) -> None:
        self.journal = journal
        self.tag = tag

    async def terminate(self, reason: ExitReason) -> None:
        self.journal.append((self.tag, reason))


# -- a cancelled tree shuts down gracefully ---------------------------------------------------


async def test_cancelled_scope_around_open_supervisor_stops_children_in_reverse_order(
    autojump_clock: trio.testing.MockClock,
) -> None:
    journal: Journal = []
    children = [child_spec(Recorder, journal, tag, id=tag) for tag in ("a", "b", "c")]
    with trio.move_on_after(1):
        async with open_supervisor(children):
            await trio.sleep_forever()
    assert journal == [("c", Shutdown()), ("b", Shutdown()), ("a", Shutdown())]


async def test_cancelled_nursery_owning_a_tree_stops_children_in_reverse_order() -> None:
    journal: Journal = []
    children = [child_spec(Recorder, journal, tag, id=tag) for tag in ("a", "b", "c")]
    async with trio.open_nursery() as nursery:
        sup = await start_supervisor(nursery, children)
        nursery.cancel_scope.cancel()
    assert journal == [("c", Shutdown()), ("b", Shutdown()), ("a", Shutdown())]
    assert sup.exit_reason == Shutdown()


async def test_cancelled_tree_keeps_each_childs_shutdown_policy(
    autojump_clock: trio.testing.MockClock,
) -> None:
    journal: Journal = []
    children = [
        child_spec(Echo, journal, "first", id="first"),
        child_spec(Stubborn, journal, "stubborn", id="stubborn", shutdown=2),
    ]
    start = trio.current_time()
    with trio.move_on_after(1):
        async with open_supervisor(children):
            await trio.sleep_forever()
    # The stubborn child got its 2 s, was killed, then the first child stopped gracefully.
    assert trio.current_time() - start == pytest.approx(3)
    assert journal[-2:] == [("terminating", "stubborn"), ("stop", "first")]


# -- exceptions from the body come out as themselves -------------------------------------------


async def test_exception_in_open_supervisor_body_is_not_wrapped() -> None:
    journal: Journal = []
    with pytest.raises(ValueError, match="from the body"):
        async with open_supervisor([child_spec(Recorder, journal, "a")]):
            raise ValueError("from the body")
    assert journal == [("a", Shutdown())]


async def test_exception_in_open_dynamic_supervisor_body_is_not_wrapped() -> None:
    with pytest.raises(KeyError):
        async with open_dynamic_supervisor() as sup:
            await sup.start_child(child_spec(Echo))
            raise KeyError("from the body")


# -- a burst of start_child calls is queued ------------------------------------------------------


class SlowInit(Actor):
    async def init(self) -> None:
        await trio.lowlevel.checkpoint()


async def test_burst_of_3000_start_child_calls_is_queued_not_refused() -> None:
    outcomes: list[str] = []
    async with open_dynamic_supervisor(max_children=2500) as sup:
        spec = child_spec(SlowInit, restart="temporary")

        async def start() -> None:
            try:
                await sup.start_child(spec)
                outcomes.append("started")
            except MaxChildren:
                outcomes.append("max_children")

        async with trio.open_nursery() as burst:
            for _ in range(3000):
                burst.start_soon(start)
    assert outcomes.count("started") == 2500
    assert outcomes.count("max_children") == 500


async def test_supervisors_accept_a_mailbox_size() -> None:
    async with open_dynamic_supervisor(mailbox_size=2) as sup:
        assert sup.statistics().capacity == 2
        async with trio.open_nursery() as burst:
            for _ in range(50):
                burst.start_soon(sup.start_child, child_spec(SlowInit, restart="temporary"))
    async with open_supervisor([], mailbox_size=3) as static:
        assert static.statistics().capacity == 3


# -- the intensity window is inclusive -----------------------------------------------------------


async def test_intensity_boundary_is_inclusive(autojump_clock: trio.testing.MockClock) -> None:
    registry = Registry()
    async with trio.open_nursery() as nursery:
        sup = await start_supervisor(
            nursery,
            [child_spec(Echo, name="echo", registry=registry)],
            max_restarts=1,
            max_seconds=5,
        )
        echo = registry.whereis("echo")
        assert echo is not None
        echo.cast("crash")  # t=0
        await echo.wait()
        await trio.testing.wait_all_tasks_blocked()
        await trio.sleep(5)
        echo = registry.whereis("echo")
        assert echo is not None
        echo.cast("crash")  # t=5.0: two restarts within 5 s
        with trio.fail_after(60):
            assert await sup.wait() == Shutdown("reached_max_restart_intensity")


# -- a caller that gave up is released at once ---------------------------------------------------


class Holder(Actor):
    """Defers every call; keeps the callers only if asked to."""

    async def init(self, keep: bool) -> None:
        self.keep = keep
        self.callers: list[Caller] = []

    async def handle_call(self, msg: Any, caller: Caller) -> Any:
        if msg == "reply all":
            for waiting in self.callers:
                waiting.reply("late")
            return len(self.callers)
        if self.keep:
            self.callers.append(caller)
        return NOREPLY


class Payload:
    pass


async def _give_up_on(ref: ActorRef, kept: list[weakref.ref[Payload]], after: float) -> None:
    """Call `ref` from a task of its own (so no frame of the test holds the message) and give
    up after `after` seconds, once with a call timeout and once by cancellation."""
    payload = Payload()
    kept.append(weakref.ref(payload))
    try:
        await ref.call(payload, timeout=after)
    except CallTimeout:
        pass
    payload = Payload()
    kept.append(weakref.ref(payload))
    with trio.move_on_after(after):
        await ref.call(payload, timeout=None)


async def test_caller_that_gave_up_on_a_deferred_reply_is_released(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    ref = await spawn(nursery, Holder, False)
    kept: list[weakref.ref[Payload]] = []
    async with trio.open_nursery() as callers:
        callers.start_soon(_give_up_on, ref, kept, 1)
    gc.collect()
    assert [k() for k in kept] == [None, None]  # the runtime holds no Caller, no message


async def test_caller_kept_by_the_actor_drops_message_and_task_when_it_gives_up(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    ref = await spawn(nursery, Holder, True)
    kept: list[weakref.ref[Payload]] = []
    async with trio.open_nursery() as callers:
        callers.start_soon(_give_up_on, ref, kept, 1)
    gc.collect()
    assert [k() for k in kept] == [None, None]
    assert await ref.call("reply all") == 2  # the late replies are dropped silently
    assert ref.alive


# -- a pending timeout keeps nothing else alive --------------------------------------------------


async def test_pending_call_timeout_keeps_no_finished_actor_alive(nursery: trio.Nursery) -> None:
    holder = await spawn(nursery, Holder, False)
    nursery.start_soon(holder.call, "never answered", 600)
    await trio.testing.wait_all_tasks_blocked()
    refs: list[weakref.ref[ActorRef]] = []
    for _ in range(10_000):
        ref = await spawn(nursery, Echo)
        assert await ref.call("ping", timeout=600) == "ping"
        await ref.stop()
        refs.append(weakref.ref(ref))
    del ref
    gc.collect()
    assert sum(1 for r in refs if r() is not None) == 0


# -- exit reasons agree --------------------------------------------------------------------------


class DoubleCrash(Actor):
    async def init(self) -> None:
        self.trap_exits = True

    async def handle_call(self, msg: Any, caller: Caller) -> Any:
        raise RuntimeError("first: in handle_call")

    async def terminate(self, reason: ExitReason) -> None:
        raise OSError("second: in terminate")


class Witness(Actor):
    async def init(self, target: ActorRef) -> None:
        self.trap_exits = True
        self.inbox: list[Any] = []
        self.monitor(target)
        self.link(target)

    async def handle_call(self, msg: Any, caller: Caller) -> Any:
        return list(self.inbox)

    async def handle_info(self, msg: Any) -> None:
        self.inbox.append(msg)


async def test_exit_reasons_agree_when_terminate_crashes_after_a_crash(
    nursery: trio.Nursery, events: list[dict[str, Any]]
) -> None:
    registry = Registry()
    sup = await start_supervisor(
        nursery, [child_spec(DoubleCrash, name="d", registry=registry, restart="temporary")]
    )
    target = registry.whereis("d")
    assert target is not None
    witness = await spawn(nursery, Witness, target)
    with pytest.raises(ActorExited) as caught:
        await target.call("go")
    final = await target.wait()
    await trio.testing.wait_all_tasks_blocked()
    down, exit_ = await witness.call("inbox")
    assert isinstance(down, Down) and isinstance(exit_, Exit)
    # The first crash is the reason everyone sees; terminate's crash is logged.
    assert isinstance(final, Crash) and isinstance(final.exception, RuntimeError)
    assert caught.value.reason == final == down.reason == exit_.reason
    exited = [e for e in events if e["event"] == "supervisor.child_exited"]
    assert [e["reason"] for e in exited] == [str(final)]
    assert [e["phase"] for e in events if e["event"] == "actor.crashed"] == [
        "message",
        "terminate",
    ]
    assert sup.alive


# -- stop() does not drop what was sent before it -------------------------------------------------


class CastLog(Actor):
    async def init(self, seen: list[Any]) -> None:
        self.seen = seen

    async def handle_cast(self, msg: Any) -> None:
        self.seen.append(msg)

    async def terminate(self, reason: ExitReason) -> None:
        self.seen.append("terminate")


async def test_stop_request_is_queued_after_earlier_casts(nursery: trio.Nursery) -> None:
    seen: list[Any] = []
    ref = await spawn(nursery, CastLog, seen)
    for n in range(5):
        ref.cast(n)
    await ref.stop()
    assert seen == [0, 1, 2, 3, 4, "terminate"]


class StopsOnFirst(CastLog):
    async def handle_cast(self, msg: Any) -> None:
        await super().handle_cast(msg)
        self.stop()


async def test_casts_dropped_at_exit_are_logged(
    nursery: trio.Nursery, events: list[dict[str, Any]]
) -> None:
    seen: list[Any] = []
    ref = await spawn(nursery, StopsOnFirst, seen)
    for n in range(4):
        ref.cast(n)
    await ref.wait()
    assert seen == [0, "terminate"]
    [dropped] = [e for e in events if e["event"] == "actor.messages_dropped"]
    assert dropped["count"] == 3


# -- monitors are references --------------------------------------------------------------------


class Monitorer(Actor):
    async def init(self) -> None:
        self.inbox: list[Any] = []

    async def handle_call(self, msg: Any, caller: Caller) -> Any:
        match msg:
            case ("monitor", ActorRef() as ref):
                return self.monitor(ref)
            case ("demonitor", MonitorRef() as monitor):
                return self.demonitor(monitor, flush=True)
            case "inbox":
                return list(self.inbox)

    async def handle_info(self, msg: Any) -> None:
        self.inbox.append(msg)


async def test_two_monitors_on_one_target_give_two_downs(nursery: trio.Nursery) -> None:
    watcher = await spawn(nursery, Monitorer)
    target = await spawn(nursery, Echo)
    first = await watcher.call(("monitor", target))
    second = await watcher.call(("monitor", target))
    assert isinstance(first, MonitorRef) and first is not second
    await target.stop()
    await trio.testing.wait_all_tasks_blocked()
    inbox = await watcher.call("inbox")
    assert [d.monitor for d in inbox] == [first, second]


async def test_demonitor_flush_removes_a_pending_down(nursery: trio.Nursery) -> None:
    class Blocked(Monitorer):
        async def handle_call(self, msg: Any, caller: Caller) -> Any:
            match msg:
                case ("watch then wait", ActorRef() as ref, trio.Event() as go):
                    monitor = self.monitor(ref)
                    await go.wait()  # meanwhile the target exits: its Down is queued
                    return self.demonitor(monitor, flush=True)
            return await super().handle_call(msg, caller)

    watcher = await spawn(nursery, Blocked)
    target = await spawn(nursery, Echo)
    go = trio.Event()
    result: list[Any] = []

    async def ask() -> None:
        result.append(await watcher.call(("watch then wait", target, go)))

    nursery.start_soon(ask)
    await trio.testing.wait_all_tasks_blocked()
    await target.stop()
    go.set()
    await trio.testing.wait_all_tasks_blocked()
    assert result == [False]  # the Down had already been sent...
    assert await watcher.call("inbox") == []  # ...and the flush removed it


# -- which_children / count_children wait as long as it takes ----------------------------------


async def test_which_children_defaults_to_no_timeout(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    journal: Journal = []
    sup = await start_supervisor(
        nursery, [child_spec(Stubborn, journal, "slow", id="slow", shutdown=10)]
    )
    nursery.start_soon(sup.terminate_child, "slow")
    await trio.testing.wait_all_tasks_blocked()
    # The supervisor is busy for 10 s stopping the child: OTP's infinity default waits.
    [info] = await sup.which_children()
    assert info.status == "stopped"
    assert (await sup.count_children()).active == 0


# -- calls by name wait for a restart -------------------------------------------------------------


class SlowStop(Echo):
    async def terminate(self, reason: ExitReason) -> None:
        await trio.sleep(1)


async def test_call_by_name_waits_for_the_restarted_actor(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    registry = Registry()
    await start_supervisor(nursery, [child_spec(SlowStop, name="svc", registry=registry)])
    first = registry.whereis("svc")
    assert first is not None
    first.cast("crash")
    await trio.testing.wait_all_tasks_blocked()
    # Mid-restart: the name still names the crashed actor, which is in its terminate.
    assert registry.whereis("svc") is first and first.alive is not False
    assert await registry.call("svc", "hello", timeout=5) == "hello"
    assert registry.whereis("svc") not in (None, first)


async def test_call_by_name_nobody_ever_held_fails_at_once_with_noproc(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # OTP's noproc: no actor has the name and no supervisor will start one, so nothing to wait
    # for (the old code waited out the whole timeout).
    registry = Registry()
    start = trio.current_time()
    with pytest.raises(NoProcess, match="'nobody'"):
        await registry.call("nobody", "hello", timeout=2)
    assert trio.current_time() == start
