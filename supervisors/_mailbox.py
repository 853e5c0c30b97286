"""The bounded mailbox each actor reads from: one deque, one parked reader, no locks.

Writers never block: `put` queues or raises `MailboxFull` at once. Runtime messages (Down, Exit,
TaskDone, stop requests) bypass the bound so the runtime itself can never lose a signal. The single
reader parks with trio's low-level primitives and a writer hands it the item directly, which is
cheaper than a memory channel. The deque is made on the first queued item: an actor whose
messages always find it waiting (or that never gets any) never allocates one, which matters
for short-lived actors and for memory with many idle ones.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import outcome
import trio

YIELD_EVERY = 32
"""A reader with a backlog yields to the scheduler after this many messages in a row."""


class Mailbox:
    __slots__ = ("_capacity", "_closed", "_interrupt", "_queue", "_reader", "_streak")

    def __init__(self, capacity: int) -> None:
        self._queue: deque[Any] | None = None
        self._capacity = capacity
        self._reader: trio.lowlevel.Task | None = None
        self._closed = False
        self._streak = 0
        self._interrupt: BaseException | None = None

    def __len__(self) -> int:
        queue = self._queue
        return 0 if queue is None else len(queue)

    @property
    def capacity(self) -> int:
        return self._capacity

    @property
    def closed(self) -> bool:
        return self._closed

    def put(self, item: Any) -> bool:
        """Queue `item` within the bound. False when full or closed: the caller raises."""
        reader = self._reader
        if reader is not None:
            self._reader = None
            trio.lowlevel.reschedule(reader, outcome.Value(item))
            return True
        queue = self._queue
        if queue is None:
            if self._closed:
                return False
            self._queue = deque((item,))
            return True
        if len(queue) >= self._capacity or self._closed:
            return False
        queue.append(item)
        return True

    def put_system(self, item: Any, *, urgent: bool = False) -> None:
        """Queue a runtime message regardless of the bound; `urgent` puts it first in line.
        Dropped when the mailbox is closed: the actor is exiting and will read nothing more."""
        if self._closed:
            return
        reader = self._reader
        if reader is not None:
            self._reader = None
            trio.lowlevel.reschedule(reader, outcome.Value(item))
        elif self._queue is None:
            self._queue = deque((item,))
        elif urgent:
            self._queue.appendleft(item)
        else:
            self._queue.append(item)

    async def get(self) -> Any:
        """Next item; parks while the mailbox is empty.

        A ready item is taken after a cheap cancellation check, and every `YIELD_EVERY`
        consecutive ready items the reader yields to the scheduler, so a busy actor never
        starves the others, without paying a full scheduling round per message. After
        `interrupt(error)`, raises `error` instead of returning an item.
        """
        queue = self._queue
        if queue:
            self._streak += 1
            if self._streak >= YIELD_EVERY:
                self._streak = 0
                await trio.lowlevel.checkpoint()
            else:
                await trio.lowlevel.checkpoint_if_cancelled()
            if self._interrupt is not None:
                raise self._interrupt
            # Nothing else reads this mailbox, so the item is still there after a yield.
            return queue.popleft()
        if self._interrupt is not None:
            raise self._interrupt
        self._streak = 0
        self._reader = trio.lowlevel.current_task()
        return await trio.lowlevel.wait_task_rescheduled(self._abort)

    def interrupt(self, error: BaseException) -> None:
        """Make the reader's `get` raise `error`: at once if it is parked, else at its next
        `get` (items stay queued). How an actor that runs without a cancel scope is killed."""
        self._interrupt = error
        reader = self._reader
        if reader is not None:
            self._reader = None
            trio.lowlevel.reschedule(reader, outcome.Error(error))

    def _abort(self, _: Any) -> trio.lowlevel.Abort:
        self._reader = None
        return trio.lowlevel.Abort.SUCCEEDED

    def close(self) -> list[Any]:
        """Refuse further items and return what was still queued."""
        self._closed = True
        queue = self._queue
        if not queue:
            return []
        items: list[Any] = list(queue)
        queue.clear()
        return items
