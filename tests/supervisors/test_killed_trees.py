"""A killed supervisor's subtree dies killed: its children exit `Killed()` without running
`terminate`, and the supervisor reports its exit only once they have, so a parent that restarts
it never meets their names still held."""

from __future__ import annotations

import trio
import trio.testing
from actors_for_tests import Echo, Journal, Stubborn

from supervisors import (
    Killed,
    Registry,
    child_spec,
    open_supervisor,
    start_dynamic_supervisor,
    start_supervisor,
    supervisor_spec,
)


async def test_killed_supervisors_children_exit_killed_without_terminate(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    journal: Journal = []
    sup = await start_supervisor(nursery, [child_spec(Stubborn, journal, "a", id="a")])
    (info,) = await sup.which_children()
    assert info.ref is not None
    sup.kill()
    assert await sup.wait() == Killed()
    assert not info.ref.alive  # gone before its supervisor reported its exit
    assert await info.ref.wait() == Killed()
    assert journal == [("start", "a")]  # terminate never ran


async def test_killed_dynamic_supervisors_children_exit_killed(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    journal: Journal = []
    sup = await start_dynamic_supervisor(nursery)
    ref = await sup.start_child(child_spec(Stubborn, journal, "a", id="a"))
    sup.kill()
    assert await sup.wait() == Killed()
    assert not ref.alive
    assert ref.exit_reason == Killed()
    assert journal == [("start", "a")]


async def test_one_for_all_restarts_a_brutal_kill_supervisor_child_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The nested supervisor's child holds a name and would take 1000 s to terminate: killed,
    # it frees the name before the restart, so one worker crash is one restart, not a give-up.
    journal: Journal = []
    registry = Registry()
    inner = supervisor_spec(
        "inner",
        [child_spec(Stubborn, journal, "named", id="named", name="named", registry=registry)],
        shutdown="brutal_kill",
    )
    children = [child_spec(Echo, journal, "worker", id="worker"), inner]
    async with open_supervisor(children, strategy="one_for_all") as sup:
        worker, _ = await sup.which_children()
        old_named = registry.whereis("named")
        assert worker.ref is not None and old_named is not None
        worker.ref.cast("crash")
        assert await worker.ref.wait() != Killed()
        rows = await sup.which_children()
        assert [(row.id, row.status, row.restarts) for row in rows] == [
            ("worker", "running", 1),
            ("inner", "running", 1),
        ]
        assert sup.alive
        assert old_named.exit_reason == Killed()
        new_named = registry.whereis("named")
        assert new_named is not None and new_named is not old_named
        # The old named child never ran terminate: both restarted without a give-up.
        assert journal == [
            ("start", "worker"),
            ("start", "named"),
            ("stop", "worker"),  # the crash's terminate
            ("start", "worker"),
            ("start", "named"),
        ]
