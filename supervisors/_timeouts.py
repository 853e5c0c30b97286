"""Call timeouts without a cancel scope per call: one timer task per trio run.

A `trio.move_on_after` per call costs more than the rest of a call put together, so pending calls
are kept in one FIFO per timeout duration instead (deadlines in a FIFO only grow, because trio's
clock is monotonic). A system task sleeps until the earliest live deadline and fails the callers
whose time ran out with `CallTimeout`. Entries of calls already answered are pruned as new ones
arrive, so a FIFO stays as short as the number of calls really waiting. Time is trio's clock, so
MockClock drives it in tests.
"""

from __future__ import annotations

import math
from collections import deque
from typing import TYPE_CHECKING, Final

import trio

if TYPE_CHECKING:
    from typing import Protocol

    class _Entry(Protocol):
        _state: int

        def _time_out(self, timeout: float) -> None: ...


_WAITING: Final = 0  # Caller._state meaning "no reply yet" (see _actor.py)


class _Timer:
    __slots__ = ("_next", "_queues", "_scope")

    def __init__(self) -> None:
        self._queues: dict[float, deque[tuple[float, _Entry]]] = {}
        self._next = math.inf
        self._scope: trio.CancelScope | None = None

    def add(self, timeout: float, caller: _Entry) -> None:
        deadline = trio.current_time() + timeout
        queue = self._queues.get(timeout)
        if queue is None:
            queue = self._queues[timeout] = deque()
        else:
            while queue and queue[0][1]._state != _WAITING:
                queue.popleft()
        queue.append((deadline, caller))
        if deadline < self._next:
            self._next = deadline
            if self._scope is not None:
                self._scope.deadline = deadline

    def _expire(self) -> float:
        """Time out the callers whose deadline has passed; return the earliest one left.
        (A function of its own so that no caller stays referenced while the timer sleeps.)"""
        now = trio.current_time()
        earliest = math.inf
        for timeout, queue in list(self._queues.items()):
            while queue:
                deadline, caller = queue[0]
                if caller._state != _WAITING:
                    queue.popleft()
                elif deadline <= now:
                    queue.popleft()
                    caller._time_out(timeout)
                else:
                    earliest = min(earliest, deadline)
                    break
            if not queue:
                del self._queues[timeout]
        return earliest

    async def run(self) -> None:
        while True:
            earliest = self._expire()
            self._next = earliest
            with trio.CancelScope(deadline=earliest) as scope:
                self._scope = scope
                await trio.sleep_forever()
            self._scope = None


_TIMER: trio.lowlevel.RunVar[_Timer] = trio.lowlevel.RunVar("supervisors_call_timer")


def add_timeout(timeout: float, caller: _Entry) -> None:
    """Call ``caller._time_out(timeout)`` after `timeout` seconds unless its ``_state`` has left
    waiting by then (a Caller fails with CallTimeout; a stop guard kills the actor)."""
    try:
        timer = _TIMER.get()
    except LookupError:
        timer = _Timer()
        _TIMER.set(timer)
        trio.lowlevel.spawn_system_task(timer.run, name="supervisors call timeouts")
    timer.add(timeout, caller)
