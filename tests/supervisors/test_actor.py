"""Actor lifecycle: init, terminate and exit reasons, stop and kill, tasks the actor owns."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing
from actors_for_tests import Echo, FailingInit, Journal, Stubborn, Ticker

from supervisors import (
    Actor,
    ActorExited,
    ActorRef,
    Caller,
    Crash,
    ExitReason,
    IdleTimeout,
    InvalidSpec,
    Killed,
    Normal,
    Shutdown,
    StartError,
    TaskCancelled,
    TaskDone,
    TaskHandle,
    spawn,
)


async def test_spawn_returns_after_init_has_finished(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    class SlowInit(Actor):
        async def init(self) -> None:
            await trio.sleep(3)
            self.ready = True

        async def handle_call(self, msg: Any, caller: Caller) -> Any:
            return self.ready

    ref = await spawn(nursery, SlowInit)
    assert trio.current_time() == pytest.approx(3)
    assert await ref.call("ready?") is True


async def test_init_failure_raises_start_error_to_the_spawner(nursery: trio.Nursery) -> None:
    with pytest.raises(StartError, match="failed to start") as info:
        await spawn(nursery, FailingInit, "no database", name="db")
    assert info.value.child == "db"
    assert isinstance(info.value.reason, Crash)
    assert isinstance(info.value.__cause__, ValueError)
    assert str(info.value.__cause__) == "no database"


async def test_init_that_calls_stop_fails_the_start_with_that_reason(
    nursery: trio.Nursery,
) -> None:
    class Refuses(Actor):
        async def init(self) -> None:
            self.stop(Shutdown("not today"))

    with pytest.raises(StartError) as info:
        await spawn(nursery, Refuses)
    assert info.value.reason == Shutdown("not today")


async def test_unexpected_init_arguments_give_a_clear_start_error(nursery: trio.Nursery) -> None:
    class NoInit(Actor):
        pass

    with pytest.raises(StartError) as info:
        await spawn(nursery, NoInit, 1, 2)
    assert "does not override init()" in str(info.value.__cause__)


async def test_spawn_refuses_bad_arguments(nursery: trio.Nursery) -> None:
    with pytest.raises(InvalidSpec, match="Actor subclass"):
        await spawn(nursery, object)  # type: ignore[arg-type]
    with pytest.raises(InvalidSpec, match="mailbox_size"):
        await spawn(nursery, Echo, mailbox_size=0)


async def test_self_stop_exits_normally_after_terminate(nursery: trio.Nursery) -> None:
    journal: Journal = []
    ref = await spawn(nursery, Echo, journal, "x")
    assert await ref.call("stop") == "stopping"
    assert await ref.wait() == Normal()
    assert journal == [("start", "x"), ("stop", "x")]
    assert not ref.alive and ref.exit_reason == Normal()


async def test_crash_in_handle_cast_runs_terminate_and_exits_with_crash(
    nursery: trio.Nursery,
) -> None:
    seen: list[ExitReason] = []

    class Watcher(Echo):
        async def terminate(self, reason: ExitReason) -> None:
            seen.append(reason)

    ref = await spawn(nursery, Watcher)
    ref.cast("crash")
    reason = await ref.wait()
    assert isinstance(reason, Crash) and isinstance(reason.exception, RuntimeError)
    assert seen == [reason]


async def test_unhandled_call_crashes_the_actor_as_in_elixir(nursery: trio.Nursery) -> None:
    class Mute(Actor):
        pass

    ref = await spawn(nursery, Mute)
    with pytest.raises(ActorExited, match="does not handle"):
        await ref.call("anything")


async def test_stop_runs_terminate_with_the_given_reason(nursery: trio.Nursery) -> None:
    seen: list[ExitReason] = []

    class Watcher(Echo):
        async def terminate(self, reason: ExitReason) -> None:
            seen.append(reason)

    ref = await spawn(nursery, Watcher)
    assert await ref.stop(Shutdown("maintenance")) == Shutdown("maintenance")
    assert seen == [Shutdown("maintenance")]
    assert await ref.stop() == Shutdown("maintenance")  # already gone: returns the reason


async def test_stop_jumps_the_queue(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    ref = await spawn(nursery, Echo)
    nursery.start_soon(ref.call, ("sleep", 3), None)
    await trio.testing.wait_all_tasks_blocked()
    for i in range(100):
        ref.cast(i)
    assert await ref.stop() == Normal()
    assert trio.current_time() == pytest.approx(3)  # finished the message in hand, no more


async def test_stop_cancels_an_actor_that_ignores_it_after_the_timeout(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    journal: Journal = []
    ref = await spawn(nursery, Stubborn, journal, "s")
    assert await ref.stop(timeout=3) == Killed()
    assert trio.current_time() == pytest.approx(3)
    assert journal == [("start", "s"), ("terminating", "s")]


async def test_kill_cancels_at_once_without_terminate(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    journal: Journal = []
    ref = await spawn(nursery, Echo, journal, "k")
    errors: list[ActorExited] = []

    async def caller() -> None:
        try:
            await ref.call(("sleep", 100), timeout=None)
        except ActorExited as exc:
            errors.append(exc)

    nursery.start_soon(caller)
    await trio.testing.wait_all_tasks_blocked()
    ref.kill()
    assert await ref.wait() == Killed()
    await trio.testing.wait_all_tasks_blocked()
    assert [e.reason for e in errors] == [Killed()]
    assert str(errors[0]).count("exited") == 1
    assert trio.current_time() == 0
    assert journal == [("start", "k")]


async def test_cancelling_the_nursery_shuts_the_actor_down_gracefully() -> None:
    journal: list[tuple[str, Any]] = []
    async with trio.open_nursery() as nursery:
        ref = await spawn(nursery, Echo, journal)
        nursery.cancel_scope.cancel()
    assert ref.exit_reason == Shutdown()
    assert journal == [("start", None), ("stop", None)]


async def test_wait_works_from_plain_trio_code(nursery: trio.Nursery) -> None:
    ref = await spawn(nursery, Echo)
    reasons: list[ExitReason] = []

    async def waiter() -> None:
        reasons.append(await ref.wait())

    nursery.start_soon(waiter)
    nursery.start_soon(waiter)
    await trio.testing.wait_all_tasks_blocked()
    assert reasons == []
    ref.cast("crash")
    await trio.testing.wait_all_tasks_blocked()
    assert len(reasons) == 2 and all(isinstance(r, Crash) for r in reasons)


async def test_ref_is_hashable_and_named(nursery: trio.Nursery) -> None:
    a = await spawn(nursery, Echo, name=("job", "abc"))
    b = await spawn(nursery, Echo)
    assert len({a, b, a}) == 2
    assert a.name == ("job", "abc")
    assert isinstance(b.name, str) and b.name.startswith("Echo@")
    with pytest.raises(TypeError, match="made by spawn"):
        ActorRef()


class Job(Actor):
    """The documented pattern: long work in a task the actor owns; status and cancel stay live."""

    async def init(self, seconds: float) -> None:
        self.state = "running"
        self.result: Any = None
        self.waiters: list[Caller] = []
        self.task: TaskHandle = self.start_task(self.work, seconds)

    async def work(self, seconds: float) -> str:
        await trio.sleep(abs(seconds))
        if seconds < 0:
            raise RuntimeError("bad job")
        return f"worked {seconds} s"

    async def handle_call(self, msg: Any, caller: Caller) -> Any:
        match msg:
            case "status":
                return self.state
            case "cancel":
                self.task.cancel()
                return "cancelling"
            case "result":
                if self.state == "running":
                    self.waiters.append(caller)
                    from supervisors import NOREPLY

                    return NOREPLY
                return self.result
        raise ValueError(msg)

    async def handle_info(self, msg: Any) -> None:
        match msg:
            case TaskDone(_, value):
                self.state, self.result = "done", value
            case TaskCancelled():
                self.state, self.result = "cancelled", None
        for waiter in self.waiters:
            waiter.reply(self.result)
        self.waiters.clear()


async def test_long_work_in_a_task_keeps_the_actor_responsive(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    ref = await spawn(nursery, Job, 60)
    assert trio.current_time() == 0
    await trio.sleep(10)
    assert await ref.call("status") == "running"  # answered while the work runs
    assert await ref.call("result", timeout=None) == "worked 60 s"
    assert trio.current_time() == pytest.approx(60)
    assert await ref.call("status") == "done"


async def test_cancelling_the_task_tells_the_actor(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    ref = await spawn(nursery, Job, 60)
    await trio.sleep(1)
    assert await ref.call("cancel") == "cancelling"
    await trio.testing.wait_all_tasks_blocked()
    assert await ref.call("status") == "cancelled"
    assert trio.current_time() == pytest.approx(1)


async def test_exception_in_a_task_crashes_the_actor(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    ref = await spawn(nursery, Job, -1)
    reason = await ref.wait()
    assert isinstance(reason, Crash) and str(reason.exception) == "bad job"


async def test_tasks_are_cancelled_when_the_actor_exits(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    ref = await spawn(nursery, Job, 60)
    await trio.sleep(1)
    assert await ref.stop() == Normal()
    await trio.sleep(100)
    assert trio.current_time() == pytest.approx(101)  # the 60 s job did not keep anything alive


async def test_crash_report_goes_to_stderr_never_stdout(
    nursery: trio.Nursery, capsys: pytest.CaptureFixture[str]
) -> None:
    import structlog

    config = structlog.get_config()
    structlog.reset_defaults()  # an application that has not configured structlog yet
    try:
        ref = await spawn(nursery, Echo)
        ref.cast("crash")
        await ref.wait()
    finally:
        structlog.configure(**config)
    out, err = capsys.readouterr()
    assert out == ""
    assert "actor.crashed" in err and "RuntimeError: asked to crash" in err
    assert "Traceback" in err


async def test_busy_actor_with_a_backlog_lets_others_run(nursery: trio.Nursery) -> None:
    ref = await spawn(nursery, Echo, mailbox_size=10_000)
    nursery.start_soon(ref.call, ("sleep", 0.01), None)
    await trio.testing.wait_all_tasks_blocked()
    for i in range(5_000):
        ref.cast(i)
    ticker = Ticker()

    async with trio.open_nursery() as inner:
        inner.start_soon(ticker.run)
        handled = await ref.call("casts", timeout=None)
        inner.cancel_scope.cancel()
    assert len(handled) == 5_000
    assert ticker.ticks > 5_000 // 64  # the actor yielded while working through its backlog


async def test_bad_timeouts_are_refused(nursery: trio.Nursery) -> None:
    ref = await spawn(nursery, Echo)
    with pytest.raises(InvalidSpec, match="timeout"):
        await ref.call("x", timeout=-1)
    with pytest.raises(InvalidSpec, match="timeout"):
        await ref.stop(timeout=float("nan"))
    assert await ref.call("still fine") == "still fine"


class Sleepy(Actor):
    """Stops after 10 s without a message (an idle timeout, as OTP's gen_server timeout)."""

    async def init(self, seen: list[Any]) -> None:
        self.seen = seen
        self.set_idle_timeout(10)

    async def handle_cast(self, msg: Any) -> None:
        self.seen.append((trio.current_time(), msg))

    async def handle_info(self, msg: Any) -> None:
        if isinstance(msg, IdleTimeout):
            self.seen.append((trio.current_time(), msg))
            self.stop()


async def test_idle_timeout_fires_after_the_last_message(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    seen: list[Any] = []
    start = trio.current_time()
    ref = await spawn(nursery, Sleepy, seen)
    await trio.sleep(6)
    ref.cast("poke")  # the wait starts again from here
    assert await ref.wait() == Normal()
    assert [(t - start, m) for t, m in seen] == [(6, "poke"), (16, IdleTimeout(10))]
