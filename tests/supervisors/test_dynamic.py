"""DynamicSupervisor: start_child, terminate_child, max_children, restarts, shutdown."""

from __future__ import annotations

import gc
import weakref

import pytest
import structlog
import structlog.testing
import trio
import trio.testing
from actors_for_tests import Echo, FailingInit, Journal, Stubborn

from supervisors import (
    GIVE_UP_REASON,
    ActorExited,
    ActorRef,
    DynamicSupervisorRef,
    InvalidSpec,
    Killed,
    MaxChildren,
    NameTaken,
    Registry,
    Shutdown,
    StartError,
    UnknownChild,
    child_spec,
    dynamic_supervisor_spec,
    open_dynamic_supervisor,
    start_dynamic_supervisor,
    start_supervisor,
)


async def test_start_child_returns_a_working_ref(nursery: trio.Nursery) -> None:
    sup = await start_dynamic_supervisor(nursery)
    ref = await sup.start_child(child_spec(Echo, id="e"))
    assert isinstance(ref, ActorRef)
    assert await ref.call("hi") == "hi"
    [info] = await sup.which_children()
    assert (info.id, info.ref, info.status, info.restarts) == ("e", ref, "running", 0)
    counts = await sup.count_children()
    assert (counts.specs, counts.active, counts.workers) == (1, 1, 1)


async def test_max_children_refuses_with_a_clear_error(nursery: trio.Nursery) -> None:
    sup = await start_dynamic_supervisor(nursery, max_children=2)
    first = await sup.start_child(child_spec(Echo))
    await sup.start_child(child_spec(Echo))
    with pytest.raises(MaxChildren, match="maximum of 2 children"):
        await sup.start_child(child_spec(Echo))
    await sup.terminate_child(first)
    await sup.start_child(child_spec(Echo))  # room again
    assert (await sup.count_children()).active == 2


