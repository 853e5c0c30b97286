"""Actors: the `Actor` behaviour, the `ActorRef` handle, `spawn`, calls, monitors, links and tasks.

An actor is one trio task reading one bounded mailbox and running the behaviour's hooks one message
at a time (gen_server style). Users hold an `ActorRef`, never the actor object. The hot paths are
kept lean on purpose: a call is one queued item plus one park/reschedule of the caller (no channel,
no extra task), monitors and links are plain sets consulted once when an actor exits, and the
tasks an actor owns run in the nursery it was spawned in, tracked by the actor and cancelled
and waited for before it reports its exit.

Killing an actor normally cancels a cancel scope around its task. Entering one costs as much as
starting the task itself, so an actor whose hooks contain no ``await`` at all (checked once per
hook function, in its bytecode) runs without one: such an actor can only ever be parked in its
own mailbox, and a kill there is delivered by waking it with an internal exception instead.
"""

from __future__ import annotations

import dis
import inspect
import itertools
import types
from collections.abc import Awaitable, Callable, Hashable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Final, Literal, NoReturn, final

import outcome
import trio

from ._errors import ActorExited, CallTimeout, CallToSelf, InvalidSpec, MailboxFull, StartError
from ._log import logger
from ._mailbox import YIELD_EVERY, Mailbox
from ._reasons import Crash, Down, Exit, ExitReason, Killed, Normal, TaskCancelled, TaskDone
from ._timeouts import add_timeout

if TYPE_CHECKING:
    from ._registry import Registry

DEFAULT_MAILBOX_SIZE: Final = 1024
"""Mailbox capacity used when `spawn` is not given `mailbox_size`."""

# Mailbox items are (kind, payload) tuples: cheaper to build than envelope objects.
_CALL: Final = 0
_CAST: Final = 1
_INFO: Final = 2
_STOP: Final = 3

_WAITING: Final = 0
_REPLIED: Final = 1
_ABANDONED: Final = 2

_ids = itertools.count(1)
_NORMAL: Final = Normal()
_TASK_NAME: Final = "supervisors._actor._actor_main"
"""Every actor task's name, as trio would derive it (given, so trio need not build it per spawn)."""
_STREAK_LIMIT: Final = YIELD_EVERY - 1
_checkpoint_if_cancelled: Final = trio.lowlevel.checkpoint_if_cancelled


class _Interrupted(BaseException):
    """A kill delivered through the mailbox to an actor running without a cancel scope."""


_HOOKS: Final = frozenset(("handle_call", "handle_cast", "handle_info", "terminate"))
_never_suspend: dict[tuple[object, ...], bool] = {}
_init_never_suspends: dict[object, bool] = {}


def _cannot_suspend(fn: object) -> bool:
    """True for a plain ``async def`` whose body has no await, async for or async with: its
    coroutine runs to the end without ever yielding to trio."""
    return (
        type(fn) is types.FunctionType
        and bool(fn.__code__.co_flags & inspect.CO_COROUTINE)
        # Every way a coroutine frame suspends is a YIELD_VALUE in its own bytecode.
        and not any(op.opname == "YIELD_VALUE" for op in dis.get_instructions(fn))
    )


def _needs_no_scope(actor: Actor) -> bool:
    """Whether the actor's task can only ever be parked in its mailbox (see module docstring)."""
    cls = type(actor)
    # Keyed by the hook functions themselves, so a class patched after its first spawn is
    # checked again.
    hooks = (cls.handle_call, cls.handle_cast, cls.handle_info, cls.terminate)
    known = _never_suspend.get(hooks)
    if known is None:
        known = _never_suspend[hooks] = all(_cannot_suspend(hook) for hook in hooks)
    return known and not cls._owns_nursery and _HOOKS.isdisjoint(actor.__dict__)


@final
class _NoReply:
    __slots__ = ()

    def __repr__(self) -> str:
        return "NOREPLY"


NOREPLY: Final = _NoReply()
"""Return this from `handle_call` to answer later with `caller.reply(value)`."""


def _exited_error(reason: ExitReason, label: str) -> ActorExited:
    err = ActorExited(reason, label)
    if isinstance(reason, Crash):
        err.__cause__ = reason.exception
    return err


