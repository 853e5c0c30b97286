"""The process: everything the runtime knows about one actor, and the actor's own task.

An `ActorRef` is a thin handle on a `Process`. The process holds the mailbox, the cancel scope
a kill cancels, the exit reason once known, and who must be told of the exit (callers still
waiting, monitors, links, registry names, owned tasks). `Process.run` is the actor's task: the
message loop, then `terminate`, then the exit.

How an actor ends, and with which reason:
- a stop request (a message, handled in order with the others), `self.stop(reason)` in a hook,
  or a crash in a hook: `terminate(reason)` runs, then the actor exits with `reason`;
- a kill (`kill()`, a stop timeout, a link's exit signal): its cancel scope is cancelled; no
  `terminate`; it exits with `Killed()` (or the link's reason);
- a crash in a task it owns: it is interrupted like a kill, then `terminate(Crash(exc))` runs;
- its nursery cancelled from outside: it shuts down gracefully, `terminate(Shutdown())` within
  `Actor.cancel_shutdown` seconds, then lets the cancellation propagate; unless it was killed
  too (its supervisor was killed): then `Killed()`, no `terminate`.
At the exit its ref is pointed at a small `Exited` record instead (see _exited.py), and the
process is freed with its task.
A supervisor's process hosts its children (`host_children`): at its exit it kills those still
alive and reports its exit only once they all have.
Once an actor has crashed its exit reason is that crash: `terminate` crashing too (logged) or
being cut short does not replace it, so callers, monitors, links and supervisors all see the
first crash. A crash in `terminate` after a normal or shutdown request is the exit reason.
`terminate` runs shielded from outside cancellation (a kill or `cancel_shutdown` bounds it).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable, Iterable
from typing import TYPE_CHECKING, Any, Final

import trio

from ._call import CALL, CAST, INFO, NOREPLY, STOP, Caller, fail_caller, is_waiting
from ._errors import MailboxFull, StartError
from ._exited import Exited, exited_error
from ._log import log_crash, logger
from ._mailbox import Mailbox
from ._reasons import (
    Crash,
    Down,
    Exit,
    ExitReason,
    IdleTimeout,
    Killed,
    Normal,
    Shutdown,
    TaskCancelled,
    TaskDone,
)
from ._registry import release_name
from ._returns import Continue
from ._tasks import TaskHandle, run_task
from ._threads import home_run

if TYPE_CHECKING:
    from ._actor import Actor
    from ._ref import ActorRef, MonitorRef
    from ._registry import Registry

_NORMAL: Final = Normal()
_KILLED: Final = Killed()


class Process:
    __slots__ = (
        "actor",
        "brutal",
        "children",
        "children_done",
        "children_scope",
        "class_name",
        "closing",
        "continuing",
        "current",
        "deferred",
        "exit_event",
        "home",
        "idle_timeout",
        "kill_reason",
        "links",
        "mailbox",
        "monitoring",
        "monitors",
        "name",
        "names",
        "nursery",
        "reason",
        "ref",
        "scope",
        "stop_reason",
        "task",
        "tasks",
        "tasks_idle",
        "terminate_on_kill",
        "thread",
    )

    ref: ActorRef

    def __init__(
        self, actor: Actor, name: Hashable | None, capacity: int, nursery: trio.Nursery
    ) -> None:
        self.actor: Actor | None = actor
        self.class_name = type(actor).__name__
        self.name = name
        self.mailbox = Mailbox(capacity)
        self.nursery = nursery
        self.scope: trio.CancelScope | None = trio.CancelScope()  # None once exited
        self.task: trio.lowlevel.Task | None = None
        self.reason: ExitReason | None = None
        self.closing: ExitReason | None = None
        self.stop_reason: ExitReason | None = None
        self.kill_reason: ExitReason | None = None
        self.brutal = False
        self.terminate_on_kill = False
        self.current: Caller | None = None
        self.deferred: set[Caller] | None = None
        self.exit_event: trio.Event | None = None
        self.idle_timeout: float | None = None
        self.links: set[Process] | None = None
        self.monitors: dict[MonitorRef, Process] | None = None
        self.monitoring: dict[MonitorRef, Process] | None = None
        self.names: list[tuple[Registry, Hashable]] | None = None
        self.tasks: set[TaskHandle] | None = None
        self.tasks_idle: trio.Event | None = None
        self.children_scope: trio.CancelScope | None = None
        self.children: Callable[[], Iterable[ActorRef]] | None = None
        self.children_done: trio.Event | None = None
        self.continuing: Continue | None = None
        # The actor's home: its trio run, and that run's thread (see _threads.py).
        self.home = home = home_run()
        self.thread = home.thread

    # -- requests from outside ---------------------------------------------------------------

    @property
    def accepting(self) -> bool:
        """Whether a message sent now would be queued (not refused as exited)."""
        return self.reason is None and not self.mailbox.closed

    def refusal(self) -> Exception:
        reason = self.reason or self.closing
        if reason is not None or self.mailbox.closed:
            return exited_error(reason or _KILLED, repr(self.ref))
        return MailboxFull(repr(self.ref), self.mailbox.capacity)

    def deliver(self, msg: Any) -> None:
        """Runtime message for handle_info: bypasses the bound, dropped if the actor is exiting."""
        self.mailbox.put_system((INFO, msg))

    def request_stop(self, reason: ExitReason) -> None:
        """A stop request is a message: queued after what was sent before it (OTP's order)."""
        self.mailbox.put_system((STOP, reason))

    def kill(self, reason: ExitReason = _KILLED) -> None:
        """Brutal kill: cancel whatever the actor is doing, `terminate` included."""
        if self.reason is not None or self.brutal:
            return
        self.brutal = True
        if self.kill_reason is None:
            self.kill_reason = reason
        assert self.scope is not None  # until the exit
        self.scope.cancel()

    def crash_from_task(self, exc: Exception) -> None:
        """A task the actor owns crashed: interrupt the actor, then `terminate` runs."""
        if self.reason is not None or self.kill_reason is not None:
            return
        self.kill_reason = Crash(exc)
        self.terminate_on_kill = True
        assert self.scope is not None  # until the exit
        self.scope.cancel()

    def signal(self, sender: Process | Exited, reason: ExitReason) -> None:
        """An exit signal from a linked actor (OTP semantics)."""
        actor = self.actor
        if actor is None or self.reason is not None:
            return
        if actor.trap_exits:
            self.deliver(Exit(sender.ref, reason))
        elif not isinstance(reason, Normal):
            self.kill(reason)

    def forget_deferred(self, caller: Caller) -> bool:
        deferred = self.deferred
        if deferred is not None and caller in deferred:
            deferred.discard(caller)
            return True
        return False

    # -- monitors, links, names, tasks ---------------------------------------------------------

    def add_monitor(self, mref: MonitorRef, target: Process | Exited) -> None:
        if target.reason is not None:
            self.deliver(Down(target.ref, target.reason, mref))
            return
        assert isinstance(target, Process)  # an `Exited` has a reason
        if target.monitors is None:
            target.monitors = {}
        target.monitors[mref] = self
        if self.monitoring is None:
            self.monitoring = {}
        self.monitoring[mref] = target

    def remove_monitor(self, mref: MonitorRef, *, flush: bool) -> bool:
        target = self.monitoring.pop(mref, None) if self.monitoring else None
        if target is not None and target.monitors:
            target.monitors.pop(mref, None)
        if flush:
            self.mailbox.remove(
                lambda item: (
                    item[0] == INFO and isinstance(item[1], Down) and item[1].monitor is mref
                )
            )
        return target is not None

    def link(self, other: Process | Exited) -> None:
        if other is self:
            return
        if other.reason is not None:
            self.signal(other, other.reason)
            return
        assert isinstance(other, Process)  # an `Exited` has a reason
        if other.links is None:
            other.links = set()
        other.links.add(self)
        if self.links is None:
            self.links = set()
        self.links.add(other)

    def unlink(self, other: Process | Exited) -> None:
        if isinstance(other, Process) and other.links is not None:
            other.links.discard(self)
        if self.links is not None:
            self.links.discard(other)

    def bind_name(self, registry: Registry, name: Hashable) -> None:
        if self.reason is not None:
            raise exited_error(self.reason, repr(self.ref))
        if self.names is None:
            self.names = []
        self.names.append((registry, name))

    def unbind_name(self, registry: Registry, name: Hashable) -> None:
        if self.names and (registry, name) in self.names:
            self.names.remove((registry, name))

    def start_task(self, fn: Callable[..., Awaitable[Any]], args: tuple[Any, ...]) -> TaskHandle:
        if self.closing is not None or self.reason is not None:
            raise exited_error(self.closing or self.reason or _KILLED, repr(self.ref))
        handle = TaskHandle(getattr(fn, "__qualname__", repr(fn)))
        # Started before it is recorded: a nursery that is closed refuses the task at once
        # (RuntimeError), and an unrecorded task is never awaited by `reap_tasks`.
        self.nursery.start_soon(run_task, self, handle, fn, args, name=handle.name)
        if self.tasks is None:
            self.tasks = set()
        self.tasks.add(handle)
        return handle

    def task_ended(self, handle: TaskHandle) -> None:
        tasks = self.tasks
        if tasks is not None:
            tasks.discard(handle)
            if not tasks and self.tasks_idle is not None:
                self.tasks_idle.set()

    async def reap_tasks(self) -> None:
        tasks = self.tasks
        if not tasks:
            return
        for handle in tasks:
            handle.cancel()
        self.tasks_idle = trio.Event()
        # Shielded so an actor cancelled from outside still waits for the tasks it owns.
        with trio.CancelScope(shield=True):
            await self.tasks_idle.wait()

    async def host_children(self, children: Callable[[], Iterable[ActorRef]]) -> trio.Nursery:
        """A nursery for this actor's children (a supervisor's), run by a task of its own in
        the actor's nursery and shielded from outside cancellation: when the tree is cancelled,
        the supervisor stops its children itself, in order. `children` lists the ones alive.

        When the actor exits, the children still alive are killed (`Killed()`, no
        `terminate`: a killed supervisor's subtree dies killed) and the actor reports its exit
        only once they all have: a parent that restarts it never meets their names."""
        self.children = children
        self.children_done = trio.Event()
        nursery: trio.Nursery = await self.nursery.start(self._host_children)
        return nursery

    async def _host_children(self, task_status: trio.TaskStatus[trio.Nursery]) -> None:
        try:
            with trio.CancelScope(shield=True) as scope:
                self.children_scope = scope
                if self.reason is not None:
                    scope.cancel()
                async with trio.open_nursery() as nursery:
                    task_status.started(nursery)
                    await trio.sleep_forever()
        finally:
            assert self.children_done is not None
            self.children_done.set()

    def kill_children(self) -> None:
        children, self.children = self.children, None
        if children is not None:
            for ref in children():
                ref._process.kill()
        if self.children_scope is not None:
            self.children_scope.cancel()

    async def reap_children(self) -> None:
        """Kill the children still alive and wait, shielded, until every one has exited."""
        self.kill_children()
        if self.children_done is not None:
            with trio.CancelScope(shield=True):
                await self.children_done.wait()

    # -- the actor's own task ------------------------------------------------------------------

    async def run(self, actor: Actor) -> None:
        """The actor's task: the message loop, `terminate`, reaping its tasks, the exit."""
        self.task = trio.lowlevel.current_task()
        reason: ExitReason | None = None
        terminated = False
        outside: trio.Cancelled | None = None
        scope = self.scope
        assert scope is not None
        try:
            with scope:
                reason = await self._loop(actor)
                # The common path: terminate in the same scope, now shielded from outside
                # cancellation; a kill (this scope's own cancel) still cuts it short.
                scope.shield = True
                reason = await self._terminate(actor, reason)
                terminated = True
        except trio.Cancelled as exc:
            # Our own scope absorbs a kill, so this came from outside (during the loop).
            outside = exc
        except BaseException as exc:  # KeyboardInterrupt and the like: record the exit, propagate
            self.finish(interrupted(exc, self.kill_reason))
            raise
        try:
            if outside is not None and self.brutal:  # killed too (its supervisor was killed)
                reason = self.kill_reason or _KILLED
            elif outside is not None:  # shut down gracefully, within cancel_shutdown
                reason = await self._terminate_scoped(actor, Shutdown(), actor.cancel_shutdown)
            elif reason is None:  # killed during the loop
                reason = self.kill_reason or _KILLED
                if self.terminate_on_kill and not self.brutal:
                    reason = await self._terminate_scoped(actor, reason, None)
            elif not terminated and not isinstance(reason, Crash):  # killed during terminate
                reason = self.kill_reason or _KILLED
            if self.tasks:
                await self.reap_tasks()
            if self.children_done is not None:
                await self.reap_children()
        except BaseException as exc:
            self.finish(interrupted(exc, self.kill_reason))
            raise
        self.finish(reason)
        final = self.reason
        if final.__class__ is Crash:
            # Reported (logged with its traceback, delivered to callers, monitors, links): its
            # frames would keep the actor's whole state alive for as long as anyone holds the
            # reason, say a ref or a log sink keeping exc_info.
            drop_frames(final.exception)
        if outside is not None:
            raise outside

    async def _loop(self, actor: Actor) -> ExitReason:
        """Handle messages until one ends the actor; return the reason for `terminate`."""
        mailbox = self.mailbox
        get = mailbox.get
        handle_call = actor.handle_call
        handle_cast = actor.handle_cast
        handle_info = actor.handle_info
        result: Any = None
        if self.continuing is not None:  # init returned Continue: before any message
            result, self.continuing = self.continuing, None
            try:
                while result.__class__ is Continue and self.stop_reason is None:
                    result = await actor.handle_continue(result.term)
            except Exception as exc:
                log_crash(self.ref, exc, "continue")
                return Crash(exc)
            result = None
            if self.stop_reason is not None:
                return self.stop_reason
        while True:
            idle = self.idle_timeout
            if idle is None or len(mailbox):  # a queued message always goes before a timeout
                kind, payload = await get()
            else:
                kind, payload = INFO, IdleTimeout(idle)
                with trio.move_on_after(idle):
                    kind, payload = await get()
            try:
                if kind == CALL:
                    self.current = payload
                    result = await handle_call(payload.msg, payload)
                    self.current = None
                    if result is not NOREPLY and result.__class__ is not Continue:
                        payload.reply(result)
                    elif is_waiting(payload):
                        if self.deferred is None:
                            self.deferred = set()
                        self.deferred.add(payload)
                elif kind == CAST:
                    result = await handle_cast(payload)
                elif kind == INFO:
                    result = await handle_info(payload)
                else:
                    reason: ExitReason = payload
                    return reason
                # OTP's {continue, Term}: before the next message, unless the hook stopped.
                while result.__class__ is Continue and self.stop_reason is None:
                    result = await actor.handle_continue(result.term)
                result = None
            except Exception as exc:
                log_crash(self.ref, exc, "message")
                return Crash(exc)  # a caller in hand is failed at the exit, with the exit reason
            # An idle actor keeps nothing of its last message alive.
            payload = None
            if self.stop_reason is not None:
                return self.stop_reason

    async def _terminate(self, actor: Actor, reason: ExitReason) -> ExitReason:
        """Run `terminate(reason)`; the exit reason it leaves (see the module docstring)."""
        self.close(reason)
        try:
            await actor.terminate(reason)
        except Exception as exc:
            log_crash(self.ref, exc, "terminate")
            if not isinstance(reason, Crash):
                reason = Crash(exc)
        return reason

    async def _terminate_scoped(
        self, actor: Actor, reason: ExitReason, grace: float | None
    ) -> ExitReason:
        """`_terminate` after the actor's own scope has ended: in a new shielded scope, which a
        kill cancels, bounded by `grace` seconds unless None."""
        with trio.CancelScope(shield=True) as scope:
            self.scope = scope
            if grace is not None:
                scope.deadline = trio.current_time() + grace
            if self.brutal:
                scope.cancel()
            reason = await self._terminate(actor, reason)
        if scope.cancelled_caught and not isinstance(reason, Crash):
            reason = self.kill_reason or _KILLED
        return reason

    # -- the exit ------------------------------------------------------------------------------

    def close(self, reason: ExitReason) -> None:
        """Refuse new messages; queued calls will never be handled: they fail at the exit."""
        if self.closing is None:
            self.closing = reason
        if self.mailbox.closed:
            return
        final = self.closing
        dropped = 0
        for kind, payload in self.mailbox.close():
            if kind == CALL:
                # Failed at the exit, with the final reason (as monitors and links learn it):
                # terminate may yet crash or be killed. Kept as deferred callers till then.
                if is_waiting(payload):
                    if self.deferred is None:
                        self.deferred = set()
                    self.deferred.add(payload)
            elif kind == CAST or (kind == INFO and not _is_runtime(payload)):
                dropped += 1
        if dropped:
            logger().info(
                "actor.messages_dropped", actor=repr(self.ref), count=dropped, reason=str(final)
            )

    def finish(self, reason: ExitReason) -> None:
        """Record the exit and tell everyone who must know. Synchronous: safe while cancelled."""
        if self.reason is not None:
            return
        if isinstance(self.closing, Crash):
            reason = self.closing  # the first crash stays the reason (see module docstring)
        self.close(reason)
        label = repr(self.ref) if self.current or self.deferred else ""
        self.reason = reason
        self.actor = None
        self.task = None
        self.scope = None
        self.mailbox = self.home.closed_mailbox(self.mailbox.capacity)
        # From now on the ref answers from a small record: this process goes with its task.
        self.ref._process = Exited(self, reason)
        if self.children_scope is not None:
            self.kill_children()
        if self.tasks:
            for handle in self.tasks:
                handle.cancel()
        current, self.current = self.current, None
        if current is not None:
            fail_caller(current, exited_error(reason, label))
        if self.deferred:
            deferred, self.deferred = self.deferred, None
            for caller in deferred:
                fail_caller(caller, exited_error(reason, label))
        if self.names:
            names, self.names = self.names, None
            for registry, name in names:
                release_name(registry, name, self.ref)
        if self.monitoring:
            monitoring, self.monitoring = self.monitoring, None
            for mref, target in monitoring.items():
                if target.monitors is not None:
                    target.monitors.pop(mref, None)
        if self.monitors:
            monitors, self.monitors = self.monitors, None
            for mref, owner in monitors.items():
                if owner.monitoring is not None:
                    owner.monitoring.pop(mref, None)
                owner.deliver(Down(self.ref, reason, mref))
        if self.links:
            links, self.links = self.links, None
            for other in links:
                if other.links is not None:
                    other.links.discard(self)
                other.signal(self, reason)
        if self.exit_event is not None:
            self.exit_event.set()

    def start_failed(self, reason: ExitReason) -> StartError:
        err = StartError(self.ref.name, reason)
        if isinstance(reason, Crash):
            err.__cause__ = reason.exception
        return err


def interrupted(exc: BaseException, kill_reason: ExitReason | None) -> ExitReason:
    """The exit reason of an actor that a `BaseException` ends on its way to `trio.run`: a
    `Crash` naming it (KeyboardInterrupt, SystemExit, ...), unless it is a cancellation."""
    if isinstance(exc, trio.Cancelled) or (
        isinstance(exc, BaseExceptionGroup) and exc.split(trio.Cancelled)[1] is None
    ):
        return kill_reason or _KILLED
    return Crash(exc)


def drop_frames(exc: BaseException) -> None:
    """Let go of the frames of `exc` and of the exceptions chained to it or grouped in it."""
    seen: set[int] = set()
    todo = [exc]
    while todo:
        one = todo.pop()
        if id(one) in seen:
            continue
        seen.add(id(one))
        one.__traceback__ = None
        todo.extend(e for e in (one.__cause__, one.__context__) if e is not None)
        if isinstance(one, BaseExceptionGroup):
            todo.extend(one.exceptions)


def _is_runtime(msg: object) -> bool:
    return isinstance(msg, Down | Exit | TaskDone | TaskCancelled)
