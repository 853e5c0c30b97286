"""call / cast / send: replies, timeouts, late replies, crashes mid-call, full mailboxes."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing
from actors_for_tests import Echo

from supervisors import (
    NOREPLY,
    Actor,
    ActorExited,
    Caller,
    CallTimeout,
    CallToSelf,
    Crash,
    MailboxFull,
    Normal,
    spawn,
)


async def test_call_returns_the_handle_call_result(nursery: trio.Nursery) -> None:
    ref = await spawn(nursery, Echo)
    assert await ref.call(("hello", 1)) == ("hello", 1)


async def test_cast_and_send_arrive_in_order(nursery: trio.Nursery) -> None:
    class Recorder(Actor):
        async def init(self) -> None:
            self.seen: list[Any] = []

        async def handle_cast(self, msg: Any) -> None:
            self.seen.append(("cast", msg))

        async def handle_info(self, msg: Any) -> None:
            self.seen.append(("info", msg))

        async def handle_call(self, msg: Any, caller: Caller) -> Any:
            return self.seen

    ref = await spawn(nursery, Recorder)
    ref.cast(1)
    ref.send(2)
    ref.cast(3)
    assert await ref.call("seen") == [("cast", 1), ("info", 2), ("cast", 3)]


async def test_cast_to_busy_actor_does_not_block(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    """Regression: a cast returns at once even while the actor is stuck in a long call."""
    ref = await spawn(nursery, Echo)
    nursery.start_soon(ref.call, ("sleep", 1000), None)
    await trio.testing.wait_all_tasks_blocked()
    start = trio.current_time()
    for i in range(10):
        ref.cast(i)
    assert trio.current_time() == start  # no waiting for the busy actor
    assert ref.statistics().queued == 10
    assert await ref.call("casts", timeout=None) == list(range(10))
    assert trio.current_time() == pytest.approx(start + 1000)


async def test_cast_to_full_mailbox_raises_mailbox_full_at_once(nursery: trio.Nursery) -> None:
    ref = await spawn(nursery, Echo, mailbox_size=3)
    nursery.start_soon(ref.call, ("sleep", 1000), None)
    await trio.testing.wait_all_tasks_blocked()
    for i in range(3):
        ref.cast(i)
    with pytest.raises(MailboxFull, match="full"):
        ref.cast("one too many")
    with pytest.raises(MailboxFull):
        ref.send("one too many")
    with pytest.raises(MailboxFull):
        await ref.call("one too many")


async def test_call_timeout_raises_call_timeout(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    ref = await spawn(nursery, Echo)
    start = trio.current_time()
    with pytest.raises(CallTimeout, match="did not reply within 2 s"):
        await ref.call(("sleep", 10), timeout=2)
    assert trio.current_time() - start == pytest.approx(2)


async def test_late_reply_after_timeout_does_not_crash_callee(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    """Regression: the reply to a caller that gave up is dropped; the callee carries on."""
    ref = await spawn(nursery, Echo)
    with pytest.raises(CallTimeout):
        await ref.call(("sleep", 10), timeout=1)
    await trio.sleep(20)  # the late reply has been sent by now
    assert ref.alive
    assert await ref.call("still here") == "still here"


async def test_callee_crash_mid_call_fails_caller_at_once(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    """Regression: the caller learns of the crash immediately, not when its timeout expires."""
    ref = await spawn(nursery, Echo)
    start = trio.current_time()
    with pytest.raises(ActorExited) as info:
        await ref.call("crash", timeout=60)
    assert trio.current_time() == start
    match info.value.reason:
        case Crash(RuntimeError() as exc):
            assert str(exc) == "asked to crash"
        case other:
            pytest.fail(f"unexpected reason {other!r}")
    assert info.value.__cause__ is info.value.reason.exception
    assert isinstance(await ref.wait(), Crash)


async def test_callee_killed_while_caller_waits_fails_caller_at_once(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    ref = await spawn(nursery, Echo)
    failed_at: list[float] = []

    async def caller() -> None:
        with pytest.raises(ActorExited):
            await ref.call(("sleep", 100), timeout=60)
        failed_at.append(trio.current_time())

    nursery.start_soon(caller)
    await trio.sleep(5)
    ref.kill()
    await ref.wait()
    await trio.testing.wait_all_tasks_blocked()
    assert failed_at == [pytest.approx(5)]


async def test_queued_calls_fail_when_the_actor_exits(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    ref = await spawn(nursery, Echo)
    outcomes: dict[Any, Any] = {}

    async def caller(msg: Any) -> None:
        try:
            outcomes[msg] = await ref.call(msg, timeout=None)
        except ActorExited as exc:
            outcomes[msg] = type(exc.reason)

    for msg in [("sleep", 1), "crash", "queued behind the crash"]:
        nursery.start_soon(caller, msg)
        await trio.testing.wait_all_tasks_blocked()
    await ref.wait()
    await trio.testing.wait_all_tasks_blocked()
    assert outcomes == {("sleep", 1): "slept", "crash": Crash, "queued behind the crash": Crash}


async def test_call_to_an_exited_actor_raises_actor_exited(nursery: trio.Nursery) -> None:
    ref = await spawn(nursery, Echo)
    assert await ref.call("stop") == "stopping"
    assert await ref.wait() == Normal()
    with pytest.raises(ActorExited) as info:
        await ref.call("anyone?")
    assert info.value.reason == Normal()
    with pytest.raises(ActorExited):
        ref.cast("anyone?")


async def test_noreply_then_caller_reply_answers_later(nursery: trio.Nursery) -> None:
    class Waiter(Actor):
        async def init(self) -> None:
            self.waiting: list[Caller] = []

        async def handle_call(self, msg: Any, caller: Caller) -> Any:
            if msg == "wait":
                self.waiting.append(caller)
                return NOREPLY
            for waiter in self.waiting:
                waiter.reply(("done", msg))
            return "released"

    ref = await spawn(nursery, Waiter)
    results: list[Any] = []

    async def wait_for_it() -> None:
        results.append(await ref.call("wait", timeout=None))

    nursery.start_soon(wait_for_it)
    nursery.start_soon(wait_for_it)
    await trio.testing.wait_all_tasks_blocked()
    assert results == []
    assert await ref.call("go") == "released"
    await trio.testing.wait_all_tasks_blocked()
    assert results == [("done", "go"), ("done", "go")]


async def test_deferred_caller_fails_when_the_actor_exits(nursery: trio.Nursery) -> None:
    class Forgetful(Actor):
        async def handle_call(self, msg: Any, caller: Caller) -> Any:
            if msg == "wait":
                return NOREPLY
            raise RuntimeError("boom")

    ref = await spawn(nursery, Forgetful)
    errors: list[ActorExited] = []

    async def wait_for_it() -> None:
        try:
            await ref.call("wait", timeout=None)
        except ActorExited as exc:
            errors.append(exc)

    nursery.start_soon(wait_for_it)
    await trio.testing.wait_all_tasks_blocked()
    ref.cast("not handled: crashes")
    await ref.wait()
    await trio.testing.wait_all_tasks_blocked()
    assert len(errors) == 1 and isinstance(errors[0].reason, Crash)


async def test_actor_calling_itself_gets_a_clear_error(nursery: trio.Nursery) -> None:
    class Narcissus(Actor):
        async def handle_call(self, msg: Any, caller: Caller) -> Any:
            try:
                await self.ref.call("me")
            except CallToSelf as exc:
                return str(exc)
            return "no error"

    ref = await spawn(nursery, Narcissus)
    assert "called itself" in await ref.call("go")


async def test_call_timeouts_fire_at_their_own_deadlines_whatever_the_order_they_were_made(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    # One timer serves every call's timeout: a shorter timeout made after a longer one, and a
    # second call with the same timeout, each still fire on time.
    ref = await spawn(nursery, Echo)
    fired: list[tuple[str, float]] = []

    async def waits(tag: str, seconds: float) -> None:
        with pytest.raises(CallTimeout):
            await ref.call(("sleep", 100), timeout=seconds)
        fired.append((tag, trio.current_time()))

    async with trio.open_nursery() as callers:
        callers.start_soon(waits, "long", 10)
        await trio.testing.wait_all_tasks_blocked()
        callers.start_soon(waits, "short", 1)
        await trio.sleep(2)
        callers.start_soon(waits, "long again", 10)
    assert fired == [("short", 1.0), ("long", 10.0), ("long again", 12.0)]


class CrashesInTerminate(Actor):
    """Its terminate waits for `go`, then crashes: the exit reason is known only then."""

    async def init(self, go: trio.Event) -> None:
        self.go = go

    async def terminate(self, reason: Any) -> None:
        await self.go.wait()
        raise OSError("disk gone while closing")


async def test_a_call_made_while_the_actor_terminates_gets_the_final_reason(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    go = trio.Event()
    ref = await spawn(nursery, CrashesInTerminate, go)
    nursery.start_soon(ref.stop)
    await trio.testing.wait_all_tasks_blocked()
    assert ref.alive  # in terminate, waiting for go

    async def late_call() -> BaseException:
        try:
            await ref.call("anyone?", timeout=10)
        except (ActorExited, CallTimeout) as exc:
            return exc
        raise AssertionError("no reply was expected")

    async with trio.open_nursery() as callers:
        results: list[BaseException] = []

        async def record() -> None:
            results.append(await late_call())

        callers.start_soon(record)
        await trio.testing.wait_all_tasks_blocked()
        answered_early = list(results)
        go.set()
    assert answered_early == []  # OTP: the caller waits for the exit, not the closing reason
    (error,) = results
    assert isinstance(error, ActorExited)
    assert isinstance(error.reason, Crash) and isinstance(error.reason.exception, OSError)
    assert error.reason == ref.exit_reason