@final
class Caller:
    """The pending call handed to `handle_call`: `reply(value)` answers it (once; later replies
    and replies to a caller that timed out or was cancelled are dropped silently)."""

    __slots__ = ("_callee", "_state", "_task", "msg")

    def __init__(self, msg: Any, task: trio.lowlevel.Task, callee: ActorRef) -> None:
        self.msg = msg
        self._task = task
        self._callee = callee
        self._state = _WAITING

    @property
    def waiting(self) -> bool:
        """True until the caller got its reply, timed out, was cancelled, or the callee died."""
        return self._state == _WAITING

    def reply(self, value: Any) -> None:
        """Answer the call with `value`. Safe to call at any time, from any trio task."""
        if self._state == _WAITING:
            self._state = _REPLIED
            trio.lowlevel.reschedule(self._task, outcome.Value(value))
            deferred = self._callee._deferred
            if deferred:
                deferred.discard(self)

    def _fail(self, error: BaseException) -> None:
        if self._state == _WAITING:
            self._state = _REPLIED
            trio.lowlevel.reschedule(self._task, outcome.Error(error))

    def _time_out(self, timeout: float) -> None:
        if self._state == _WAITING:
            self._state = _ABANDONED
            error = CallTimeout(repr(self._callee), timeout)
            trio.lowlevel.reschedule(self._task, outcome.Error(error))

    def _abort(self, _: Any) -> trio.lowlevel.Abort:
        # The caller gave up (timeout or cancellation): a reply arriving later is dropped.
        self._state = _ABANDONED
        return trio.lowlevel.Abort.SUCCEEDED

    def __repr__(self) -> str:
        return f"<Caller of {self._callee!r} msg={self.msg!r}>"


@final
class _KillAfter:
    """A stop() timeout entry for the call timer: kills the actor if still waiting."""

    __slots__ = ("_ref", "_state")

    def __init__(self, ref: ActorRef) -> None:
        self._ref = ref
        self._state = _WAITING

    def _time_out(self, timeout: float) -> None:
        if self._state == _WAITING:
            self._state = _ABANDONED
            self._ref.kill()


TaskStatus = Literal["running", "done", "cancelled", "failed"]


@final
class TaskHandle:
    """A task owned by an actor (see `Actor.start_task`). `cancel()` is idempotent; when the task
    ends the actor receives `TaskDone(handle, value)` or `TaskCancelled(handle)`."""

    __slots__ = ("_owner", "_scope", "name", "status")

    def __init__(self, owner: ActorRef, name: str) -> None:
        self._owner = owner
        self._scope = trio.CancelScope()
        self.name = name
        self.status: TaskStatus = "running"

    def cancel(self) -> None:
        """Ask the task to stop (trio cancellation: it stops at its next checkpoint)."""
        self._scope.cancel()

    def __repr__(self) -> str:
        return f"<TaskHandle {self.name} {self.status}>"


