"""Calls and deferred replies: the `Caller` a `handle_call` receives, and the call itself.

A call queues ``(CALL, caller)`` in the callee's mailbox and parks the calling task until
`Caller.reply` (or a failure) reschedules it. A caller that gave up on a deferred reply is
forgotten by the callee at once (its message and task with it), and a late `reply()` is dropped.

A call's timeout is an entry in one timer per trio run (`_Timers`, a system task found through
a `RunVar`), not a cancel scope per call, which cost as much as the call itself: calls with the
same timeout expire in the order they were made, so each timeout value has a FIFO queue, and
the timer sleeps until the earliest head. An entry is cut loose from its caller when the call
ends (it then holds nothing but its deadline) and a caller pops the ended entries at the head
of its queue, so in the usual case the queue holds only the calls in flight. A request that
may wait for room in the mailbox (a supervisor's) keeps a cancel scope: it may park elsewhere.
"""

from __future__ import annotations

import math
from collections import deque
from threading import get_ident
from typing import TYPE_CHECKING, Any, Final, final

import outcome
import trio
import trio.lowlevel

from ._errors import CallTimeout, CallToSelf, InvalidSpec
from ._exited import Exited
from ._threads import hand_over, refuse_foreign

if TYPE_CHECKING:
    from ._process import Process

# Mailbox items are (kind, payload) tuples.
CALL: Final = 0
CAST: Final = 1
INFO: Final = 2
STOP: Final = 3

_WAITING: Final = 0
_REPLIED: Final = 1
_ABANDONED: Final = 2


@final
class _NoReply:
    __slots__ = ()

    def __repr__(self) -> str:
        return "NOREPLY"


NOREPLY: Final = _NoReply()
"""Return this from `handle_call` to answer later with `caller.reply(value)`."""


@final
class Caller:
    """The pending call handed to `handle_call`: `reply(value)` answers it (once; later replies
    and replies to a caller that timed out or was cancelled are dropped silently).

    `msg` is the request; it is cleared (None) when the caller gives up on a deferred reply, so
    a `Caller` kept in a list of waiters holds neither the message nor the calling task."""

    __slots__ = ("_callee", "_state", "_task", "msg")

    def __init__(self, msg: Any, task: trio.lowlevel.Task, callee: Process) -> None:
        self.msg = msg
        self._task: trio.lowlevel.Task | None = task
        self._callee: Process | None = callee
        self._state = _WAITING

    @property
    def waiting(self) -> bool:
        """True until the caller got its reply, timed out, was cancelled, or the callee died."""
        return self._state == _WAITING

    def reply(self, value: Any) -> None:
        """Answer the call with `value`. Safe to call at any time, from any trio task, and
        from a plain thread (handed to the actor's trio run; the thread waits until it is
        done)."""
        callee = self._callee
        if callee is not None and callee.thread != get_ident():
            hand_over(callee, "Caller.reply", self.reply, value)
            return
        if self._state == _WAITING:
            self._state = _REPLIED
            assert self._task is not None
            trio.lowlevel.reschedule(self._task, outcome.Value(value))
            self._release()

    def _release(self) -> bool:
        """Drop the links to the calling task and the callee; True if it was deferred."""
        callee = self._callee
        deferred = callee is not None and callee.forget_deferred(self)
        self._task = None
        self._callee = None
        return deferred

    def _abort(self, _: Any) -> trio.lowlevel.Abort:
        # The caller gave up (timeout or cancellation). A message still queued is handled as
        # usual (the request was sent); a deferred one is forgotten with its message.
        self._state = _ABANDONED
        if self._release():
            self.msg = None
        return trio.lowlevel.Abort.SUCCEEDED

    def __repr__(self) -> str:
        if self._callee is None:
            return f"<Caller msg={self.msg!r} (answered or gone)>"
        return f"<Caller of {self._callee.ref!r} msg={self.msg!r}>"


def fail_caller(caller: Caller, error: BaseException) -> None:
    """Fail a caller still waiting with `error` (the callee exited)."""
    if caller._state == _WAITING:
        caller._state = _REPLIED
        assert caller._task is not None
        trio.lowlevel.reschedule(caller._task, outcome.Error(error))
        caller._release()


def is_waiting(caller: Caller) -> bool:
    return caller._state == _WAITING


def check_timeout(what: str, timeout: float | None) -> None:
    if timeout is not None and not timeout >= 0:  # also refuses NaN
        raise InvalidSpec(f"{what} timeout must be >= 0 seconds or None, got {timeout!r}")


