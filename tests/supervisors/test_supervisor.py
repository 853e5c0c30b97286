"""Static supervisors: strategies, restart policies, intensity, start and stop order."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing
from actors_for_tests import Echo, FailingInit, Journal, Stubborn

from supervisors import (
    DEFAULT_MAILBOX_SIZE,
    GIVE_UP_REASON,
    RECENT_EXITS,
    Actor,
    ActorExited,
    ActorRef,
    Caller,
    ChildSpec,
    Crash,
    InvalidSpec,
    Killed,
    Normal,
    Registry,
    Shutdown,
    Start,
    StartError,
    SupervisorError,
    SupervisorRef,
    UnknownChild,
    child_spec,
    open_supervisor,
    start_dynamic_supervisor,
    start_supervisor,
    supervisor_spec,
)
from supervisors._supervisor import REASON_CHARS


async def refs(sup: SupervisorRef) -> dict[Any, ActorRef | None]:
    return {info.id: info.ref for info in await sup.which_children()}


async def crash(ref: ActorRef | None) -> None:
    assert ref is not None
    with pytest.raises(ActorExited):
        await ref.call("crash")
    await trio.testing.wait_all_tasks_blocked()


async def test_children_start_in_order_and_stop_in_reverse(nursery: trio.Nursery) -> None:
    journal: Journal = []
    specs = [child_spec(Echo, journal, tag, id=tag) for tag in "abc"]
    sup = await start_supervisor(nursery, specs)
    assert journal == [("start", "a"), ("start", "b"), ("start", "c")]
    assert await sup.stop(Shutdown()) == Shutdown()
    assert journal[3:] == [("stop", "c"), ("stop", "b"), ("stop", "a")]


async def test_one_for_one_restarts_only_the_failed_child(nursery: trio.Nursery) -> None:
    specs = [child_spec(Echo, id=tag) for tag in "abc"]
    sup = await start_supervisor(nursery, specs)
    before = await refs(sup)
    await crash(before["b"])
    after = await refs(sup)
    assert after["a"] is before["a"] and after["c"] is before["c"]
    assert after["b"] is not before["b"] and after["b"] is not None and after["b"].alive
    infos = {i.id: i for i in await sup.which_children()}
    assert (infos["b"].restarts, infos["b"].status) == (1, "running")
    assert infos["a"].restarts == 0


async def test_one_for_all_restarts_every_child(nursery: trio.Nursery) -> None:
    journal: Journal = []
    specs = [child_spec(Echo, journal, tag, id=tag) for tag in "abc"]
    sup = await start_supervisor(nursery, specs, strategy="one_for_all")
    before = await refs(sup)
    journal.clear()
    await crash(before["b"])
    after = await refs(sup)
    assert all(after[t] is not before[t] for t in "abc")
    # The crashed child's terminate runs first; then the siblings stop in reverse start order,
    # then everyone starts again in order.
    assert journal == [
        ("stop", "b"),
        ("stop", "c"),
        ("stop", "a"),
        ("start", "a"),
        ("start", "b"),
        ("start", "c"),
    ]


async def test_rest_for_one_restarts_exactly_the_later_siblings(nursery: trio.Nursery) -> None:
    """Regression: only the failed child and those started after it are restarted."""
    journal: Journal = []
    specs = [child_spec(Echo, journal, tag, id=tag) for tag in "abcd"]
    sup = await start_supervisor(nursery, specs, strategy="rest_for_one")
    before = await refs(sup)
    journal.clear()
    await crash(before["b"])
    after = await refs(sup)
    assert after["a"] is before["a"]
    assert all(after[t] is not before[t] for t in "bcd")
    assert journal == [
        ("stop", "b"),
        ("stop", "d"),
        ("stop", "c"),
        ("start", "b"),
        ("start", "c"),
        ("start", "d"),
    ]


async def test_temporary_children_are_not_restarted_by_one_for_all(nursery: trio.Nursery) -> None:
    """Regression: a temporary sibling taken down by one_for_all is dropped, not restarted."""
    specs = [
        child_spec(Echo, id="perm"),
        child_spec(Echo, id="temp", restart="temporary"),
        child_spec(Echo, id="other"),
    ]
    sup = await start_supervisor(nursery, specs, strategy="one_for_all")
    before = await refs(sup)
    temp = before["temp"]
    await crash(before["perm"])
    after = await refs(sup)
    assert "temp" not in after
    assert temp is not None and not temp.alive
    assert after["perm"] is not before["perm"] and after["other"] is not before["other"]


async def test_temporary_child_is_never_restarted(nursery: trio.Nursery) -> None:
    sup = await start_supervisor(nursery, [child_spec(Echo, id="t", restart="temporary")])
    await crash((await refs(sup))["t"])
    assert await sup.which_children() == []


async def test_transient_child_is_restarted_only_after_abnormal_exit(
    nursery: trio.Nursery,
) -> None:
    sup = await start_supervisor(nursery, [child_spec(Echo, id="t", restart="transient")])
    first = (await refs(sup))["t"]
    await crash(first)
    second = (await refs(sup))["t"]
    assert second is not None and second is not first
    assert await second.call("stop") == "stopping"
    await second.wait()
    await trio.testing.wait_all_tasks_blocked()
    [info] = await sup.which_children()
    assert (info.ref, info.status, info.restarts) == (None, "stopped", 1)


async def test_restart_intensity_is_counted_across_children(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    """Regression: 2 crashes of one child plus 2 of another exceed 3 restarts in 5 s."""
    sup = await start_supervisor(nursery, [child_spec(Echo, id="a"), child_spec(Echo, id="b")])
    for tag in "abab"[:3]:
        await crash((await refs(sup))[tag])
        await trio.sleep(1)
    assert sup.alive  # three restarts within 5 s are allowed
    await crash((await refs(sup))["b"])
    assert await sup.wait() == GIVE_UP_REASON


async def test_restarts_spread_beyond_max_seconds_are_allowed(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    sup = await start_supervisor(nursery, [child_spec(Echo, id="a")], max_restarts=2, max_seconds=5)
    for _ in range(6):
        await crash((await refs(sup))["a"])
        await trio.sleep(3)  # never more than 2 restarts inside any 5 s window
    assert sup.alive
    [info] = await sup.which_children()
    assert info.restarts == 6


async def test_permanent_child_exiting_normally_escalates_after_the_limit(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    """Regression: a permanent child that keeps exiting normally is restarted, and counted,
    until the supervisor gives up (it does not silently stop restarting it)."""
    sup = await start_supervisor(nursery, [child_spec(Echo, id="a")])
    for _ in range(3):
        ref = (await refs(sup))["a"]
        assert ref is not None
        await ref.call("stop")
        await ref.wait()
        await trio.testing.wait_all_tasks_blocked()
    assert [i.restarts for i in await sup.which_children()] == [3]
    ref = (await refs(sup))["a"]
    assert ref is not None
    await ref.call("stop")
    assert await sup.wait() == GIVE_UP_REASON
    assert not ref.alive


async def test_give_up_escalates_to_the_parent_supervisor(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    inner = supervisor_spec("inner", [child_spec(Echo, id="w")], max_restarts=0)
    outer = await start_supervisor(nursery, [inner], max_restarts=1)
    for _ in range(2):
        inner_ref = (await refs(outer))["inner"]
        assert isinstance(inner_ref, SupervisorRef)
        await crash((await refs(inner_ref))["w"])
        assert await inner_ref.wait() == GIVE_UP_REASON
        await trio.testing.wait_all_tasks_blocked()
    # The inner supervisor was restarted once, then its second give-up exceeded the outer's limit.
    assert await outer.wait() == GIVE_UP_REASON


async def test_give_up_stops_children_in_reverse_order(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    journal: Journal = []
    specs = [child_spec(Echo, journal, tag, id=tag) for tag in "abc"]
    sup = await start_supervisor(nursery, specs, max_restarts=0)
    journal.clear()
    await crash((await refs(sup))["a"])
    await sup.wait()
    assert journal == [("stop", "a"), ("stop", "c"), ("stop", "b")]


async def test_shutdown_cancels_a_child_that_ignores_the_graceful_request(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    """Regression: reverse order, and a stubborn child is cancelled after its timeout."""
    journal: Journal = []
    specs = [
        child_spec(Echo, journal, "a", id="a"),
        child_spec(Stubborn, journal, "slow", id="slow", shutdown=2),
        child_spec(Echo, journal, "c", id="c"),
    ]
    sup = await start_supervisor(nursery, specs)
    children = await refs(sup)
    start = trio.current_time()
    await sup.stop(Shutdown(), timeout=None)
    assert trio.current_time() - start == pytest.approx(2)
    assert journal[3:] == [("stop", "c"), ("terminating", "slow"), ("stop", "a")]
    slow = children["slow"]
    assert slow is not None and slow.exit_reason == Killed()


async def test_brutal_kill_cancels_without_terminate(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    journal: Journal = []
    sup = await start_supervisor(
        nursery, [child_spec(Stubborn, journal, "x", id="x", shutdown="brutal_kill")]
    )
    child = (await refs(sup))["x"]
    start = trio.current_time()
    await sup.terminate_child("x")
    assert trio.current_time() == start
    assert child is not None and child.exit_reason == Killed()
    assert ("terminating", "x") not in journal


async def test_infinity_shutdown_waits_for_the_child(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    journal: Journal = []
    sup = await start_supervisor(
        nursery, [child_spec(Stubborn, journal, "x", id="x", shutdown="infinity")]
    )
    start = trio.current_time()
    await sup.terminate_child("x")
    assert trio.current_time() - start == pytest.approx(1000)
    assert journal[-1] == ("stop", "x")


async def test_child_that_fails_to_start_fails_the_supervisor_naming_it(
    nursery: trio.Nursery,
) -> None:
    journal: Journal = []
    specs = [
        child_spec(Echo, journal, "a", id="a"),
        child_spec(FailingInit, "no database", id="db"),
        child_spec(Echo, journal, "c", id="c"),
    ]
    with pytest.raises(StartError, match="'db' failed to start") as info:
        await start_supervisor(nursery, specs)
    assert info.value.child == "db"
    assert isinstance(info.value.__cause__, ValueError)
    assert journal == [("start", "a"), ("stop", "a")]


async def test_terminate_and_restart_child(nursery: trio.Nursery) -> None:
    sup = await start_supervisor(nursery, [child_spec(Echo, id="a")])
    old = (await refs(sup))["a"]
    await sup.terminate_child("a")
    [info] = await sup.which_children()
    assert (info.ref, info.status) == (None, "stopped")
    assert old is not None and old.exit_reason == Shutdown()
    new = await sup.restart_child("a")
    assert await new.call("hi") == "hi"
    with pytest.raises(SupervisorError, match="already running"):
        await sup.restart_child("a")
    with pytest.raises(UnknownChild):
        await sup.terminate_child("nope")
    counts = await sup.count_children()
    assert (counts.specs, counts.active, counts.workers, counts.supervisors) == (1, 1, 1, 0)
    assert sup.alive  # bad requests do not crash the supervisor


async def test_registered_child_is_rebound_after_restart(nursery: trio.Nursery) -> None:
    registry = Registry()
    sup = await start_supervisor(nursery, [child_spec(Echo, name=("svc", "db"), registry=registry)])
    first = registry.whereis(("svc", "db"))
    assert first is not None and (await refs(sup))[("svc", "db")] is first
    await crash(first)
    second = registry.whereis(("svc", "db"))
    assert second is not None and second is not first and second.alive


async def test_invalid_specs_are_refused_with_clear_errors() -> None:
    with pytest.raises(InvalidSpec, match="restart must be one of"):
        child_spec(Echo, restart="sometimes")  # type: ignore[arg-type]
    with pytest.raises(InvalidSpec, match="shutdown must be"):
        child_spec(Echo, shutdown=-1)
    with pytest.raises(InvalidSpec, match="start must be a Start"):
        ChildSpec("x", Echo)  # type: ignore[arg-type]
    with pytest.raises(InvalidSpec, match="Actor subclass"):
        Start(int)  # type: ignore[arg-type]
    assert child_spec(Echo).shutdown == 5.0
    assert supervisor_spec("s", []).shutdown == "infinity"


async def test_duplicate_ids_and_bad_strategy_are_refused(nursery: trio.Nursery) -> None:
    with pytest.raises(InvalidSpec, match="duplicate child id 'a'"):
        await start_supervisor(nursery, [child_spec(Echo, id="a"), child_spec(Echo, id="a")])
    with pytest.raises(InvalidSpec, match="strategy"):
        await start_supervisor(nursery, [], strategy="all_for_one")  # type: ignore[arg-type]


async def test_open_supervisor_shuts_down_on_exit() -> None:
    journal: Journal = []
    async with open_supervisor([child_spec(Echo, journal, t, id=t) for t in "ab"]) as sup:
        assert (await sup.count_children()).active == 2
    assert not sup.alive
    assert journal == [("start", "a"), ("start", "b"), ("stop", "b"), ("stop", "a")]


async def test_open_supervisor_raises_when_it_gives_up(
    autojump_clock: trio.testing.MockClock,
) -> None:
    reached_end = False
    with pytest.raises(ActorExited) as info:
        async with open_supervisor([child_spec(Echo, id="a")], max_restarts=0) as sup:
            await crash((await refs(sup))["a"])
            await trio.sleep(1)
            reached_end = True
    assert not reached_end
    assert info.value.reason == GIVE_UP_REASON


async def test_supervisor_logs_start_crash_restart_and_give_up(
    nursery: trio.Nursery, events: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    sup = await start_supervisor(nursery, [child_spec(Echo, id="a")], max_restarts=1)
    await crash((await refs(sup))["a"])
    await crash((await refs(sup))["a"])
    await sup.wait()
    names = [e["event"] for e in events]
    assert names.count("supervisor.child_started") == 1
    assert names.count("actor.crashed") == 2
    assert names.count("supervisor.child_restarted") == 1
    assert names[-1] == "supervisor.gave_up"
    crashed = next(e for e in events if e["event"] == "actor.crashed")
    assert isinstance(crashed["exc_info"], RuntimeError)  # the traceback travels with the event
    assert capsys.readouterr().out == ""


async def test_reasons_match_by_pattern() -> None:
    def describe(reason: object) -> str:
        match reason:
            case Normal():
                return "normal"
            case Shutdown(None):
                return "shutdown"
            case Shutdown(why):
                return f"shutdown: {why}"
            case Crash(ValueError() as exc):
                return f"bad value {exc}"
            case Killed():
                return "killed"
        return "?"

    assert describe(Normal()) == "normal"
    assert describe(Shutdown()) == "shutdown"
    assert describe(GIVE_UP_REASON) == "shutdown: reached_max_restart_intensity"
    assert describe(Crash(ValueError("x"))) == "bad value x"
    assert describe(Killed()) == "killed"


async def test_statistics_keep_the_recent_child_exits_with_their_reasons(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    """The runtime page shows why children exited: a supervisor keeps the last RECENT_EXITS
    exits (when, which child, the reason as text), oldest first, restarted or not."""
    sup = await start_supervisor(
        nursery,
        [child_spec(Echo, id="a"), child_spec(Echo, id="once", restart="transient")],
        max_restarts=100,
    )
    assert sup.statistics().recent_exits == ()
    for _ in range(RECENT_EXITS + 2):
        await trio.sleep(10)
        await crash((await refs(sup))["a"])
    await trio.sleep(10)
    once = (await refs(sup))["once"]
    assert once is not None
    assert await once.call("stop") == "stopping"
    await once.wait()
    await trio.testing.wait_all_tasks_blocked()
    stats = sup.statistics()
    assert (stats.queued, stats.capacity) == (0, DEFAULT_MAILBOX_SIZE)
    exits = stats.recent_exits
    assert len(exits) == RECENT_EXITS
    # 13 exits: the three oldest crashes (t=10, 20, 30) were dropped; the normal one is last.
    assert [e.at for e in exits] == [40.0 + 10 * i for i in range(RECENT_EXITS)]
    assert [e.child for e in exits] == ["a"] * (RECENT_EXITS - 1) + ["once"]
    assert exits[0].reason == "crash (RuntimeError: asked to crash)"
    assert exits[-1].reason == "normal"


class Verbose(Actor):
    """Crashes with a very long message."""

    async def handle_call(self, msg: Any, caller: Caller) -> Any:
        raise RuntimeError("x" * 5000)


async def test_a_long_exit_reason_is_kept_cut_short(nursery: trio.Nursery) -> None:
    sup = await start_supervisor(nursery, [child_spec(Verbose, id="v")])
    await crash((await refs(sup))["v"])
    [exit] = sup.statistics().recent_exits
    assert exit.child == "v" and len(exit.reason) == REASON_CHARS
    assert exit.reason.startswith("crash (RuntimeError: xxx") and exit.reason.endswith("…")


async def test_a_dynamic_supervisor_keeps_its_monitored_childrens_exits(
    nursery: trio.Nursery,
) -> None:
    sup = await start_dynamic_supervisor(nursery)
    perm = await sup.start_child(child_spec(Echo, id="perm"))
    temp = await sup.start_child(child_spec(Echo, id="temp", restart="temporary"))
    await crash(perm)
    await crash(temp)  # not monitored: its exit is not seen
    [exit] = sup.statistics().recent_exits
    assert (exit.child, exit.reason) == ("perm", "crash (RuntimeError: asked to crash)")
