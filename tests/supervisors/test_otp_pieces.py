"""The OTP pieces issue 24 added, each against what OTP does: handle_continue (`Continue`),
init returning `IGNORE`, significant children and auto_shutdown, `start_child` and
`delete_child` on a static supervisor, a dynamic supervisor's `extra_arguments`, and a call by
name that fails at once (noproc) when no supervisor will bring the name back."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing
from actors_for_tests import Echo, FailingInit, Journal

from supervisors import (
    IGNORE,
    Actor,
    ActorExited,
    Caller,
    Continue,
    Crash,
    InvalidSpec,
    NoProcess,
    Normal,
    Registry,
    Shutdown,
    StartError,
    SupervisorError,
    UnknownChild,
    child_spec,
    open_dynamic_supervisor,
    open_supervisor,
    spawn,
    start_dynamic_supervisor,
    start_supervisor,
)

# -- handle_continue ---------------------------------------------------------------------------


class Continuing(Actor):
    async def init(self, seen: list[Any]) -> Any:
        self.seen = seen
        return Continue("from init")

    async def handle_continue(self, term: Any) -> Any:
        self.seen.append(("continue", term))
        if term == "chain":
            return Continue("chained")
        return None

    async def handle_cast(self, msg: Any) -> Any:
        self.seen.append(msg)
        return Continue(f"after {msg}")

    async def handle_call(self, msg: Any, caller: Caller) -> Any:
        self.seen.append(msg)
        caller.reply(f"got {msg}")  # OTP's {reply, R, S, {continue, C}}
        return Continue("chain")


async def test_continue_from_init_runs_before_any_queued_message(nursery: trio.Nursery) -> None:
    seen: list[Any] = []
    ref = await spawn(nursery, Continuing, seen)
    ref.cast("a")  # queued before the actor's task first runs
    ref.cast("b")
    await trio.testing.wait_all_tasks_blocked()
    assert seen == [
        ("continue", "from init"),
        "a",
        ("continue", "after a"),
        "b",
        ("continue", "after b"),
    ]


async def test_continue_from_handle_call_follows_the_reply_and_chains(
    nursery: trio.Nursery,
) -> None:
    seen: list[Any] = []
    ref = await spawn(nursery, Continuing, seen)
    async with trio.open_nursery() as callers:
        callers.start_soon(ref.call, "x")
        await trio.testing.wait_all_tasks_blocked()
        ref.cast("next")
    assert await ref.call("y") == "got y"
    assert seen[1:5] == ["x", ("continue", "chain"), ("continue", "chained"), "next"]


class NoContinueHook(Actor):
    async def handle_cast(self, msg: Any) -> Any:
        return Continue(msg)


async def test_continue_without_handle_continue_crashes_the_actor(nursery: trio.Nursery) -> None:
    ref = await spawn(nursery, NoContinueHook)
    ref.cast("more")
    reason = await ref.wait()
    assert isinstance(reason, Crash) and isinstance(reason.exception, TypeError)
    assert "does not override handle_continue" in str(reason.exception)


# -- init returning IGNORE ---------------------------------------------------------------------


class Declines(Actor):
    async def init(self, journal: Journal) -> Any:
        journal.append(("declined", None))
        return IGNORE


async def test_a_static_supervisor_keeps_an_ignored_child_as_not_running(
    autojump_clock: trio.testing.MockClock, events: list[dict[str, Any]]
) -> None:
    journal: Journal = []
    children = [child_spec(Declines, journal, id="ignored"), child_spec(Echo, journal, id="echo")]
    async with open_supervisor(children) as sup:
        ignored, echo = await sup.which_children()
        assert (ignored.status, ignored.ref) == ("stopped", None)
        assert echo.status == "running"
        assert await sup.restart_child("ignored") is None  # tried again, declined again
        counts = await sup.count_children()
        assert (counts.specs, counts.active) == (2, 1)
    assert journal.count(("declined", None)) == 2
    started = [e["child"] for e in events if e["event"] == "supervisor.child_started"]
    assert started == ["'echo'"]  # nothing is reported started for the ignored child


async def test_an_ignored_temporary_child_is_dropped_as_otp_drops_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """OTP keeps no spec for a temporary child whose init returned ignore: nothing would ever
    start it, so it is neither listed nor restartable (at start-up and through start_child)."""
    journal: Journal = []
    children = [
        child_spec(Declines, journal, id="ignored", restart="temporary"),
        child_spec(Echo, journal, id="echo"),
    ]
    async with open_supervisor(children) as sup:
        assert [c.id for c in await sup.which_children()] == ["echo"]
        with pytest.raises(UnknownChild):
            await sup.restart_child("ignored")
        spec = child_spec(Declines, journal, id="later", restart="temporary")
        assert await sup.start_child(spec) is None
        assert [c.id for c in await sup.which_children()] == ["echo"]
        assert (await sup.count_children()).specs == 1


async def test_a_dynamic_supervisor_starts_nothing_for_an_ignored_child(
    autojump_clock: trio.testing.MockClock,
) -> None:
    journal: Journal = []
    async with open_dynamic_supervisor() as sup:
        assert await sup.start_child(child_spec(Declines, journal)) is None
        assert (await sup.count_children()).specs == 0


async def test_spawn_of_an_actor_whose_init_returns_ignore_raises_start_error(
    nursery: trio.Nursery,
) -> None:
    with pytest.raises(StartError, match="IGNORE") as raised:
        await spawn(nursery, Declines, [])
    assert raised.value.reason == Normal()


# -- significant children and auto_shutdown ----------------------------------------------------


async def test_any_significant_child_ending_on_its_own_shuts_the_supervisor_down(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    journal: Journal = []
    children = [
        child_spec(Echo, journal, "other", id="other"),
        child_spec(Echo, journal, "job", id="job", restart="transient", significant=True),
    ]
    sup = await start_supervisor(nursery, children, auto_shutdown="any_significant")
    _, job = await sup.which_children()
    assert job.ref is not None
    assert await job.ref.call("stop") == "stopping"  # a normal exit: transient, not restarted
    assert await sup.wait() == Shutdown()
    assert journal[-2:] == [("stop", "job"), ("stop", "other")]


async def test_all_significant_waits_for_the_last_significant_child(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    children = [
        child_spec(Echo, id=tag, restart="temporary", significant=True) for tag in ("a", "b")
    ]
    sup = await start_supervisor(nursery, children, auto_shutdown="all_significant")
    a, b = await sup.which_children()
    assert a.ref is not None and b.ref is not None
    await a.ref.call("stop")
    await trio.testing.wait_all_tasks_blocked()
    assert sup.alive
    await b.ref.call("stop")
    assert await sup.wait() == Shutdown()


async def test_terminate_child_of_a_significant_child_does_not_shut_the_supervisor_down(
    autojump_clock: trio.testing.MockClock,
) -> None:
    spec = child_spec(Echo, id="job", restart="transient", significant=True)
    async with open_supervisor([spec], auto_shutdown="any_significant") as sup:
        await sup.terminate_child("job")  # ended by the supervisor, not on its own
        await trio.testing.wait_all_tasks_blocked()
        assert sup.alive


async def test_significant_needs_auto_shutdown_and_a_non_permanent_restart(
    nursery: trio.Nursery,
) -> None:
    with pytest.raises(InvalidSpec, match="transient or temporary"):
        child_spec(Echo, significant=True)
    with pytest.raises(InvalidSpec, match="needs auto_shutdown"):
        await start_supervisor(nursery, [child_spec(Echo, restart="transient", significant=True)])
    with pytest.raises(InvalidSpec, match="auto_shutdown must be"):
        await start_supervisor(nursery, [], auto_shutdown="sometimes")  # type: ignore[arg-type]


# -- start_child and delete_child on a static supervisor ----------------------------------------


async def test_static_start_child_adds_a_child_the_strategy_then_restarts(
    autojump_clock: trio.testing.MockClock,
) -> None:
    journal: Journal = []
    async with open_supervisor([child_spec(Echo, journal, "first", id="first")]) as sup:
        ref = await sup.start_child(child_spec(Echo, journal, "added", id="added"))
        assert ref is not None and await ref.call("hi") == "hi"
        assert [row.id for row in await sup.which_children()] == ["first", "added"]
        ref.cast("crash")
        await ref.wait()
        _, added = await sup.which_children()
        assert added.status == "running" and added.restarts == 1
        with pytest.raises(InvalidSpec, match="duplicate child id 'added'"):
            await sup.start_child(child_spec(Echo, id="added"))
        with pytest.raises(StartError):
            await sup.start_child(child_spec(FailingInit, id="broken"))
        assert [row.id for row in await sup.which_children()] == ["first", "added"]


async def test_static_delete_child_forgets_only_a_stopped_child(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_supervisor([child_spec(Echo, id="a"), child_spec(Echo, id="b")]) as sup:
        with pytest.raises(SupervisorError, match="is running; terminate_child it first"):
            await sup.delete_child("a")
        await sup.terminate_child("a")
        await sup.delete_child("a")
        assert [row.id for row in await sup.which_children()] == ["b"]
        with pytest.raises(UnknownChild):
            await sup.delete_child("a")
        assert sup.alive


# -- extra_arguments on a dynamic supervisor ---------------------------------------------------


class Greeter(Actor):
    async def init(self, greeting: str, name: str) -> None:
        self.text = f"{greeting}, {name}"

    async def handle_call(self, msg: Any, caller: Caller) -> Any:
        if msg == "crash":
            raise RuntimeError("asked to crash")
        return self.text


async def test_extra_arguments_come_before_each_childs_own_args_also_on_restart(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    registry = Registry()
    async with open_dynamic_supervisor(extra_arguments=("hello",)) as sup:
        spec = child_spec(Greeter, "ada", name="ada", registry=registry)
        ref = await sup.start_child(spec)
        assert ref is not None and await ref.call("text") == "hello, ada"
        with pytest.raises(ActorExited):
            await ref.call("crash")
        assert await registry.call("ada", "text") == "hello, ada"  # the restarted child
    with pytest.raises(InvalidSpec, match="extra_arguments must be a tuple"):
        await start_dynamic_supervisor(nursery, extra_arguments=["hello"])  # type: ignore[arg-type]


# -- a call by name: noproc, or the wait for a restarting holder --------------------------------


async def test_call_by_name_of_a_terminated_child_is_noproc_at_once_until_it_restarts(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """OTP answers noproc at once for a child stopped by terminate_child: nothing will start
    it unless asked (restart_child), so there is nothing to wait for."""
    registry = Registry()
    children = [child_spec(Echo, name="echo", registry=registry)]
    async with open_supervisor(children) as sup:
        await sup.terminate_child("echo")
        start = trio.current_time()
        with pytest.raises(NoProcess):
            await registry.call("echo", "anyone?", timeout=30)
        assert trio.current_time() == start  # not after its timeout
        await sup.restart_child("echo")
        assert await registry.call("echo", "back?") == "back?"


async def test_call_by_name_of_a_child_that_exited_for_good_is_noproc_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    registry = Registry()
    children = [child_spec(Echo, name="echo", registry=registry, restart="transient")]
    async with open_supervisor(children) as sup:
        holder = registry.whereis("echo")
        assert holder is not None
        await holder.stop()  # a normal exit: a transient child is not restarted
        start = trio.current_time()
        with pytest.raises(NoProcess):
            await registry.call("echo", "anyone?", timeout=30)
        assert trio.current_time() == start
        assert (await sup.which_children())[0].status == "stopped"


class SlowToEnd(Actor):
    """An Echo whose `terminate` waits for `done`: a call by name made meanwhile finds the name
    bound to an actor that is exiting, and parks until the supervisor decides."""

    async def init(self, ending: trio.Event, done: trio.Event) -> None:
        self.ending = ending
        self.done = done

    async def handle_call(self, msg: Any, caller: Caller) -> Any:
        if msg == "stop":
            self.stop()
        return msg

    async def terminate(self, reason: Any) -> None:
        self.ending.set()
        await self.done.wait()


async def test_call_by_name_parked_while_a_transient_child_ends_normally_is_noproc_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The window of the test above, made certain: the call parks before the supervisor hears
    of the exit; when the supervisor then gives up the name, the call fails at once (it waited
    its whole timeout when giving up the name woke nobody)."""
    registry = Registry()
    ending, done = trio.Event(), trio.Event()
    spec = child_spec(SlowToEnd, ending, done, name="echo", registry=registry,
                      restart="transient")
    async with open_supervisor([spec]) as sup, trio.open_nursery() as nursery:
        holder = registry.whereis("echo")
        assert holder is not None
        nursery.start_soon(holder.call, "stop")
        await ending.wait()  # the holder is exiting; its name is still bound and claimed
        outcome: list[BaseException] = []
        finished = trio.Event()

        async def call_by_name() -> None:
            try:
                await registry.call("echo", "anyone?", timeout=30)
            except Exception as exc:  # which one is what the test checks
                outcome.append(exc)
            finished.set()

        nursery.start_soon(call_by_name)
        await trio.testing.wait_all_tasks_blocked()  # the call is parked
        start = trio.current_time()
        done.set()
        await finished.wait()
        assert [type(exc) for exc in outcome] == [NoProcess]  # was CallTimeout after 30 s
        assert trio.current_time() == start  # not after its timeout
        assert (await sup.which_children())[0].status == "stopped"


async def test_call_by_name_waits_for_a_restarting_holder_and_fails_at_once_without_one(
    autojump_clock: trio.testing.MockClock,
) -> None:
    registry = Registry()
    spec = child_spec(Echo, name="echo", registry=registry, restart="transient")
    async with open_supervisor([spec]) as sup:
        holder = registry.whereis("echo")
        assert holder is not None
        holder.cast("crash")
        await holder.wait()  # name released; the supervisor has not restarted it yet
        assert await registry.call("echo", "back?") == "back?"  # waited for the restart
        await sup.terminate_child("echo")
        await sup.delete_child("echo")  # no supervisor will start it again
        start = trio.current_time()
        with pytest.raises(NoProcess):
            await registry.call("echo", "anyone?")
        assert trio.current_time() == start
