"""The `Actor` behaviour: the hooks a subclass overrides and the helpers it calls on itself.

The runtime behind it is split by concept: the handle (`_ref.py`), calls and deferred replies
(`_call.py`), the process and its loop (`_process.py`), owned tasks (`_tasks.py`) and spawning
(`_spawn.py`).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar, Final

from ._call import Caller
from ._errors import InvalidSpec
from ._log import logger
from ._reasons import ExitReason, Normal
from ._ref import ActorRef, MonitorRef, live_process, process_of
from ._tasks import TaskHandle

HOOKS: Final = ("init", "handle_call", "handle_cast", "handle_info", "handle_continue", "terminate")
"""The methods the runtime awaits; a subclass's own must be coroutines."""


class Actor:
    """Base class of actor behaviours; override the hooks you need (all are coroutines).

    Hooks run one message at a time in the actor's own task. An exception escaping any hook
    crashes the actor (exit reason `Crash(exc)`); `terminate` still runs after a crash in a hook.
    A hook defined without ``async`` is refused when the subclass is defined. Do not override
    ``__init__`` with required arguments (a spec refuses it): start-up arguments go to `init`.
    """

    trap_exits: bool = False
    """Set to True (in `init` or on the class) to receive linked exits as `Exit` messages."""

    cancel_shutdown: ClassVar[float | None] = 5.0
    """Seconds `terminate(Shutdown())` may take when the nursery the actor runs in is cancelled
    from outside (then it is cut short and the exit reason is `Killed()`); None: no limit.
    Supervisors use None: each of their children is bounded by its own shutdown policy."""

    ref: ActorRef
    """This actor's own ref, set before `init` runs."""

    _ref_class: ClassVar[type[ActorRef]] = ActorRef
    """The handle class the runtime makes for this behaviour (supervisors have their own)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # Caught where the mistake is made: a hook without `async` would crash at its first
        # message ("object str can't be used in 'await' expression").
        super().__init_subclass__(**kwargs)
        for hook in HOOKS:
            fn = cls.__dict__.get(hook)
            if inspect.isfunction(fn) and not inspect.iscoroutinefunction(fn):
                raise TypeError(
                    f"{cls.__name__}.{hook} must be a coroutine (`async def {hook}`): the "
                    "runtime awaits every hook"
                )

    async def init(self, *args: Any, **kwargs: Any) -> Any:
        """Set up state; `spawn` returns once this has finished. Raising fails the spawn with
        `StartError`; calling `self.stop(reason)` here fails it with that reason. Return
        `Continue(term)` to have `handle_continue(term)` run before any message, or `IGNORE` to
        start nothing (see `IGNORE`); any other return value is ignored."""
        if args or kwargs:
            raise TypeError(
                f"{type(self).__name__} was started with arguments but does not override init() "
                "to accept them"
            )

    async def handle_call(self, msg: Any, caller: Caller) -> Any:
        """Answer a `call`: the return value is the reply; return `NOREPLY` to answer later
        with `caller.reply(value)`; `Continue(term)` means NOREPLY too, then runs
        `handle_continue(term)`. The default crashes the actor (as in Elixir)."""
        raise TypeError(f"{type(self).__name__} got a call it does not handle: {msg!r}")

    async def handle_cast(self, msg: Any) -> Any:
        """Handle a `cast`. The default crashes the actor (as in Elixir). Return
        `Continue(term)` to run `handle_continue(term)` next; other return values are ignored."""
        raise TypeError(f"{type(self).__name__} got a cast it does not handle: {msg!r}")

    async def handle_info(self, msg: Any) -> Any:
        """Handle `send` messages and runtime messages (`Down`, `Exit`, `TaskDone`,
        `TaskCancelled`). The default logs and drops them. Return `Continue(term)` to run
        `handle_continue(term)` next; other return values are ignored."""
        logger().debug("actor.unhandled_info", actor=repr(self.ref), msg=repr(msg))

    async def handle_continue(self, term: Any) -> Any:
        """Run after a hook (or `init`) returned `Continue(term)`, before any queued message
        (OTP's handle_continue). May return another `Continue`. An exception crashes the
        actor, as in any hook. The default crashes it (as in Elixir): a `Continue` needs this."""
        raise TypeError(
            f"{type(self).__name__} returned Continue({term!r}) but does not override "
            "handle_continue()"
        )

    async def terminate(self, reason: ExitReason) -> None:
        """Clean up on a graceful exit, a crash in a hook or owned task, or when the actor's
        nursery is cancelled from outside (`Shutdown()`). Not run when the actor is killed
        (`Killed`) or brought down by a link. Runs shielded from outside cancellation."""

    def stop(self, reason: ExitReason | None = None) -> None:
        """Exit after the current hook returns, with `reason` (default `Normal()`)."""
        process = live_process(self.ref)
        if process is not None:  # an actor that has exited has nothing left to stop
            process.stop_reason = Normal() if reason is None else reason

    def set_idle_timeout(self, seconds: float | None) -> None:
        """From now on, when no message arrives for `seconds`, `handle_info(IdleTimeout(seconds))`
        is called (OTP's gen_server timeout); the wait starts again after every message, and a
        message already queued is always handled first (so 0 means "when the mailbox is
        empty"). None turns it off. Costs a cancel scope per wait only while it is on."""
        if seconds is not None and not seconds >= 0:
            raise InvalidSpec(f"idle timeout must be >= 0 seconds or None, got {seconds!r}")
        process = live_process(self.ref)
        if process is not None:
            process.idle_timeout = seconds

    def start_task(self, async_fn: Callable[..., Awaitable[Any]], *args: Any) -> TaskHandle:
        """Run ``async_fn(*args)`` in a task this actor owns, so the actor keeps handling
        messages meanwhile. Its return value arrives as `TaskDone(handle, value)` in
        `handle_info`; if it is cancelled through the handle, `TaskCancelled(handle)` arrives;
        an exception in it crashes the actor (after which `terminate` runs). The task is
        cancelled and awaited before the actor reports its exit."""
        process = live_process(self.ref)
        if process is None:
            raise process_of(self.ref).refusal()
        return process.start_task(async_fn, args)

    def monitor(self, ref: ActorRef) -> MonitorRef:
        """Monitor `ref`: `Down(ref, reason, monitor)` arrives in `handle_info` when it exits (at
        once if it already has). Returns the monitor; each call makes a new one, with its own
        `Down`."""
        if not isinstance(ref, ActorRef):
            raise InvalidSpec(f"monitor needs an ActorRef, got {ref!r}")
        monitor = MonitorRef(ref)
        process = live_process(self.ref)
        if process is not None:  # an exited actor would never handle the Down
            process.add_monitor(monitor, process_of(ref))
        return monitor

    def demonitor(self, monitor: MonitorRef, *, flush: bool = False) -> bool:
        """Remove `monitor`; with `flush`, also a `Down` for it already queued. True if the
        monitor was still active (its `Down` had not been sent). Anything but a `MonitorRef`
        raises `InvalidSpec` (a monitor is only ever the value `monitor` returned)."""
        if not isinstance(monitor, MonitorRef):
            raise InvalidSpec(
                f"demonitor needs the MonitorRef that monitor() returned, got {monitor!r}"
            )
        process = live_process(self.ref)
        return process is not None and process.remove_monitor(monitor, flush=flush)

    def link(self, ref: ActorRef) -> None:
        """Link both ways: when either exits abnormally, the other exits with the same reason,
        unless it traps exits (then it gets `Exit(ref, reason)`). Linking to an actor that has
        already exited delivers its exit signal at once."""
        if not isinstance(ref, ActorRef):
            raise InvalidSpec(f"link needs an ActorRef, got {ref!r}")
        process = live_process(self.ref)
        if process is not None:  # an exited actor has no exit signal left to send or get
            process.link(process_of(ref))

    def unlink(self, ref: ActorRef) -> None:
        """Remove a link (both directions)."""
        if not isinstance(ref, ActorRef):
            raise InvalidSpec(f"unlink needs an ActorRef, got {ref!r}")
        process = live_process(self.ref)
        if process is not None:
            process.unlink(process_of(ref))
