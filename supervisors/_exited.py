"""What an exited actor's ref keeps: the `Exited` record that replaces its `Process`.

A process is the runtime's largest record of an actor (its mailbox, scopes, links, monitors,
callers). Once the actor has exited and everyone who must know has been told, its ref points
at an `Exited` instead: the exit reason, the name, the closed mailbox the run's exited actors
share. The process is then freed with the actor's task, so a ref kept to a long-dead actor
holds about 80 bytes of runtime state (plus its exit reason). An `Exited` gives a dead
process's answers: requests are refused with `ActorExited`, kills and stops do nothing.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import TYPE_CHECKING, ClassVar, final

from ._errors import ActorExited
from ._reasons import Crash, ExitReason

if TYPE_CHECKING:
    from ._process import Process
    from ._registry import Registry


def exited_error(reason: ExitReason, label: str) -> ActorExited:
    """The `ActorExited` for an actor that exited with `reason` (chained to a crash's cause)."""
    err = ActorExited(reason, label)
    if isinstance(reason, Crash):
        err.__cause__ = reason.exception
    return err


@final
class Exited:
    """What the ref of an exited actor points at instead of its `Process`: what the ref still
    reports (exit reason, name, mailbox capacity, home run), and the answers a dead process
    gives to requests (refused with `ActorExited`, kills and monitors of its own ignored).
    The runtime reaches it only through a ref; whoever held the `Process` itself (links,
    monitors, callers) was told of the exit and let it go."""

    __slots__ = ("class_name", "home", "mailbox", "name", "reason", "ref")

    actor: ClassVar[None] = None
    task: ClassVar[None] = None
    closing: ClassVar[None] = None
    accepting: ClassVar[bool] = False

    def __init__(self, process: Process, reason: ExitReason) -> None:
        self.ref = process.ref
        self.reason = reason
        self.name = process.name
        self.class_name = process.class_name
        self.home = process.home
        self.mailbox = process.mailbox  # the closed mailbox its run's exited actors share

    @property
    def thread(self) -> int:
        return self.home.thread

    def refusal(self) -> Exception:
        return exited_error(self.reason, repr(self.ref))

    def kill(self, reason: ExitReason | None = None) -> None:
        """Nothing left to kill."""

    def request_stop(self, reason: ExitReason) -> None:
        """Nothing left to stop."""

    def bind_name(self, registry: Registry, name: Hashable) -> None:
        raise self.refusal()

    def unbind_name(self, registry: Registry, name: Hashable) -> None:
        """Its names were released at the exit."""