async def test_terminate_child_uses_the_shutdown_ladder(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    journal: Journal = []
    sup = await start_dynamic_supervisor(nursery)
    ref = await sup.start_child(child_spec(Stubborn, journal, "s", shutdown=4))
    await sup.terminate_child(ref)
    assert trio.current_time() == pytest.approx(4)
    assert ref.exit_reason == Killed()
    assert await sup.which_children() == []
    with pytest.raises(UnknownChild):
        await sup.terminate_child(ref)


async def test_children_restart_by_policy(nursery: trio.Nursery) -> None:
    sup = await start_dynamic_supervisor(nursery)
    perm = await sup.start_child(child_spec(Echo, id="perm"))
    temp = await sup.start_child(child_spec(Echo, id="temp", restart="temporary"))
    for ref in (perm, temp):
        with pytest.raises(ActorExited):
            await ref.call("crash")
    await trio.testing.wait_all_tasks_blocked()
    [info] = await sup.which_children()
    assert info.id == "perm" and info.ref is not perm and info.restarts == 1


async def test_intensity_exceeded_stops_everything(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    sup = await start_dynamic_supervisor(nursery, max_restarts=1)
    bystander = await sup.start_child(child_spec(Echo, id="bystander"))
    ref = await sup.start_child(child_spec(Echo, id="crasher"))
    for _ in range(2):
        with pytest.raises(ActorExited):
            await ref.call("crash")
        await trio.testing.wait_all_tasks_blocked()
        infos = [i for i in await sup.which_children() if i.id == "crasher"] if sup.alive else []
        if infos and infos[0].ref is not None:
            ref = infos[0].ref
    assert await sup.wait() == GIVE_UP_REASON
    assert bystander.exit_reason == Shutdown()


async def test_start_child_failure_names_the_child(nursery: trio.Nursery) -> None:
    sup = await start_dynamic_supervisor(nursery)
    with pytest.raises(StartError, match="'db' failed to start") as info:
        await sup.start_child(child_spec(FailingInit, id="db"))
    assert isinstance(info.value.__cause__, ValueError)
    assert sup.alive and await sup.which_children() == []


async def test_start_child_with_a_taken_name_fails_the_caller_not_the_supervisor(
    nursery: trio.Nursery,
) -> None:
    registry = Registry()
    sup = await start_dynamic_supervisor(nursery)
    first = await sup.start_child(child_spec(Echo, id="a", name="svc", registry=registry))
    with pytest.raises(StartError, match="'b' failed to start") as info:
        await sup.start_child(child_spec(Echo, id="b", name="svc", registry=registry))
    assert isinstance(info.value.__cause__, NameTaken)
    assert sup.alive and registry.whereis("svc") is first
    assert [c.ref for c in await sup.which_children()] == [first]
    other = await sup.start_child(child_spec(Echo, id="c"))
    assert await other.call("still serving") == "still serving"


async def test_bad_arguments_are_refused(nursery: trio.Nursery) -> None:
    with pytest.raises(InvalidSpec, match="max_children"):
        await start_dynamic_supervisor(nursery, max_children=-1)
    sup = await start_dynamic_supervisor(nursery)
    with pytest.raises(InvalidSpec, match="ChildSpec"):
        await sup.start_child(Echo)  # type: ignore[arg-type]


async def test_dynamic_supervisor_nested_under_a_supervisor(nursery: trio.Nursery) -> None:
    top = await start_supervisor(nursery, [dynamic_supervisor_spec("jobs", max_children=5)])
    [info] = await top.which_children()
    assert info.type == "supervisor"
    jobs = info.ref
    assert isinstance(jobs, DynamicSupervisorRef)
    child = await jobs.start_child(child_spec(Echo))
    await top.stop(Shutdown())
    assert not jobs.alive and not child.alive


async def test_open_dynamic_supervisor_stops_children_on_exit() -> None:
    journal: Journal = []
    async with open_dynamic_supervisor() as sup:
        for tag in "abc":
            await sup.start_child(child_spec(Echo, journal, tag))
    assert sorted(journal) == sorted([("start", t) for t in "abc"] + [("stop", t) for t in "abc"])


async def test_exited_temporary_children_are_forgotten_and_not_kept_alive(
    nursery: trio.Nursery,
) -> None:
    # Temporary children are not monitored (no Down per exit): the supervisor must still never
    # report, count or terminate one that has exited, and must not hold on to them forever.
    sup = await start_dynamic_supervisor(nursery, max_children=1)
    first = await sup.start_child(child_spec(Echo, id="first", restart="temporary"))
    assert await first.call("stop") == "stopping"
    await first.wait()
    assert await sup.which_children() == []
    assert (await sup.count_children()).specs == 0
    with pytest.raises(UnknownChild):
        await sup.terminate_child(first)
    kept = weakref.ref(first)
    del first
    for _ in range(300):  # max_children=1: each start needs the exited one gone
        ref = await sup.start_child(child_spec(Echo, id="next", restart="temporary"))
        assert await ref.call("stop") == "stopping"
        await ref.wait()
    del ref
    gc.collect()
    assert kept() is None
    assert (await sup.count_children()).specs == 0


async def test_exited_temporary_children_are_pruned_without_being_asked(
    nursery: trio.Nursery,
) -> None:
    # Nobody calls which_children here: the table is pruned as it grows.
    sup = await start_dynamic_supervisor(nursery)
    first = await sup.start_child(child_spec(Echo, restart="temporary"))
    # The crash is logged with its exception; where an earlier test configured structlog to go
    # through stdlib logging, pytest's log capture keeps that record (and so, through the
    # traceback, the actor) for the rest of the test. Capture the events here and drop them.
    with structlog.testing.capture_logs():
        first.cast("crash")
        await first.wait()
    kept = weakref.ref(first)
    del first
    for _ in range(300):
        ref = await sup.start_child(child_spec(Echo, restart="temporary"))
        ref.kill()
        await ref.wait()
    del ref
    gc.collect()
    assert kept() is None