class ActorRef:
    """The handle to an actor. Made only by the runtime (`spawn`, supervisors); hashable, compared
    by identity, safe to share between tasks. Every method works whether or not the actor is
    still alive: requests to an exited actor raise `ActorExited` carrying its exit reason.
    """

    __slots__ = (
        "__weakref__",
        "_actor",
        "_closing",
        "_cls",
        "_current",
        "_deferred",
        "_exit_event",
        "_id",
        "_kill_reason",
        "_links",
        "_mailbox",
        "_monitoring",
        "_monitors",
        "_name",
        "_names",
        "_nursery",
        "_reason",
        "_scope",
        "_starter",
        "_stop_reason",
        "_task",
        "_tasks",
        "_tasks_idle",
        "_terminate_on_kill",
    )

    _actor: Actor | None
    _cls: str
    _id: int
    _name: Hashable | None
    _mailbox: Mailbox
    _nursery: trio.Nursery
    _scope: trio.CancelScope | None
    _terminate_on_kill: bool
    _closing: ExitReason | None
    _current: Caller | None
    _deferred: set[Caller] | None
    _exit_event: trio.Event | None
    _kill_reason: ExitReason | None
    _links: set[ActorRef] | None
    _monitoring: set[ActorRef] | None
    _monitors: set[ActorRef] | None
    _names: list[tuple[Registry, Hashable]] | None
    _reason: ExitReason | None
    _starter: trio.lowlevel.Task | None
    _stop_reason: ExitReason | None
    _task: trio.lowlevel.Task | None
    _tasks: set[TaskHandle] | None
    _tasks_idle: trio.Event | None

    def __init__(self, *args: object, **kwargs: object) -> None:
        raise TypeError("ActorRef is made by spawn() or a supervisor, not built directly")

    @classmethod
    def _new(
        cls, actor: Actor, name: Hashable | None, mailbox_size: int, nursery: trio.Nursery
    ) -> ActorRef:
        self = object.__new__(cls)
        self._actor = actor
        self._cls = type(actor).__name__
        self._id = next(_ids)
        self._name = name
        self._mailbox = Mailbox(mailbox_size)
        self._nursery = nursery
        self._scope = None
        self._reason = None
        self._closing = None
        self._stop_reason = None
        self._kill_reason = None
        self._terminate_on_kill = False
        self._current = None
        self._deferred = None
        self._exit_event = None
        self._links = None
        self._monitors = None
        self._monitoring = None
        self._names = None
        self._starter = None
        self._task = None
        self._tasks = None
        self._tasks_idle = None
        return self

    # -- public face ---------------------------------------------------------------------------

    @property
    def name(self) -> Hashable:
        """The name given at spawn time, or ``"<Class>#<n>"`` for an unnamed actor."""
        return self._name if self._name is not None else f"{self._cls}#{self._id}"

    @property
    def alive(self) -> bool:
        """True until the actor has fully exited (its exit reason is then known)."""
        return self._reason is None

    @property
    def exit_reason(self) -> ExitReason | None:
        """The exit reason once the actor has exited, else None."""
        return self._reason

    @property
    def mailbox_size(self) -> int:
        """Messages waiting in the mailbox."""
        return len(self._mailbox)

    async def call(self, msg: Any, timeout: float | None = 5.0) -> Any:  # noqa: ASYNC109
        """Send `msg` to `handle_call` and wait for the reply.

        Raises `MailboxFull` at once when the mailbox is full; `ActorExited` at once if the actor
        has exited or exits before replying (when `handle_call` raised, the reason is a `Crash`
        and `__cause__` is that exception); `CallTimeout` after `timeout` seconds (None waits
        forever). A reply that arrives after the timeout or a cancellation is dropped; the actor
        is not affected. Cancellation: the call is abandoned, the message may still be handled.
        """
        task = trio.lowlevel.current_task()
        if task is self._task:
            raise CallToSelf(f"{self!r} called itself; it would wait forever for its reply")
        if timeout is not None and not timeout >= 0:  # also refuses NaN
            raise InvalidSpec(f"call timeout must be >= 0 seconds or None, got {timeout!r}")
        caller = Caller(msg, task, self)
        if not self._mailbox.put((_CALL, caller)):
            raise self._refusal()
        if timeout is not None:
            add_timeout(timeout, caller)
        return await trio.lowlevel.wait_task_rescheduled(caller._abort)

    def cast(self, msg: Any) -> None:
        """Queue `msg` for `handle_cast` and return at once (never blocks, not a checkpoint).

        Raises `MailboxFull` when the mailbox is full, `ActorExited` if the actor has exited.
        """
        if not self._mailbox.put((_CAST, msg)):
            raise self._refusal()

    def send(self, msg: Any) -> None:
        """Queue `msg` for `handle_info`; same rules as `cast` (bounded, never blocks)."""
        if not self._mailbox.put((_INFO, msg)):
            raise self._refusal()

    # The timeout is part of the semantics (graceful until then, cancel after), not a deadline.
    async def stop(
        self,
        reason: ExitReason | None = None,
        timeout: float | None = 5.0,  # noqa: ASYNC109
    ) -> ExitReason:
        """Stop the actor gracefully and return its exit reason.

        The request goes ahead of queued messages: the actor finishes the message in hand, runs
        `terminate(reason)` and exits with `reason` (default `Normal()`). If it has not exited
        after `timeout` seconds it is cancelled and exits with `Killed()`; `timeout=0` kills at
        once, `None` waits forever. Returns at once if the actor has already exited.
        """
        if self._reason is not None:
            return self._reason
        if trio.lowlevel.current_task() is self._task:
            raise CallToSelf(f"{self!r} cannot await its own stop; use self.stop() in a hook")
        if timeout is not None and not timeout >= 0:  # also refuses NaN
            raise InvalidSpec(f"stop timeout must be >= 0 seconds or None, got {timeout!r}")
        if self._closing is None:
            self._mailbox.put_system((_STOP, Normal() if reason is None else reason), urgent=True)
        if timeout is None:
            return await self.wait()
        if timeout == 0:
            self.kill()
            return await self.wait()
        # The timer kills the actor if it is still running at the deadline (cheaper than a
        # cancel scope, and the wait itself then ends when the killed actor has exited).
        guard = _KillAfter(self)
        add_timeout(timeout, guard)
        try:
            return await self.wait()
        finally:
            guard._state = _REPLIED

    def kill(self) -> None:
        """Cancel the actor at once (brutal kill): it exits with `Killed()` without `terminate`.

        Returns immediately; `await ref.wait()` to wait until it has exited."""
        self._kill(Killed())

    async def wait(self) -> ExitReason:
        """Wait until the actor has exited and return its exit reason. Works from any trio task."""
        if self._reason is not None:
            await trio.lowlevel.checkpoint()
            return self._reason
        if self._exit_event is None:
            self._exit_event = trio.Event()
        await self._exit_event.wait()
        assert self._reason is not None
        return self._reason

    def __repr__(self) -> str:
        state = "" if self._reason is None else f" exited: {self._reason}"
        return f"<{self._label()}{state}>"

    def _label(self) -> str:
        """The repr without the exit state (errors carrying the reason add it themselves)."""
        name = "" if self._name is None else f" {self._name!r}"
        return f"{type(self).__name__} {self._cls}#{self._id}{name}"

    # -- runtime internals ---------------------------------------------------------------------

    def _refusal(self) -> Exception:
        reason = self._reason or self._closing
        if reason is not None:
            return _exited_error(reason, repr(self))
        return MailboxFull(repr(self), self._mailbox.capacity)

    def _deliver(self, msg: Any) -> None:
        """Runtime message for handle_info: bypasses the bound, dropped if the actor is exiting."""
        if not self._mailbox.closed:
            self._mailbox.put_system((_INFO, msg))

    def _kill(self, reason: ExitReason, *, run_terminate: bool = False) -> None:
        if self._reason is None and self._kill_reason is None:
            self._kill_reason = reason
            self._terminate_on_kill = run_terminate
            if self._scope is not None:
                self._scope.cancel()
            else:
                # No cancel scope (yet): the actor's task has not started, or runs without
                # one and so can only be parked in its mailbox. Either way this lands.
                self._mailbox.interrupt(_Interrupted())

    def _signal(self, sender: ActorRef, reason: ExitReason) -> None:
        """An exit signal from a linked actor (OTP semantics)."""
        actor = self._actor
        if actor is None or self._reason is not None:
            return
        if actor.trap_exits:
            self._deliver(Exit(sender, reason))
        elif not isinstance(reason, Normal):
            self._kill(reason)

    def _bind_name(self, registry: Registry, name: Hashable) -> None:
        if self._reason is not None:
            raise _exited_error(self._reason, repr(self))
        if self._names is None:
            self._names = []
        self._names.append((registry, name))

    def _unbind_name(self, registry: Registry, name: Hashable) -> None:
        if self._names:
            try:
                self._names.remove((registry, name))
            except ValueError:
                pass

    def _task_ended(self, handle: TaskHandle) -> None:
        tasks = self._tasks
        if tasks is not None:
            tasks.discard(handle)
            if not tasks and self._tasks_idle is not None:
                self._tasks_idle.set()

    async def _run(
        self, actor: Actor, args: tuple[Any, ...], kwargs: Mapping[str, Any]
    ) -> ExitReason:
        """init, then the message loop, then terminate; returns the exit reason."""
        try:
            await actor.init(*args, **kwargs)
        except Exception as exc:
            _log_crash(self, exc, "init")
            return Crash(exc)
        if self._stop_reason is not None:
            # init asked to stop: like OTP's {stop, Reason}, the start fails with that reason.
            return self._stop_reason
        starter = self._starter
        self._starter = None
        if starter is not None:
            trio.lowlevel.reschedule(starter, outcome.Value(self))
        return await self._loop(actor)

    async def _loop(self, actor: Actor) -> ExitReason:
        mailbox = self._mailbox
        get = mailbox.get
        handle_call = actor.handle_call
        handle_cast = actor.handle_cast
        handle_info = actor.handle_info
        reason: ExitReason
        result: Any = None
        while True:
            # Mailbox.get's common case inlined (a ready item, no yield due, no kill pending):
            # one coroutine less per message.
            queue = mailbox._queue
            if queue and mailbox._streak < _STREAK_LIMIT and mailbox._interrupt is None:
                mailbox._streak += 1
                await _checkpoint_if_cancelled()
                kind, payload = queue.popleft()
            else:
                # An idle actor keeps nothing of its last message alive (its caller, the reply).
                payload = result = None
                kind, payload = await get()
            try:
                if kind == _CALL:
                    self._current = payload
                    result = await handle_call(payload.msg, payload)
                    self._current = None
                    if result is not NOREPLY:
                        payload.reply(result)
                    elif payload._state == _WAITING:
                        if self._deferred is None:
                            self._deferred = set()
                        self._deferred.add(payload)
                elif kind == _CAST:
                    await handle_cast(payload)
                elif kind == _INFO:
                    await handle_info(payload)
                else:
                    reason = payload
                    break
            except Exception as exc:
                reason = Crash(exc)
                _log_crash(self, exc, "message")
                current = self._current
                if current is not None:
                    # The caller is monitoring us in effect: tell it now, not after terminate.
                    self._current = None
                    current._fail(_exited_error(reason, repr(self)))
                break
            if self._stop_reason is not None:
                reason = self._stop_reason
                break
        return await self._terminate(actor, reason)

    async def _terminate(self, actor: Actor, reason: ExitReason) -> ExitReason:
        self._close(reason)
        try:
            await actor.terminate(reason)
        except Exception as exc:
            _log_crash(self, exc, "terminate")
            return Crash(exc)
        return reason

    def _close(self, reason: ExitReason) -> None:
        """Refuse new messages; queued calls fail now, as they will never be handled."""
        if self._closing is None:
            self._closing = reason
        elif self._mailbox.closed:
            return  # closed before: a closed mailbox accepts nothing, so nothing is queued
        for kind, payload in self._mailbox.close():
            if kind == _CALL:
                payload._fail(_exited_error(reason, repr(self)))

    async def _reap_tasks(self) -> None:
        tasks = self._tasks
        if not tasks:
            return
        for handle in tasks:
            handle._scope.cancel()
        self._tasks_idle = trio.Event()
        # Shielded so an actor cancelled from outside still waits for the tasks it owns.
        with trio.CancelScope(shield=True):
            await self._tasks_idle.wait()

    def _finish(self, reason: ExitReason) -> None:
        """Record the exit and tell everyone who must know. Synchronous: safe while cancelled."""
        if self._reason is not None:
            return
        if self._closing is None or not self._mailbox._closed:
            self._close(reason)
        self._reason = reason
        self._actor = None
        starter = self._starter
        if starter is not None:
            self._starter = None
            err = StartError(self.name, reason)
            if isinstance(reason, Crash):
                err.__cause__ = reason.exception
            trio.lowlevel.reschedule(starter, outcome.Error(err))
        if self._tasks:
            for handle in self._tasks:
                handle._scope.cancel()
        current = self._current
        if current is not None:
            self._current = None
            current._fail(_exited_error(reason, f"<{self._label()}>"))
        if self._deferred:
            for caller in self._deferred:
                caller._fail(_exited_error(reason, f"<{self._label()}>"))
            self._deferred = None
        if self._names:
            for registry, name in self._names:
                registry._release(name, self)
            self._names = None
        if self._monitoring:
            for target in self._monitoring:
                if target._monitors is not None:
                    target._monitors.discard(self)
            self._monitoring = None
        if self._monitors:
            monitors, self._monitors = self._monitors, None
            for owner in monitors:
                if owner._monitoring is not None:
                    owner._monitoring.discard(self)
                owner._deliver(Down(self, reason))
        if self._links:
            links, self._links = self._links, None
            for other in links:
                if other._links is not None:
                    other._links.discard(self)
                other._signal(self, reason)
        if self._exit_event is not None:
            self._exit_event.set()


