"""Spawning: the one path from an actor class to a running actor.

`init` runs in the spawner's task (a failing init raises straight to the spawner, and starting
an actor costs no task switch); once it succeeded the actor's own task starts in the nursery.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import TYPE_CHECKING, Any, Final

import trio

from ._actor import Actor
from ._errors import InvalidSpec, StartError
from ._log import log_crash
from ._process import Process, interrupted
from ._reasons import Crash, ExitReason, Killed, Normal
from ._ref import ActorRef
from ._returns import IGNORE, Continue
from ._threads import check_nursery

if TYPE_CHECKING:
    from ._registry import Registry

DEFAULT_MAILBOX_SIZE: Final = 1024
"""Mailbox capacity used when `spawn` is not given `mailbox_size`."""

_TASK_NAME: Final = "supervisors actor"


async def spawn(
    nursery: trio.Nursery,
    actor_class: type[Actor],
    *args: Any,
    name: Hashable | None = None,
    registry: Registry | None = None,
    mailbox_size: int = DEFAULT_MAILBOX_SIZE,
    **kwargs: Any,
) -> ActorRef:
    """Start ``actor_class`` in `nursery` and return its ref once ``init(*args, **kwargs)`` has
    finished. `mailbox_size` is the mailbox's capacity.

    With `registry`, `name` is bound in it before `init` runs (`NameTaken` if a live actor holds
    it) and released when the actor exits. Raises `StartError` (with the original exception as
    `__cause__`) if `init` fails. If the spawner is cancelled while `init` runs, the start fails
    and the cancellation propagates. The actor lives in `nursery`: cancelling the nursery shuts
    it down (see `Actor.cancel_shutdown`). An `init` that returns `IGNORE` fails the spawn with
    `StartError` (reason `Normal()`); one that returns `Continue(term)` has
    `handle_continue(term)` run first in the actor's task, before any message.
    """
    check_start(actor_class, name, registry, mailbox_size)
    check_nursery(nursery, "spawn")
    ref = await start_actor(nursery, actor_class, args, kwargs, name, registry, mailbox_size)
    if ref is None:
        raise StartError(
            actor_class.__name__ if name is None else name,
            Normal(),
            "init returned IGNORE; spawn() needs a running actor (supervisors accept IGNORE)",
        )
    return ref


def check_start(
    actor_class: object, name: Hashable | None, registry: Registry | None, mailbox_size: object
) -> None:
    if not (isinstance(actor_class, type) and issubclass(actor_class, Actor)):
        raise InvalidSpec(f"spawn() needs an Actor subclass, got {actor_class!r}")
    check_mailbox_size(mailbox_size)
    if registry is not None:
        check_name(name)


def check_name(name: object) -> None:
    """A name to register under: given, and hashable (a registry is a dict of names)."""
    if name is None:
        raise InvalidSpec("a registry needs a name to register the actor under")
    try:
        hash(name)
    except TypeError:
        raise InvalidSpec(f"a registry name must be hashable, got {name!r}") from None


def check_mailbox_size(mailbox_size: object) -> None:
    if type(mailbox_size) is not int or mailbox_size < 1:
        raise InvalidSpec(f"mailbox_size must be a positive int, got {mailbox_size!r}")


async def start_actor(
    nursery: trio.Nursery,
    actor_class: type[Actor],
    args: tuple[Any, ...],
    kwargs: Mapping[str, Any],
    name: Hashable | None,
    registry: Registry | None,
    mailbox_size: int,
) -> ActorRef | None:
    """`spawn` with its arguments already checked (a `Start` checks its own once, when made).
    None: `init` returned `IGNORE` (the actor has exited `Normal()`)."""
    try:
        actor = actor_class()
    except Exception as exc:
        # The constructor is not a hook (start-up arguments go to init), but whatever it
        # raises fails this start the same way, never the spawner's caller by surprise.
        label = actor_class.__name__ if name is None else name
        log_crash(label, exc, "__init__")
        raise StartError(label, Crash(exc), f"{actor_class.__name__}() raised") from exc
    process = Process(actor, name, mailbox_size, nursery)
    ref = process.ref = actor.ref = actor_class._ref_class._new(process)
    if registry is not None:
        registry.register(name, ref)
    process.task = trio.lowlevel.current_task()  # so init calling its own ref is caught
    failure: ExitReason | None = None
    result: Any = None
    try:
        result = await actor.init(*args, **kwargs)
    except Exception as exc:
        log_crash(ref, exc, "init")
        failure = Crash(exc)
    except BaseException as exc:
        process.finish(interrupted(exc, process.kill_reason))
        raise
    process.task = None
    # Killed during init, or init asked to stop (OTP's {stop, Reason}): the start fails.
    failure = failure or process.kill_reason or process.stop_reason
    if failure is None and result is IGNORE:
        await process.reap_tasks()
        process.finish(Normal())
        return None
    if failure is None:
        if result.__class__ is Continue:
            process.continuing = result
        try:
            nursery.start_soon(process.run, actor, name=_TASK_NAME)
        except BaseException:
            process.finish(Killed())
            raise
        return ref
    await process.reap_tasks()
    process.finish(failure)
    raise process.start_failed(failure)
