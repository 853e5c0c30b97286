"""The handles users hold: `ActorRef` (to an actor) and `MonitorRef` (to one monitor).

An `ActorRef` is a thin handle on the actor's `Process` (see _process.py), where the state and
the rules live; once the actor has exited, on the small `Exited` record that replaces it. Made
only by the runtime; hashable, compared by identity.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from threading import get_ident
from typing import TYPE_CHECKING, Any, final

import trio

from ._call import CAST, INFO, call, check_timeout
from ._errors import CallToSelf
from ._exited import Exited
from ._reasons import ExitReason, Normal
from ._threads import hand_over, refuse_foreign

if TYPE_CHECKING:
    from ._process import Process


@dataclass(frozen=True, slots=True)
class ActorStatistics:
    """`ActorRef.statistics()`: messages waiting in the mailbox, and its capacity (a
    supervisor's ref answers a `SupervisorStatistics`, which adds its recent child exits)."""

    queued: int
    capacity: int


class ActorRef:
    """The handle to an actor. Made only by the runtime (`spawn`, supervisors); hashable, compared
    by identity, safe to share between tasks and threads (see docs/supervisors.md, "Threads").
    Every method works whether or not the actor is
    still alive: requests to an exited actor raise `ActorExited` carrying its exit reason.
    """

    __slots__ = ("__weakref__", "_process")

    _process: Process | Exited

    def __init__(self, *args: object, **kwargs: object) -> None:
        raise TypeError("ActorRef is made by spawn() or a supervisor, not built directly")

    @classmethod
    def _new(cls, process: Process) -> ActorRef:
        self = object.__new__(cls)
        self._process = process
        return self

    @property
    def name(self) -> Hashable:
        """The name given at spawn time, or ``"<Class>@<hex id>"`` for an unnamed actor."""
        name = self._process.name
        return name if name is not None else self._default_name()

    def _default_name(self) -> str:
        return f"{self._process.class_name}@{id(self):x}"

    @property
    def alive(self) -> bool:
        """True until the actor has fully exited (its exit reason is then known)."""
        return self._process.reason is None

    @property
    def exit_reason(self) -> ExitReason | None:
        """The exit reason once the actor has exited, else None."""
        return self._process.reason

    def statistics(self) -> ActorStatistics:
        """How many messages wait in the mailbox, and its capacity (``mailbox_size`` at spawn)."""
        mailbox = self._process.mailbox
        return ActorStatistics(len(mailbox), mailbox.capacity)

    async def call(self, msg: Any, timeout: float | None = 5.0) -> Any:  # noqa: ASYNC109
        """Send `msg` to `handle_call` and wait for the reply.

        Raises `MailboxFull` at once when the mailbox is full; `ActorExited` at once if the actor
        has exited, or when it exits before replying (when `handle_call` raised, the reason is a
        `Crash` and `__cause__` is that exception; a call made while it runs `terminate` waits
        for its exit and gets the final reason); `CallTimeout` after `timeout` seconds (None
        waits forever). A reply that arrives after the timeout or a cancellation is dropped; the
        actor is not affected. Cancellation: the call is abandoned, the message may still be
        handled.
        """
        return await call(self._process, msg, timeout, wait_for_room=False)

    def cast(self, msg: Any) -> None:
        """Queue `msg` for `handle_cast` and return at once (never blocks, not a checkpoint).

        Raises `MailboxFull` when the mailbox is full, `ActorExited` if the actor has exited.
        From a plain thread it is handed to the actor's trio run, the thread waiting for that;
        from another thread's event loop it raises `WrongThread`.
        """
        process = self._process
        if process.thread != get_ident():
            return hand_over(process, "ActorRef.cast", self.cast, msg)
        if not process.mailbox.put((CAST, msg)):
            raise process.refusal()

    def send(self, msg: Any) -> None:
        """Queue `msg` for `handle_info`; same rules as `cast` (bounded, never blocks)."""
        process = self._process
        if process.thread != get_ident():
            return hand_over(process, "ActorRef.send", self.send, msg)
        if not process.mailbox.put((INFO, msg)):
            raise process.refusal()

    # The timeout is part of the semantics (graceful until then, kill after), not a deadline.
    async def stop(
        self,
        reason: ExitReason | None = None,
        timeout: float | None = 5.0,  # noqa: ASYNC109
    ) -> ExitReason:
        """Stop the actor gracefully and return its exit reason.

        The request is a message: the actor handles what was sent before it, then runs
        `terminate(reason)` and exits with `reason` (default `Normal()`). If it has not exited
        after `timeout` seconds it is killed and exits with `Killed()`; `timeout=0` kills at
        once, `None` waits forever. Returns at once if the actor has already exited.
        """
        process = self._process
        if process.thread != get_ident():
            raise refuse_foreign("ActorRef.stop")
        if process.reason is not None:
            return process.reason
        if trio.lowlevel.current_task() is process.task:
            raise CallToSelf(f"{self!r} cannot await its own stop; use self.stop() in a hook")
        check_timeout("stop", timeout)
        if timeout == 0:
            process.kill()
            return await self.wait()
        process.request_stop(Normal() if reason is None else reason)
        if timeout is not None:
            with trio.move_on_after(timeout):
                return await self.wait()
            process.kill()
        return await self.wait()

    def kill(self) -> None:
        """Cancel the actor at once (brutal kill): it exits with `Killed()` without `terminate`
        (or cuts a `terminate` in progress short). Returns immediately; `await ref.wait()` to wait
        until it has exited."""
        process = self._process
        if process.thread != get_ident():
            return hand_over(process, "ActorRef.kill", process.kill)
        process.kill()

    async def wait(self) -> ExitReason:
        """Wait until the actor has exited and return its exit reason. Works from any trio task."""
        process = self._process
        if process.thread != get_ident():
            raise refuse_foreign("ActorRef.wait")
        if process.reason is not None:
            await trio.lowlevel.checkpoint()
            return process.reason
        assert not isinstance(process, Exited)  # an `Exited` has a reason
        if process.exit_event is None:
            process.exit_event = trio.Event()
        await process.exit_event.wait()
        assert process.reason is not None
        return process.reason

    def __repr__(self) -> str:
        process = self._process
        state = "" if process.reason is None else f" exited: {process.reason}"
        name = "" if process.name is None else f" {process.name!r}"
        return f"<{type(self).__name__} {self._default_name()}{name}{state}>"


def process_of(ref: ActorRef) -> Process | Exited:
    """The process behind a handle, or its `Exited` record (for the runtime's own modules)."""
    return ref._process


def live_process(ref: ActorRef) -> Process | None:
    """The process behind a handle, None once the actor has exited."""
    process = ref._process
    return None if isinstance(process, Exited) else process


@final
class MonitorRef:
    """What `Actor.monitor` returns: one monitor of `target`. Each `Down` carries the monitor
    it answers; pass it to `Actor.demonitor` to remove that monitor. Compared by identity."""

    __slots__ = ("target",)

    def __init__(self, target: ActorRef) -> None:
        self.target = target

    def __repr__(self) -> str:
        return f"<MonitorRef of {self.target!r}>"
