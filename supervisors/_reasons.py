"""Exit reasons and the messages the runtime delivers to `handle_info`.

All are small frozen dataclasses, so they compare by value and work with `match`::

    match reason:
        case Normal() | Shutdown():
            ...
        case Crash(exc):
            ...
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._ref import ActorRef, MonitorRef
    from ._tasks import TaskHandle


@dataclass(frozen=True, slots=True)
class Normal:
    """The actor finished on purpose (`self.stop()`, or `ref.stop()` with the default reason)."""

    def __str__(self) -> str:
        return "normal"


@dataclass(frozen=True, slots=True)
class Shutdown:
    """The actor was asked to shut down, usually by its supervisor; `reason` says why (optional)."""

    reason: Any = None

    def __str__(self) -> str:
        return "shutdown" if self.reason is None else f"shutdown ({self.reason})"


@dataclass(frozen=True, slots=True, eq=False)
class Crash:
    """The actor crashed: `exception` escaped a hook, one of its tasks, or came from a link.

    Once the actor has exited, `exception.__traceback__` is None (its frames are released; the
    crash report logged the traceback), so a kept reason never pins the actor's state."""

    exception: BaseException

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Crash) and other.exception is self.exception

    def __hash__(self) -> int:
        return id(self.exception)

    def __str__(self) -> str:
        return f"crash ({type(self.exception).__name__}: {self.exception})"


@dataclass(frozen=True, slots=True)
class Killed:
    """The actor was cancelled without running `terminate` to its end: brutal kill, a shutdown
    timeout that ran out, or a cancelled nursery's shutdown that outlasted `cancel_shutdown`."""

    def __str__(self) -> str:
        return "killed"


ExitReason = Normal | Shutdown | Crash | Killed
"""Every exit reason: match on the four classes."""


def is_abnormal(reason: ExitReason) -> bool:
    """OTP's rule: normal and shutdown (with or without a reason) are not failures."""
    return not isinstance(reason, Normal | Shutdown)


@dataclass(frozen=True, slots=True, eq=False)
class Down:
    """A monitored actor exited with `reason`; `monitor` is the monitor this answers (what
    `Actor.monitor` returned). Match it as ``Down(ref, reason)`` or ``Down(ref, reason, mon)``."""

    ref: ActorRef
    reason: ExitReason
    monitor: MonitorRef


@dataclass(frozen=True, slots=True, eq=False)
class Exit:
    """A linked actor exited with `reason`; delivered only when the receiver traps exits."""

    ref: ActorRef
    reason: ExitReason


@dataclass(frozen=True, slots=True)
class IdleTimeout:
    """No message arrived for `seconds` (see `Actor.set_idle_timeout`; OTP's ``timeout``)."""

    seconds: float


@dataclass(frozen=True, slots=True, eq=False)
class TaskDone:
    """A task started with `Actor.start_task` returned `value`."""

    task: TaskHandle
    value: Any


@dataclass(frozen=True, slots=True, eq=False)
class TaskCancelled:
    """A task started with `Actor.start_task` was cancelled through its handle."""

    task: TaskHandle