def _log_crash(ref: ActorRef, exc: BaseException, phase: str) -> None:
    logger().error(
        "actor.crashed",
        actor=repr(ref),
        phase=phase,
        error=f"{type(exc).__name__}: {exc}",
        exc_info=exc,
    )


class Actor:
    """Base class of actor behaviours; override the hooks you need (all are coroutines).

    Hooks run one message at a time in the actor's own task. An exception escaping any hook
    crashes the actor (exit reason `Crash(exc)`); `terminate` still runs after a crash in a hook.
    Do not override ``__init__`` with required arguments: start-up arguments go to `init`.
    """

    trap_exits: bool = False
    """Set to True (in `init` or on the class) to receive linked exits as `Exit` messages."""

    ref: ActorRef
    """This actor's own ref, set before `init` runs."""

    _ref_class: ClassVar[type[ActorRef]] = ActorRef
    _owns_nursery: ClassVar[bool] = False

    async def init(self, *args: Any, **kwargs: Any) -> None:
        """Set up state; `spawn` returns once this has finished. Raising fails the spawn with
        `StartError`; calling `self.stop(reason)` here fails it with that reason."""
        if args or kwargs:
            raise TypeError(
                f"{type(self).__name__} was started with arguments but does not override init() "
                "to accept them"
            )

    async def handle_call(self, msg: Any, caller: Caller) -> Any:
        """Answer a `call`: the return value is the reply; return `NOREPLY` to answer later
        with `caller.reply(value)`. The default crashes the actor (as in Elixir)."""
        raise TypeError(f"{type(self).__name__} got a call it does not handle: {msg!r}")

    async def handle_cast(self, msg: Any) -> None:
        """Handle a `cast`. The default crashes the actor (as in Elixir)."""
        raise TypeError(f"{type(self).__name__} got a cast it does not handle: {msg!r}")

    async def handle_info(self, msg: Any) -> None:
        """Handle `send` messages and runtime messages (`Down`, `Exit`, `TaskDone`,
        `TaskCancelled`). The default logs and drops them."""
        logger().debug("actor.unhandled_info", actor=repr(self.ref), msg=repr(msg))

    async def terminate(self, reason: ExitReason) -> None:
        """Clean up on a graceful exit or a crash in a hook. Not run when the actor is killed
        (`Killed`), brought down by a link, or cancelled from outside."""

    def stop(self, reason: ExitReason | None = None) -> None:
        """Exit after the current hook returns, with `reason` (default `Normal()`)."""
        self.ref._stop_reason = _NORMAL if reason is None else reason

    def start_task(self, async_fn: Callable[..., Awaitable[Any]], *args: Any) -> TaskHandle:
        """Run ``async_fn(*args)`` in a task this actor owns, so the actor keeps handling
        messages meanwhile. Its return value arrives as `TaskDone(handle, value)` in
        `handle_info`; if it is cancelled through the handle, `TaskCancelled(handle)` arrives;
        an exception in it crashes the actor (after which `terminate` runs). The task is
        cancelled and awaited before the actor reports its exit."""
        ref = self.ref
        if ref._closing is not None or ref._reason is not None:
            raise _exited_error(ref._closing or ref._reason or Killed(), repr(ref))
        handle = TaskHandle(ref, getattr(async_fn, "__qualname__", repr(async_fn)))
        if ref._tasks is None:
            ref._tasks = set()
        ref._tasks.add(handle)
        ref._nursery.start_soon(_task_main, ref, handle, async_fn, args, name=handle.name)
        return handle

    def monitor(self, ref: ActorRef) -> None:
        """Receive `Down(ref, reason)` in `handle_info` when `ref` exits (at once if it already
        has). Monitoring the same actor twice has no extra effect."""
        me = self.ref
        if ref._reason is not None:
            me._deliver(Down(ref, ref._reason))
            return
        if ref._monitors is None:
            ref._monitors = set()
        ref._monitors.add(me)
        if me._monitoring is None:
            me._monitoring = set()
        me._monitoring.add(ref)

    def demonitor(self, ref: ActorRef) -> None:
        """Stop monitoring `ref`. A `Down` already queued is not withdrawn."""
        me = self.ref
        if ref._monitors is not None:
            ref._monitors.discard(me)
        if me._monitoring is not None:
            me._monitoring.discard(ref)

    def link(self, ref: ActorRef) -> None:
        """Link both ways: when either exits abnormally, the other exits with the same reason,
        unless it traps exits (then it gets `Exit(ref, reason)`). Linking to an actor that has
        already exited delivers its exit signal at once."""
        me = self.ref
        if ref is me:
            return
        if ref._reason is not None:
            me._signal(ref, ref._reason)
            return
        if ref._links is None:
            ref._links = set()
        ref._links.add(me)
        if me._links is None:
            me._links = set()
        me._links.add(ref)

    def unlink(self, ref: ActorRef) -> None:
        """Remove a link (both directions)."""
        me = self.ref
        if ref._links is not None:
            ref._links.discard(me)
        if me._links is not None:
            me._links.discard(ref)