async def call(
    process: Process | Exited,
    msg: Any,
    timeout: float | None,  # noqa: ASYNC109
    *,
    wait_for_room: bool,
) -> Any:
    """`ActorRef.call`; with `wait_for_room`, a full mailbox makes the call wait (within its
    timeout) instead of raising `MailboxFull`, and a caller already cancelled sends nothing."""
    if process.thread != get_ident():
        raise refuse_foreign("call")
    task = trio.lowlevel.current_task()
    if task is process.task:
        raise CallToSelf(f"{process.ref!r} called itself; it would wait forever for its reply")
    check_timeout("call", timeout)
    if isinstance(process, Exited):
        raise process.refusal()
    caller = Caller(msg, task, process)
    if timeout is None:
        return await _send_and_wait(process, caller, wait_for_room)
    if wait_for_room:
        with trio.move_on_after(timeout):
            return await _send_and_wait(process, caller, wait_for_room)
        raise CallTimeout(repr(process.ref), timeout)
    try:
        timers = _TIMERS.get()
    except LookupError:
        timers = _Timers.start()
    entry: list[Any] = [trio.current_time() + timeout, caller, timeout]
    queue = timers.add(entry)
    try:
        return await _send_and_wait(process, caller, False)
    finally:
        entry[1] = None
        while queue and queue[0][1] is None:
            queue.popleft()


class _Timers:
    """The call timeouts of one trio run (see the module docstring)."""

    __slots__ = ("parked", "queues", "scope", "until")

    def __init__(self) -> None:
        self.queues: dict[float, deque[list[Any]]] = {}
        self.until = math.inf
        self.parked: trio.lowlevel.Task | None = None
        self.scope: trio.CancelScope | None = None

    @classmethod
    def start(cls) -> _Timers:
        timers = cls()
        _TIMERS.set(timers)
        trio.lowlevel.spawn_system_task(timers.run, name="supervisors call timeouts")
        return timers

    def add(self, entry: list[Any]) -> deque[list[Any]]:
        """Queue `entry` ``[deadline, caller, timeout]``; its queue, for the caller to trim."""
        queue = self.queues.get(entry[2])
        if queue is None:
            queue = self.queues[entry[2]] = deque()
        queue.append(entry)
        if entry[0] < self.until:  # earlier than the timer's next wake-up (rare)
            self.until = entry[0]
            if self.parked is not None:
                task, self.parked = self.parked, None
                trio.lowlevel.reschedule(task)
            elif self.scope is not None:
                self.scope.deadline = entry[0]
        return queue

    async def run(self) -> None:
        while True:
            now = trio.current_time()
            nearest = math.inf
            for timeout, queue in list(self.queues.items()):
                while queue and (queue[0][1] is None or queue[0][0] <= now):
                    caller = queue.popleft()[1]
                    if caller is not None:
                        _expire(caller, timeout)
                if queue:
                    nearest = min(nearest, queue[0][0])
                else:
                    del self.queues[timeout]
            self.until = nearest
            if nearest == math.inf:
                self.parked = trio.lowlevel.current_task()
                await trio.lowlevel.wait_task_rescheduled(self._abort)
            else:
                with trio.CancelScope(deadline=nearest) as self.scope:
                    await trio.sleep_forever()
                self.scope = None

    def _abort(self, _: Any) -> trio.lowlevel.Abort:
        self.parked = None
        return trio.lowlevel.Abort.SUCCEEDED


_TIMERS: Final = trio.lowlevel.RunVar[_Timers]("supervisors_call_timers")


def _expire(caller: Caller, timeout: float) -> None:
    """The call's timeout passed while it still waited: it raises `CallTimeout`. A message
    still queued is handled as usual (the request was sent); a deferred one is forgotten."""
    if caller._state != _WAITING:
        return
    task, callee = caller._task, caller._callee
    assert task is not None and callee is not None
    caller._state = _ABANDONED
    if caller._release():
        caller.msg = None
    trio.lowlevel.reschedule(task, outcome.Error(CallTimeout(repr(callee.ref), timeout)))


async def _send_and_wait(process: Process, caller: Caller, wait_for_room: bool) -> Any:
    item = (CALL, caller)
    if wait_for_room:
        await trio.lowlevel.checkpoint_if_cancelled()
        if not await process.mailbox.put_wait(item):
            _refused(process, caller)
    elif not process.mailbox.put(item):
        _refused(process, caller)
    return await trio.lowlevel.wait_task_rescheduled(caller._abort)


def _refused(process: Process, caller: Caller) -> None:
    """The mailbox refused the call. An actor still running `terminate` has no final reason
    yet (terminate may crash, or be killed): the caller waits for the exit, failed then with
    the reason monitors and links learn (OTP's caller learns it from its monitor)."""
    if process.reason is None and process.closing is not None:
        if process.deferred is None:
            process.deferred = set()
        process.deferred.add(caller)
        return
    raise process.refusal()
