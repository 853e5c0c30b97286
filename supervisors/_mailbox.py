"""The bounded mailbox each actor reads from: one deque, one parked reader, no locks.

`put` never blocks: it queues or reports the mailbox full at once, and the sender raises
`MailboxFull`. `put_wait` is its waiting twin, for requests that must not be refused for lack of
room (a supervisor's own requests): it parks until the reader has taken an item. Runtime messages
(`Down`, `Exit`, `TaskDone`, stop requests) bypass the bound so the runtime never loses a signal.
The single reader parks with trio's low-level primitives and a writer hands it the item directly,
which is cheaper than a memory channel.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any, Final

import outcome
import trio

_CLOSED: Final = deque[Any](maxlen=0)
"""The queue of every closed mailbox: always empty (it drops anything appended)."""

YIELD_EVERY: Final = 32
"""A reader with a backlog yields to the scheduler after this many messages in a row."""


class Mailbox:
    __slots__ = ("_capacity", "_closed", "_queue", "_reader", "_room", "_streak")

    def __init__(self, capacity: int) -> None:
        self._queue: deque[Any] = deque()
        self._capacity = capacity
        self._reader: trio.lowlevel.Task | None = None
        self._room: trio.lowlevel.ParkingLot | None = None
        self._closed = False
        self._streak = 0

    def __len__(self) -> int:
        return len(self._queue)

    @property
    def capacity(self) -> int:
        return self._capacity

    @property
    def closed(self) -> bool:
        return self._closed

    def put(self, item: Any) -> bool:
        """Queue `item` within the bound. False when full or closed: the caller raises."""
        if self._closed:
            return False
        reader = self._reader
        if reader is not None:
            self._reader = None
            trio.lowlevel.reschedule(reader, outcome.Value(item))
            return True
        if len(self._queue) >= self._capacity:
            return False
        self._queue.append(item)
        return True

    async def put_wait(self, item: Any) -> bool:
        """Queue `item`, waiting for room while the mailbox is full. False once it is closed.
        Cancellation: if cancelled while waiting, nothing was queued."""
        while not self.put(item):
            if self._closed:
                return False
            if self._room is None:
                self._room = trio.lowlevel.ParkingLot()
            await self._room.park()
        return True

    def put_system(self, item: Any) -> None:
        """Queue a runtime message regardless of the bound, in order with the others.
        Dropped when the mailbox is closed: the actor is exiting and will read nothing more."""
        if self._closed:
            return
        reader = self._reader
        if reader is not None:
            self._reader = None
            trio.lowlevel.reschedule(reader, outcome.Value(item))
        else:
            self._queue.append(item)

    async def get(self) -> Any:
        """Next item; parks while the mailbox is empty.

        A ready item is taken after a cheap cancellation check, and every `YIELD_EVERY`
        consecutive ready items the reader yields to the scheduler, so a busy actor never
        starves the others without paying a full scheduling round per message.
        """
        queue = self._queue
        if not queue:
            self._streak = 0
            self._reader = trio.lowlevel.current_task()
            return await trio.lowlevel.wait_task_rescheduled(self._abort)
        self._streak += 1
        if self._streak >= YIELD_EVERY:
            self._streak = 0
            await trio.lowlevel.checkpoint()
        else:
            await trio.lowlevel.checkpoint_if_cancelled()
        # Nothing else reads this mailbox, so the item is still there after a yield.
        item = queue.popleft()
        room = self._room
        if room:
            room.unpark()
        return item

    def _abort(self, _: Any) -> trio.lowlevel.Abort:
        self._reader = None
        return trio.lowlevel.Abort.SUCCEEDED

    def remove(self, match: Callable[[Any], bool]) -> None:
        """Drop the queued items for which ``match(item)`` is true (a demonitor's flush)."""
        queue = self._queue
        kept = [item for item in queue if not match(item)]
        if len(kept) != len(queue):
            queue.clear()
            queue.extend(kept)
            if self._room:
                self._room.unpark_all()

    def close(self) -> list[Any]:
        """Refuse further items and return what was still queued."""
        self._closed = True
        items = list(self._queue)
        # A closed mailbox takes nothing more: it lets go of its deque (and its block of
        # slots), which an exited actor's ref would otherwise keep for nothing.
        self._queue = _CLOSED
        if self._room:
            self._room.unpark_all()
        return items
