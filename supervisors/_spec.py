"""Child specifications: what a supervisor starts, and how it restarts and stops it."""

from __future__ import annotations

import inspect
import math
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, final

from ._actor import Actor
from ._errors import InvalidSpec
from ._ref import ActorRef
from ._spawn import DEFAULT_MAILBOX_SIZE, check_mailbox_size, check_name, start_actor

if TYPE_CHECKING:
    import trio

    from ._registry import Registry

Restart = Literal["permanent", "transient", "temporary"]
ShutdownPolicy = float | Literal["brutal_kill", "infinity"]
ChildType = Literal["worker", "supervisor"]

_RESTARTS = ("permanent", "transient", "temporary")
_TYPES = ("worker", "supervisor")


@final
@dataclass(frozen=True, slots=True)
class Start:
    """How to start a child: ``spawn(nursery, actor, *args, name=, registry=, mailbox_size=,
    **kwargs)``. A supervisor reuses it for every restart, so the registry name is bound again
    to each new incarnation."""

    actor: type[Actor]
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    name: Hashable | None = None
    registry: Registry | None = None
    mailbox_size: int = DEFAULT_MAILBOX_SIZE

    def __post_init__(self) -> None:
        if not (isinstance(self.actor, type) and issubclass(self.actor, Actor)):
            raise InvalidSpec(f"Start.actor must be an Actor subclass, got {self.actor!r}")
        _check_constructor(self.actor)
        if self.registry is not None:
            if self.name is None:
                raise InvalidSpec("Start has a registry but no name to register the child under")
            check_name(self.name)
        check_mailbox_size(self.mailbox_size)

    async def spawn(self, nursery: trio.Nursery, extra: tuple[Any, ...] = ()) -> ActorRef | None:
        """Start one incarnation in `nursery`, `extra` before its args (a dynamic supervisor's
        `extra_arguments`). Raises `StartError` if its init fails; None if it returned
        `IGNORE`."""
        # Checked once in __post_init__, so a restart does not check again.
        return await start_actor(
            nursery,
            self.actor,
            extra + self.args if extra else self.args,
            self.kwargs,
            self.name,
            self.registry,
            self.mailbox_size,
        )


def _check_constructor(actor: type[Actor]) -> None:
    """The runtime builds an actor with no arguments (its start-up arguments go to `init`): a
    constructor that needs some could never start, so the spec is refused when it is made."""
    init = actor.__init__
    if init is object.__init__:
        return
    try:
        inspect.signature(init).bind(None)  # None stands for self
    except TypeError:
        raise InvalidSpec(
            f"{actor.__name__}.__init__ needs arguments, but the runtime builds an actor with "
            "none: take start-up arguments in `async def init(...)` (the spec's args go there)"
        ) from None
    except ValueError:  # no signature to read (a builtin): nothing to check
        return


@final
@dataclass(frozen=True, slots=True)
class ChildSpec:
    """One supervised child, as in OTP.

    - `id`: unique among the supervisor's children (any hashable).
    - `start`: a `Start` (use `child_spec()` to build both at once).
    - `restart`: ``"permanent"`` (always restarted), ``"transient"`` (restarted only after an
      abnormal exit: not after `Normal` or `Shutdown`), ``"temporary"`` (never restarted).
    - `shutdown`: seconds to wait after the graceful stop request before cancelling the child,
      ``"brutal_kill"`` (cancel at once) or ``"infinity"`` (wait as long as it takes). Defaults to
      5 s for workers and ``"infinity"`` for supervisors, as in OTP.
    - `type`: ``"worker"`` or ``"supervisor"`` (informational, as in OTP's count_children).
    - `significant`: its own exit (not restarted) may shut its static supervisor down, by the
      supervisor's `auto_shutdown` (OTP's significant children); transient or temporary only.
    """

    id: Hashable
    start: Start
    restart: Restart = "permanent"
    shutdown: ShutdownPolicy | None = None
    type: ChildType = "worker"
    significant: bool = False

    def __post_init__(self) -> None:
        try:
            hash(self.id)
        except TypeError:
            raise InvalidSpec(f"child id must be hashable, got {self.id!r}") from None
        if not isinstance(self.start, Start):
            raise InvalidSpec(
                f"child {self.id!r}: start must be a Start(...), got {self.start!r}; "
                "child_spec(ActorClass, ...) builds both"
            )
        if self.restart not in _RESTARTS:
            raise InvalidSpec(
                f"child {self.id!r}: restart must be one of {', '.join(_RESTARTS)}, "
                f"got {self.restart!r}"
            )
        if self.type not in _TYPES:
            raise InvalidSpec(
                f"child {self.id!r}: type must be 'worker' or 'supervisor', got {self.type!r}"
            )
        if type(self.significant) is not bool:
            raise InvalidSpec(f"child {self.id!r}: significant must be True or False")
        if self.significant and self.restart == "permanent":
            raise InvalidSpec(
                f"child {self.id!r}: a significant child must be transient or temporary "
                "(a permanent one is always restarted, so it never ends its supervisor)"
            )
        shutdown = self.shutdown
        if shutdown is None:
            object.__setattr__(self, "shutdown", "infinity" if self.type == "supervisor" else 5.0)
        elif shutdown in ("brutal_kill", "infinity"):
            pass
        elif (
            isinstance(shutdown, int | float)
            and not isinstance(shutdown, bool)
            and shutdown >= 0
            and math.isfinite(shutdown)
        ):
            object.__setattr__(self, "shutdown", float(shutdown))
        else:
            raise InvalidSpec(
                f"child {self.id!r}: shutdown must be seconds >= 0, 'brutal_kill' or "
                f"'infinity', got {shutdown!r}"
            )


def child_spec(
    actor: type[Actor],
    *args: Any,
    id: Hashable | None = None,
    restart: Restart = "permanent",
    shutdown: ShutdownPolicy | None = None,
    type: ChildType = "worker",
    significant: bool = False,
    name: Hashable | None = None,
    registry: Registry | None = None,
    mailbox_size: int = DEFAULT_MAILBOX_SIZE,
    **kwargs: Any,
) -> ChildSpec:
    """A `ChildSpec` that starts ``actor`` with ``init(*args, **kwargs)``.

    `id` defaults to `name`, else to the class name. (To pass init keyword arguments that clash
    with these parameters, build `ChildSpec(id, Start(actor, args, kwargs, ...))` directly.)
    """
    child_id = id if id is not None else name if name is not None else actor.__name__
    return ChildSpec(
        id=child_id,
        start=Start(actor, args, kwargs, name, registry, mailbox_size),
        restart=restart,
        shutdown=shutdown,
        type=type,
        significant=significant,
    )
