"""start_child's start path: always a request to the supervisor, handled in order.

These pin what a start guarantees: requests queued before it are handled first, init
errors reach the caller and leave nothing behind, the child inherits the supervisor's context,
a cancelled caller starts nothing, and a task starting children in a loop lets others run.
"""

from __future__ import annotations

import contextvars
import gc
import weakref
from typing import Any

import pytest
import trio
import trio.testing
from actors_for_tests import Echo, Journal, Stubborn, Ticker

from supervisors import (
    Actor,
    Killed,
    MaxChildren,
    StartError,
    child_spec,
    spawn,
    start_dynamic_supervisor,
)

_where: contextvars.ContextVar[str] = contextvars.ContextVar("where", default="unset")


class _SeesContext(Actor):
    """Records the context variable its init and its own task see (init has no await)."""

    async def init(self, seen: list[str]) -> None:
        self.seen = seen
        seen.append(_where.get())
        self.ref.cast("look")

    async def handle_cast(self, msg: Any) -> None:
        self.seen.append(_where.get())


class _SeesContextAwaiting(_SeesContext):
    """The same, with an init that can suspend (so the supervisor's own task runs it)."""

    async def init(self, seen: list[str]) -> None:
        await trio.lowlevel.checkpoint()
        await super().init(seen)


async def _forever() -> None:
    await trio.sleep_forever()


class _FailsAfterStartingATask(Actor):
    """An init without await that starts a task it owns, then fails."""

    async def init(self, handles: list[Any]) -> None:
        handles.append(self.start_task(_forever))
        raise ValueError("no config")


async def test_start_child_waits_for_a_terminate_child_in_progress(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    # While the supervisor works through a shutdown ladder (4 s), a start must queue behind it,
    # not run at once in the caller's task.
    journal: Journal = []
    sup = await start_dynamic_supervisor(nursery, max_children=1)
    stubborn = await sup.start_child(child_spec(Stubborn, journal, "s", shutdown=4))
    nursery.start_soon(sup.terminate_child, stubborn)
    await trio.testing.wait_all_tasks_blocked()
    assert ("terminating", "s") in journal  # the ladder is under way
    # max_children=1: had this start overtaken the terminate, it would be refused.
    ref = await sup.start_child(child_spec(Echo, journal, "e"))
    assert trio.current_time() == pytest.approx(4)
    assert stubborn.exit_reason == Killed()
    assert [c.ref for c in await sup.which_children()] == [ref]


async def test_init_failure_on_the_fast_path_reaches_the_caller_and_reaps_its_task(
    nursery: trio.Nursery,
) -> None:
    handles: list[Any] = []
    sup = await start_dynamic_supervisor(nursery)
    with pytest.raises(StartError, match="'cfg' failed to start") as info:
        await sup.start_child(child_spec(_FailsAfterStartingATask, handles, id="cfg"))
    assert isinstance(info.value.__cause__, ValueError)
    # The start failed only once the task the child's init started had ended.
    [handle] = handles
    assert handle.status == "cancelled"
    assert sup.alive
    assert (await sup.count_children()).specs == 0


@pytest.mark.parametrize("actor", [_SeesContext, _SeesContextAwaiting])
async def test_child_inherits_the_supervisors_context_not_the_callers(
    nursery: trio.Nursery, actor: type[_SeesContext]
) -> None:
    _where.set("supervisor")
    sup = await start_dynamic_supervisor(nursery)
    _where.set("caller")
    seen: list[str] = []
    ref = await sup.start_child(child_spec(actor, seen, restart="temporary"))
    await trio.testing.wait_all_tasks_blocked()
    assert seen == ["supervisor", "supervisor"]
    assert ref.alive


async def test_cancelled_start_child_starts_nothing(nursery: trio.Nursery) -> None:
    sup = await start_dynamic_supervisor(nursery)
    with trio.CancelScope() as scope:
        scope.cancel()
        await sup.start_child(child_spec(Echo))
    assert scope.cancelled_caught
    assert (await sup.count_children()).specs == 0


async def test_a_task_starting_children_in_a_loop_lets_others_run(nursery: trio.Nursery) -> None:
    sup = await start_dynamic_supervisor(nursery)
    ticker = Ticker()

    spec = child_spec(Echo, restart="temporary")
    async with trio.open_nursery() as inner:
        inner.start_soon(ticker.run)
        await trio.lowlevel.checkpoint()
        before = ticker.ticks
        for _ in range(320):
            await sup.start_child(spec)
        after = ticker.ticks
        inner.cancel_scope.cancel()
    # At least one yield per 32 starts in a row (the mailbox's YIELD_EVERY).
    assert after - before >= 9
    assert (await sup.count_children()).active == 320


class _Brief(Actor):
    """Ends on its own: init casts it one message, and handling that stops it."""

    async def init(self) -> None:
        self.ref.cast("done")

    async def handle_cast(self, msg: Any) -> None:
        self.stop()


async def test_retrying_start_child_while_full_lets_the_children_exit(
    nursery: trio.Nursery,
) -> None:
    # A refused start must yield now and then too, or a task retrying in a loop would never
    # let the child it waits for run, exit and make room.
    sup = await start_dynamic_supervisor(nursery, max_children=1)
    spec = child_spec(_Brief, restart="temporary")
    first = await sup.start_child(spec)
    refused = 0
    for _ in range(1000):
        try:
            second = await sup.start_child(spec)
            break
        except MaxChildren:
            refused += 1
    else:
        pytest.fail("start_child never yielded to let the running child exit")
    assert not first.alive and second is not first


async def test_an_idle_actor_keeps_nothing_of_its_last_message(nursery: trio.Nursery) -> None:
    class Payload:
        pass

    ref = await spawn(nursery, Echo)
    payload = Payload()
    kept = weakref.ref(payload)
    # No timeout: a pending timeout entry holds its call until the deadline or later calls.
    reply = await ref.call(payload, timeout=None)
    assert reply is payload
    del payload, reply
    await trio.lowlevel.checkpoint()  # trio's run loop holds the value it last resumed us with
    gc.collect()
    assert kept() is None
    await ref.stop()