async def _task_main(
    ref: ActorRef, handle: TaskHandle, fn: Callable[..., Awaitable[Any]], args: tuple[Any, ...]
) -> None:
    finished = False
    value: Any = None
    try:
        with handle._scope:
            value = await fn(*args)
            finished = True
    except Exception as exc:
        handle.status = "failed"
        ref._task_ended(handle)
        _log_crash(ref, exc, f"task {handle.name}")
        ref._kill(Crash(exc), run_terminate=True)
        return
    except BaseException:
        handle.status = "cancelled"
        ref._task_ended(handle)
        raise
    ref._task_ended(handle)
    if finished:
        handle.status = "done"
        ref._deliver(TaskDone(handle, value))
    else:
        handle.status = "cancelled"
        ref._deliver(TaskCancelled(handle))


async def _actor_main(
    ref: ActorRef, start: tuple[tuple[Any, ...], Mapping[str, Any]] | None
) -> None:
    """The actor's own task: init (unless the spawner already ran it), loop, terminate, exit."""
    actor = ref._actor
    if actor is None:  # killed before this task got to run
        return
    ref._task = trio.lowlevel.current_task()
    reason: ExitReason | None = None
    try:
        if ref._kill_reason is not None:
            pass  # killed before this task got to run: exit at once, with that reason
        elif start is None and _needs_no_scope(actor):
            try:
                reason = await ref._loop(actor)
            except _Interrupted:
                pass  # killed while waiting for a message
        else:
            ref._scope = scope = trio.CancelScope()
            with scope:
                if start is None:
                    reason = await ref._loop(actor)
                elif actor._owns_nursery:
                    async with trio.open_nursery() as nursery:
                        ref._nursery = nursery
                        reason = await ref._run(actor, *start)
                        nursery.cancel_scope.cancel()
                else:
                    reason = await ref._run(actor, *start)
        if reason is None:
            reason = ref._kill_reason or Killed()
            if ref._terminate_on_kill and ref._starter is None:
                # A task the actor owns crashed: the actor crashed, so terminate still runs.
                ref._scope = scope = trio.CancelScope()
                with scope:
                    reason = await ref._terminate(actor, reason)
                if scope.cancelled_caught:
                    reason = ref._kill_reason or Killed()
        if ref._tasks:
            await ref._reap_tasks()
    except BaseException:
        # Cancelled from outside (or KeyboardInterrupt): record the exit, then let it propagate.
        ref._finish(ref._kill_reason or Killed())
        raise
    ref._finish(reason)


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
    finished.

    With `registry`, `name` is bound in it before `init` runs (`NameTaken` if a live actor holds
    it) and released when the actor exits. Raises `StartError` (with the original exception as
    `__cause__`) if `init` fails. If the spawner is cancelled while `init` runs, the actor is
    killed. The actor lives in `nursery`: cancelling the nursery kills it.
    """
    if not (isinstance(actor_class, type) and issubclass(actor_class, Actor)):
        raise InvalidSpec(f"spawn() needs an Actor subclass, got {actor_class!r}")
    check_mailbox_size(mailbox_size)
    if registry is not None and name is None:
        raise InvalidSpec("a registry needs a name to register the actor under")
    return await _spawn(nursery, actor_class, args, kwargs, name, registry, mailbox_size)


def check_mailbox_size(mailbox_size: object) -> None:
    if type(mailbox_size) is not int or mailbox_size < 1:
        raise InvalidSpec(f"mailbox_size must be a positive int, got {mailbox_size!r}")


def _init_cannot_suspend(actor_class: type[Actor]) -> bool:
    """Whether ``actor_class``'s init runs inline and can never yield to trio (so `_spawn_now`
    can run it to the end synchronously)."""
    if actor_class._owns_nursery:
        return False
    init = actor_class.init
    known = _init_never_suspends.get(init)
    if known is None:
        known = _init_never_suspends[init] = _cannot_suspend(init)
    return known


def _new_actor(
    nursery: trio.Nursery,
    actor_class: type[Actor],
    name: Hashable | None,
    registry: Registry | None,
    mailbox_size: int,
) -> tuple[Actor, ActorRef]:
    actor = actor_class()
    ref = actor_class._ref_class._new(actor, name, mailbox_size, nursery)
    actor.ref = ref
    if registry is not None:
        registry.register(name, ref)
    return actor, ref


def _init_ended(ref: ActorRef, reason: ExitReason | None) -> ExitReason | None:
    """After an inline init: the reason the start fails (None if it succeeded, and then the
    actor's own task is started)."""
    ref._task = None
    if reason is None:
        # Killed during init, or init asked to stop (OTP's {stop, Reason}): the start fails.
        reason = ref._kill_reason or ref._stop_reason
    if reason is None:
        try:
            ref._nursery.start_soon(_actor_main, ref, None, name=_TASK_NAME)
        except BaseException:
            ref._finish(Killed())
            raise
    return reason


async def _fail_start(ref: ActorRef, reason: ExitReason) -> NoReturn:
    """The end of a start whose inline init failed: reap its tasks, record the exit, raise."""
    if ref._tasks:
        await ref._reap_tasks()
    ref._finish(reason)
    err = StartError(ref.name, reason)
    if isinstance(reason, Crash):
        raise err from reason.exception
    raise err


def _spawn_now(
    nursery: trio.Nursery,
    actor_class: type[Actor],
    args: tuple[Any, ...],
    kwargs: Mapping[str, Any],
    name: Hashable | None,
    registry: Registry | None,
    mailbox_size: int,
) -> tuple[ActorRef, ExitReason | None]:
    """`_spawn` without a single await, for a class whose init cannot suspend
    (`_init_cannot_suspend`): init's coroutine is run to its end in one step. Returns the ref
    and None once the actor's task is started, or the ref and the reason its start failed;
    the caller then owes ``await _fail_start(ref, reason)``."""
    actor, ref = _new_actor(nursery, actor_class, name, registry, mailbox_size)
    ref._task = trio.lowlevel.current_task()  # so init calling its own ref is caught
    reason: ExitReason | None = None
    init = actor.init(*args, **kwargs)
    try:
        init.send(None)
    except StopIteration:
        pass
    except Exception as exc:
        _log_crash(ref, exc, "init")
        reason = Crash(exc)
    except BaseException:
        ref._task = None
        ref._finish(ref._kill_reason or Killed())
        raise
    else:  # pragma: no cover - excluded by _init_cannot_suspend
        init.close()
        ref._task = None
        ref._finish(Killed())
        raise RuntimeError(f"{actor_class.__name__}.init suspended though it has no await")
    return ref, _init_ended(ref, reason)


async def _spawn(
    nursery: trio.Nursery,
    actor_class: type[Actor],
    args: tuple[Any, ...],
    kwargs: Mapping[str, Any],
    name: Hashable | None,
    registry: Registry | None,
    mailbox_size: int,
) -> ActorRef:
    """`spawn` with arguments already checked (a `Start` checks its own once, when made)."""
    actor, ref = _new_actor(nursery, actor_class, name, registry, mailbox_size)
    if not actor_class._owns_nursery:
        # init runs in the spawner's task: no task switch to start an actor, and a failing init
        # raises straight to the spawner. The actor's own task starts only once init succeeded.
        reason: ExitReason | None = None
        ref._task = trio.lowlevel.current_task()  # so init calling its own ref is caught
        # No cancel scope of its own around init (entering one costs as much as the rest of a
        # spawn): a kill during an inline init takes effect when init returns.
        try:
            await actor.init(*args, **kwargs)
        except Exception as exc:
            _log_crash(ref, exc, "init")
            reason = Crash(exc)
        except BaseException:
            ref._task = None
            ref._finish(ref._kill_reason or Killed())
            raise
        reason = _init_ended(ref, reason)
        if reason is not None:
            await _fail_start(ref, reason)
        return ref
    ref._starter = trio.lowlevel.current_task()
    try:
        nursery.start_soon(_actor_main, ref, (args, kwargs), name=_TASK_NAME)
    except BaseException:
        ref._starter = None
        ref._finish(Killed())
        raise

    def abort(_: Any) -> trio.lowlevel.Abort:
        ref._starter = None
        ref._kill(Killed())
        return trio.lowlevel.Abort.SUCCEEDED

    result: ActorRef = await trio.lowlevel.wait_task_rescheduled(abort)
    return result
