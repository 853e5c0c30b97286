"""The one error hierarchy of `supervisors`: catch `SupervisorError` to catch them all.

::

    SupervisorError
    ├── MailboxFull          cast/send/call found the actor's bounded mailbox full
    ├── ActorExited          the actor is gone (or died during a call); carries the exit reason
    ├── CallTimeout          call() got no reply in time (also a TimeoutError)
    ├── StartError           an actor's init failed; names the actor or the supervisor child
    ├── NameTaken            a registry name is already bound to a live actor
    ├── MaxChildren          a DynamicSupervisor refused a child: max_children reached
    ├── UnknownChild         a supervisor has no child with that id or ref (also a LookupError)
    ├── NoProcess            registry.call: no actor has the name, none will (also a LookupError)
    ├── InvalidSpec          a ChildSpec, option or argument is malformed (also a ValueError)
    ├── CallToSelf           an actor called itself, which would deadlock
    └── WrongThread          awaited outside the actor's trio run (also a RuntimeError)
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._reasons import ExitReason


class SupervisorError(Exception):
    """Base class of every error raised by `supervisors`."""


class MailboxFull(SupervisorError):
    """The actor's mailbox is at capacity; the message was not queued (nothing is dropped
    silently)."""

    def __init__(self, actor: str, capacity: int) -> None:
        super().__init__(
            f"mailbox of {actor} is full ({capacity} messages waiting); the actor is overloaded, "
            "retry later or give it a larger mailbox_size"
        )
        self.actor = actor
        self.capacity = capacity


class ActorExited(SupervisorError):
    """The actor has exited (before or during the request). `reason` is its exit reason.

    When the actor crashed, `reason` is a `Crash` and `__cause__` is the exception that crashed it.
    """

    def __init__(self, reason: ExitReason, actor: str = "actor") -> None:
        super().__init__(f"{actor} exited: {reason}")
        self.reason = reason
        self.actor = actor


class CallTimeout(SupervisorError, TimeoutError):
    """`call()` received no reply within its timeout. A reply arriving later is dropped."""

    def __init__(self, actor: str, timeout: float) -> None:
        super().__init__(f"{actor} did not reply within {timeout:g} s")
        self.actor = actor
        self.timeout = timeout


class StartError(SupervisorError):
    """An actor failed to start: its `init` raised, or a supervisor child failed to start.

    `child` names what failed (a supervisor child id, or the actor's name); `reason` is the exit
    reason of the failed start; `__cause__` is the original exception when there is one.
    """

    def __init__(self, child: Hashable, reason: ExitReason, detail: str = "") -> None:
        text = f"{child!r} failed to start: {reason}"
        super().__init__(f"{text} ({detail})" if detail else text)
        self.child = child
        self.reason = reason


class NameTaken(SupervisorError):
    """The registry already binds this name to a live actor."""

    def __init__(self, name: Hashable, holder: str) -> None:
        super().__init__(f"name {name!r} is already registered to {holder}")
        self.name = name
        self.holder = holder


class MaxChildren(SupervisorError):
    """A DynamicSupervisor already runs `max_children` children and refused another one."""

    def __init__(self, supervisor: str, max_children: int) -> None:
        super().__init__(
            f"{supervisor} already runs its maximum of {max_children} children; "
            "stop one or raise max_children"
        )
        self.supervisor = supervisor
        self.max_children = max_children


class UnknownChild(SupervisorError, LookupError):
    """The supervisor has no child with that id (or, for a DynamicSupervisor, that ref)."""

    def __init__(self, supervisor: str, child: object) -> None:
        super().__init__(f"{supervisor} has no child {child!r}")
        self.supervisor = supervisor
        self.child = child


class NoProcess(SupervisorError, LookupError):
    """`Registry.call` to a name no actor holds and no live supervisor will start an actor
    under (OTP's ``noproc``): raised at once, without waiting for the timeout."""

    def __init__(self, name: Hashable) -> None:
        super().__init__(
            f"no actor is registered as {name!r}, and no supervisor will start one under it"
        )
        self.name = name


class InvalidSpec(SupervisorError, ValueError):
    """A ChildSpec, an option or an argument is malformed; the message says which and why."""


class CallToSelf(SupervisorError):
    """An actor called itself: it would wait forever for its own reply."""


class WrongThread(SupervisorError, RuntimeError):
    """An entry point of the runtime was used from a thread (or another trio run) that cannot
    reach the actor's trio run this way; the message says what works (see `_threads.py`)."""
