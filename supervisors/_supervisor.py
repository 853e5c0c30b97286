"""Static supervisors: OTP's one_for_one, one_for_all and rest_for_one over a list of child specs.

A supervisor is an actor that owns a nursery; its children run in that nursery, so killing the
supervisor kills them too. It monitors each child; a `Down` decides a restart by the child's
restart policy and the strategy. Restart intensity is counted across the whole supervisor on
trio's clock; when it is exceeded the supervisor stops every child in reverse start order and
exits with `Shutdown("reached_max_restart_intensity")`, which its own supervisor then handles.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import AsyncIterator, Hashable, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Literal, final

import trio

from ._actor import Actor
from ._call import Caller, call
from ._errors import ActorExited, InvalidSpec, NameTaken, StartError, SupervisorError, UnknownChild
from ._log import log_crash, logger
from ._reasons import Crash, Down, ExitReason, Killed, Shutdown, is_abnormal
from ._ref import ActorRef, ActorStatistics, MonitorRef, live_process, process_of
from ._registry import Registry, claim_name, unclaim_name
from ._spawn import DEFAULT_MAILBOX_SIZE, check_start
from ._spec import ChildSpec, ChildType, Start
from ._threads import check_nursery

Strategy = Literal["one_for_one", "one_for_all", "rest_for_one"]
AutoShutdown = Literal["never", "any_significant", "all_significant"]
"""When a static supervisor shuts itself down after significant children exit on their own
(OTP's auto_shutdown): never, when any one has, or when all have."""
ChildStatus = Literal["running", "restarting", "stopped"]

_SHUTDOWN = Shutdown()
GIVE_UP_REASON = Shutdown("reached_max_restart_intensity")
"""The exit reason of a supervisor that exceeded its restart intensity."""
RECENT_EXITS = 10
"""How many of its children's exits a supervisor keeps for `statistics()` (the latest ones)."""
REASON_CHARS = 200
"""An exit reason is kept as text of at most this many characters (a crash's message may be long,
and the record must stay small)."""


@final
@dataclass(frozen=True, slots=True)
class ChildInfo:
    """One row of `which_children()`: `ref` is None while the child is not running."""

    id: Hashable
    ref: ActorRef | None
    status: ChildStatus
    restarts: int
    type: ChildType


@final
@dataclass(frozen=True, slots=True)
class ChildExit:
    """One exit of a child that its supervisor saw: when (trio's clock, `trio.current_time()`),
    which child (its spec's id), and why (the exit reason as text, cut to `REASON_CHARS`)."""

    at: float
    child: Hashable
    reason: str


@final
@dataclass(frozen=True, slots=True)
class SupervisorStatistics(ActorStatistics):
    """A supervisor's `statistics()`: its mailbox figures, and the last `RECENT_EXITS` exits of
    its children, oldest first, whether or not they were restarted."""

    recent_exits: tuple[ChildExit, ...]


@final
@dataclass(frozen=True, slots=True)
class ChildCounts:
    """`count_children()`, as OTP: specs known, children running, supervisors, workers."""

    specs: int
    active: int
    supervisors: int
    workers: int


@dataclass(slots=True, eq=False)
class _Child:
    spec: ChildSpec
    ref: ActorRef | None = None
    restarts: int = 0
    status: ChildStatus = "stopped"
    monitor: MonitorRef | None = None

    def info(self) -> ChildInfo:
        return ChildInfo(self.spec.id, self.ref, self.status, self.restarts, self.spec.type)


class _GiveUp(Exception):
    """Restart intensity exceeded (internal control flow)."""


def _check_strategy(strategy: object, auto_shutdown: object) -> None:
    if strategy not in ("one_for_one", "one_for_all", "rest_for_one"):
        raise InvalidSpec(
            f"strategy must be 'one_for_one', 'one_for_all' or 'rest_for_one', got {strategy!r}"
        )
    if auto_shutdown not in ("never", "any_significant", "all_significant"):
        raise InvalidSpec(
            "auto_shutdown must be 'never', 'any_significant' or 'all_significant', "
            f"got {auto_shutdown!r}"
        )


def _check_limits(max_restarts: object, max_seconds: object) -> None:
    if type(max_restarts) is not int or max_restarts < 0:
        raise InvalidSpec(f"max_restarts must be an int >= 0, got {max_restarts!r}")
    if (
        not isinstance(max_seconds, int | float)
        or isinstance(max_seconds, bool)
        or not max_seconds > 0
        or not math.isfinite(max_seconds)
    ):
        raise InvalidSpec(f"max_seconds must be a number > 0, got {max_seconds!r}")


class _SupervisorBase(Actor):
    """What static and dynamic supervisors share: intensity, starting and stopping children."""

    cancel_shutdown = None
    trap_exits = True
    """As OTP's: a crash of a process merely linked to a supervisor arrives as an `Exit`
    message, which it ignores; it never takes the supervisor and its subtree down."""
    _max_restarts: int
    _max_seconds: float
    _restart_times: deque[float]
    _recent_exits: deque[ChildExit]
    _nursery: trio.Nursery
    _extra_arguments: tuple[Any, ...] = ()

    async def _setup(self, max_restarts: int, max_seconds: float) -> None:
        _check_limits(max_restarts, max_seconds)
        self._max_restarts = max_restarts
        self._max_seconds = float(max_seconds)
        self._restart_times = deque()
        self._recent_exits = deque(maxlen=RECENT_EXITS)
        process = live_process(self.ref)
        assert process is not None  # in init
        self._nursery = await process.host_children(self._live_children)

    def _live_children(self) -> Iterable[ActorRef]:
        raise NotImplementedError

    def _child_exited_with(self, child: _Child, reason: ExitReason) -> None:
        """Log a monitored child's exit and keep it among the recent ones."""
        text = str(reason)
        if len(text) > REASON_CHARS:
            text = text[: REASON_CHARS - 1] + "…"
        self._recent_exits.append(ChildExit(trio.current_time(), child.spec.id, text))
        logger().info(
            "supervisor.child_exited",
            supervisor=repr(self.ref),
            child=repr(child.spec.id),
            reason=str(reason),
        )

    def _allow_restart(self) -> bool:
        """Record one restart; False when that exceeds max_restarts within max_seconds.

        OTP's window: the restarts at times ``>= now - max_seconds`` count, so with 1 in 5 s,
        crashes at t=0 and t=5 are two restarts within the period."""
        now = trio.current_time()
        times = self._restart_times
        times.append(now)
        while times and now - times[0] > self._max_seconds:
            times.popleft()
        return len(times) <= self._max_restarts

    def _children_cancelled(self) -> bool:
        """True once the nursery the children run in is cancelled, which only an exception
        escaping a child's own task does (KeyboardInterrupt, SystemExit): it is on its way to
        `trio.run`. Nothing is started there any more: a restart would be cancelled at once,
        restarted again, and hold the program up."""
        return self._nursery.cancel_scope.cancel_called

    def _adopt(self, spec: ChildSpec) -> _Child:
        """A child entry for `spec`; a registry name it will restart under is claimed, so that
        `Registry.call` waits for it rather than failing with `NoProcess`."""
        child = _Child(spec)
        self._claim(child)
        return child

    def _claim(self, child: _Child) -> None:
        start = child.spec.start
        if start.registry is not None and child.spec.restart != "temporary":
            claim_name(start.registry, start.name, process_of(self.ref))

    def _forget(self, child: _Child) -> None:
        """The child's entry is dropped, or it stays stopped (`terminate_child`, an exit not
        restarted): its name is no longer claimed by this supervisor, so `Registry.call` to it
        fails at once with `NoProcess`, as OTP's noproc. A restart claims it again."""
        start = child.spec.start
        if start.registry is not None and child.spec.restart != "temporary":
            unclaim_name(start.registry, start.name, process_of(self.ref))

    async def _start(
        self, child: _Child, *, monitor: bool = True, restart: bool = False
    ) -> ActorRef | None:
        """Start `child`; None (and the child stays stopped) if its init returned `IGNORE`. A
        restart into a nursery being cancelled fails (`_children_cancelled`); a first start
        there would only be cancelled at once, so it is not checked (a property lookup less)."""
        spec = child.spec
        if restart and self._children_cancelled():
            raise StartError(
                spec.id, Killed(), f"in {self.ref!r}: its children's nursery is cancelled"
            )
        try:
            ref = await spec.start.spawn(self._nursery, self._extra_arguments)
        except (NameTaken, StartError) as exc:
            raise self._start_failed(spec, exc) from _cause(exc)
        except Exception as exc:
            # As OTP wraps every start: whatever a start raises is that start's failure
            # ({error, _}), never the supervisor's crash nor its siblings'.
            log_crash(self.ref, exc, f"start of child {spec.id!r}")
            raise StartError(
                spec.id, Crash(exc), f"in {self.ref!r}: {type(exc).__name__}: {exc}"
            ) from exc
        if ref is None:
            child.status = "stopped"
            return None
        child.monitor = self.monitor(ref) if monitor else None
        child.ref = ref
        child.status = "running"
        return ref

    def _start_failed(self, spec: ChildSpec, exc: NameTaken | StartError) -> StartError:
        """The error a failed child start raises to whoever asked: it names the child."""
        if isinstance(exc, NameTaken):
            # As OTP's {error, {already_started, Pid}}: the caller's failure, never the
            # supervisor's own crash.
            return StartError(spec.id, Crash(exc), f"in {self.ref!r}: {exc}")
        return StartError(spec.id, exc.reason, f"in {self.ref!r}")

    async def _shutdown(self, child: _Child, reason: ExitReason = _SHUTDOWN) -> ExitReason:
        """The shutdown ladder: graceful request, wait up to the spec's timeout, then cancel."""
        ref = child.ref
        if ref is None:
            child.status = "stopped"
            return Killed()
        if child.monitor is not None:
            self.demonitor(child.monitor, flush=True)
            child.monitor = None
        policy = child.spec.shutdown
        if policy == "brutal_kill":
            ref.kill()
            result = await ref.wait()
        elif policy == "infinity":
            result = await ref.stop(reason, timeout=None)
        else:
            assert isinstance(policy, float)
            result = await ref.stop(reason, timeout=policy)
            if isinstance(result, Killed):
                logger().warning(
                    "supervisor.child_killed",
                    supervisor=repr(self.ref),
                    child=repr(child.spec.id),
                    shutdown=policy,
                )
        # Only now: until it has exited, a kill of the supervisor must still reach it.
        child.ref = None
        child.status = "stopped"
        return result

    async def handle_cast(self, msg: Any) -> None:
        # Nothing is cast to a supervisor: one sent anyway is logged, never a crash (as OTP's).
        logger().error("supervisor.unexpected_message", supervisor=repr(self.ref), msg=repr(msg))

    def _unknown_request(self, msg: Any) -> _CallError:
        return _CallError(
            InvalidSpec(
                f"{self.ref!r} does not know the request {msg!r}; use the methods of its ref"
            )
        )

    def _give_up(self, failed: Hashable) -> None:
        logger().error(
            "supervisor.gave_up",
            supervisor=repr(self.ref),
            child=repr(failed),
            max_restarts=self._max_restarts,
            max_seconds=self._max_seconds,
        )
        self.stop(GIVE_UP_REASON)


def _cause(exc: NameTaken | StartError) -> BaseException:
    """The cause `_start_failed`'s error is raised from: what made init fail, if known."""
    if isinstance(exc, NameTaken):
        return exc
    return exc.__cause__ or exc


def _should_restart(spec: ChildSpec, reason: ExitReason) -> bool:
    if spec.restart == "permanent":
        return True
    if spec.restart == "transient":
        return is_abnormal(reason)
    return False


class Supervisor(_SupervisorBase):
    _children: list[_Child]
    _strategy: Strategy
    _auto_shutdown: AutoShutdown

    async def init(
        self,
        children: Sequence[ChildSpec],
        strategy: Strategy = "one_for_one",
        max_restarts: int = 3,
        max_seconds: float = 5,
        auto_shutdown: AutoShutdown = "never",
    ) -> None:
        _check_strategy(strategy, auto_shutdown)
        self._strategy = strategy
        self._auto_shutdown = auto_shutdown
        seen: set[Hashable] = set()
        self._children = []
        for spec in children:
            self._check_new(spec, seen)
            seen.add(spec.id)
            self._children.append(self._adopt(spec))
        await self._setup(max_restarts, max_seconds)
        for child in list(self._children):
            try:
                ref = await self._start(child)
            except BaseException:
                # Undo: the children already started stop in reverse order.
                await self._stop_all()
                raise
            if ref is None and child.spec.restart == "temporary":
                self._remove(child)  # OTP: an ignored temporary child's spec is not kept
            _log_started(self.ref, child)

    def _check_new(self, spec: object, ids: Iterable[Hashable]) -> None:
        if not isinstance(spec, ChildSpec):
            raise InvalidSpec(f"children must be ChildSpec values, got {spec!r}")
        if spec.id in ids:
            raise InvalidSpec(f"duplicate child id {spec.id!r}")
        if spec.significant and self._auto_shutdown == "never":
            raise InvalidSpec(
                f"child {spec.id!r} is significant, which needs auto_shutdown "
                "'any_significant' or 'all_significant' (the supervisor's is 'never')"
            )

    async def terminate(self, reason: ExitReason) -> None:
        await self._stop_all()

    def _live_children(self) -> Iterable[ActorRef]:
        return [child.ref for child in self._children if child.ref is not None]

    def _remove(self, child: _Child) -> None:
        self._children.remove(child)
        self._forget(child)

    async def _stop_all(self, children: Sequence[_Child] | None = None) -> None:
        for child in reversed(self._children if children is None else children):
            if child.ref is not None:
                await self._shutdown(child)

    def _find(self, child_id: Hashable) -> _Child:
        for child in self._children:
            if child.spec.id == child_id:
                return child
        raise UnknownChild(repr(self.ref), child_id)

    async def handle_call(self, msg: Any, caller: Caller) -> Any:
        # A bad request is answered with the error as a value: it must not crash the supervisor.
        try:
            return await self._request(msg, caller)
        except (UnknownChild, StartError) as exc:
            return _CallError(exc)
        except _CallError as exc:
            return exc

    async def _request(self, msg: Any, caller: Caller) -> Any:
        match msg:
            case ("which_children",):
                return [child.info() for child in self._children]
            case ("count_children",):
                return _count(self._children)
            case ("terminate_child", child_id):
                child = self._find(child_id)
                if child.ref is not None:
                    await self._shutdown(child)
                if child.spec.restart == "temporary":
                    self._remove(child)
                else:
                    self._forget(child)  # stays stopped: a call to its name is noproc
                return None
            case ("restart_child", child_id):
                child = self._find(child_id)
                if child.ref is not None:
                    raise _CallError(
                        SupervisorError(f"child {child_id!r} of {self.ref!r} is already running")
                    )
                self._claim(child)
                ref = await self._start(child, restart=True)
                if ref is None and child.spec.restart == "temporary":
                    self._remove(child)
                _log_started(self.ref, child)
                return ref
            case ("start_child", ChildSpec() as spec):
                # OTP's supervisor:start_child/2: the spec is added at the end, then started;
                # if the start fails the spec is not kept, if init returned IGNORE it is
                # (a temporary child's is not: nothing would ever start it).
                try:
                    self._check_new(spec, [c.spec.id for c in self._children])
                except InvalidSpec as exc:
                    raise _CallError(exc) from None
                child = self._adopt(spec)
                self._children.append(child)
                try:
                    ref = await self._start(child)
                except StartError:
                    self._remove(child)
                    raise
                if ref is None and spec.restart == "temporary":
                    self._remove(child)
                _log_started(self.ref, child)
                return ref
            case ("delete_child", child_id):
                child = self._find(child_id)
                if child.ref is not None:
                    raise _CallError(
                        SupervisorError(
                            f"child {child_id!r} of {self.ref!r} is running; "
                            "terminate_child it first"
                        )
                    )
                self._remove(child)
                return None
        raise self._unknown_request(msg)

    async def handle_info(self, msg: Any) -> None:
        match msg:
            case Down(ref, reason, monitor):
                for index, child in enumerate(self._children):
                    if child.ref is ref and child.monitor is monitor:
                        await self._child_exited(index, child, reason)
                        return
            case _:
                await super().handle_info(msg)

    def _significant_exited(self, child: _Child) -> None:
        """A significant child exited on its own and stays stopped (OTP's auto_shutdown)."""
        if self._auto_shutdown == "all_significant" and any(
            c.spec.significant and c.ref is not None for c in self._children
        ):
            return
        logger().info(
            "supervisor.auto_shutdown",
            supervisor=repr(self.ref),
            child=repr(child.spec.id),
            auto_shutdown=self._auto_shutdown,
        )
        self.stop(_SHUTDOWN)

    async def _child_exited(self, index: int, child: _Child, reason: ExitReason) -> None:
        child.ref = None
        child.monitor = None
        child.status = "stopped"
        self._child_exited_with(child, reason)
        if not _should_restart(child.spec, reason) or self._children_cancelled():
            if child.spec.restart == "temporary":
                self._remove(child)
            else:
                self._forget(child)  # stays stopped: a call to its name is noproc
            if child.spec.significant and not self._children_cancelled():
                self._significant_exited(child)
            return
        if not self._allow_restart():
            self._give_up(child.spec.id)
            return
        if self._strategy == "one_for_one":
            group = [child]
        elif self._strategy == "one_for_all":
            group = list(self._children)
        else:
            group = self._children[index:]
        # Stop the rest of the group (reverse start order), then restart it in start order;
        # temporary siblings taken down this way are dropped, never restarted.
        await self._stop_all([c for c in group if c is not child])
        for sibling in group:
            if sibling is not child and sibling.spec.restart == "temporary":
                self._remove(sibling)
        for member in group:
            if member.spec.restart == "temporary" and member is not child:
                continue
            member.status = "restarting"
            try:
                await self._restart(member)
            except _GiveUp:
                self._give_up(member.spec.id)
                return

    async def _restart(self, child: _Child) -> None:
        self._claim(child)  # a child stopped till now (terminate_child) restarts with the group
        while True:
            try:
                await self._start(child, restart=True)
            except StartError as exc:
                logger().error(
                    "supervisor.restart_failed",
                    supervisor=repr(self.ref),
                    child=repr(child.spec.id),
                    error=str(exc),
                )
                child.status = "stopped"
                if not self._allow_restart():
                    raise _GiveUp from exc
                continue
            child.restarts += 1
            logger().info(
                "supervisor.child_restarted",
                supervisor=repr(self.ref),
                child=repr(child.spec.id),
                restarts=child.restarts,
                ref=repr(child.ref),
            )
            return


class _CallError(Exception):
    """An error to hand back to the caller of a supervisor request without crashing it."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


def _count(children: Sequence[_Child]) -> ChildCounts:
    return ChildCounts(
        specs=len(children),
        active=sum(1 for c in children if c.ref is not None),
        supervisors=sum(1 for c in children if c.spec.type == "supervisor"),
        workers=sum(1 for c in children if c.spec.type == "worker"),
    )


def supervisor_statistics(ref: ActorRef) -> SupervisorStatistics:
    """`statistics()` of a supervisor's ref: read from the supervisor itself, in this task (the
    record is only appended to by the supervisor's own task, so the copy is consistent)."""
    process = process_of(ref)
    mailbox = process.mailbox
    exits = getattr(process.actor, "_recent_exits", ())  # none before init, or after the exit
    return SupervisorStatistics(len(mailbox), mailbox.capacity, tuple(exits))


def _log_started(sup: ActorRef, child: _Child) -> None:
    if child.ref is None:  # its init returned IGNORE: nothing started (OTP reports nothing)
        return
    # Debug, like the dynamic supervisor's: an application's start would otherwise open its
    # log with one line per child.
    logger().debug(
        "supervisor.child_started",
        supervisor=repr(sup),
        child=repr(child.spec.id),
        ref=repr(child.ref),
    )


async def _request(ref: ActorRef, msg: tuple[Any, ...], timeout: float | None) -> Any:  # noqa: ASYNC109
    # A supervisor's requests wait for room in its mailbox: a burst is queued, never refused.
    result = await call(process_of(ref), msg, timeout, wait_for_room=True)
    if isinstance(result, _CallError):
        raise result.error
    return result


async def raw_call(ref: ActorRef, msg: Any, timeout: float | None) -> Any:  # noqa: ASYNC109
    """`ActorRef.call` on a supervisor: the error a bad request is answered with is raised."""
    result = await call(process_of(ref), msg, timeout, wait_for_room=False)
    if isinstance(result, _CallError):
        raise result.error
    return result


class SupervisorRefBase(ActorRef):
    """What the refs of both kinds of supervisor add to `ActorRef` alike."""

    __slots__ = ()

    async def call(self, msg: Any, timeout: float | None = 5.0) -> Any:  # noqa: ASYNC109
        """`ActorRef.call`; a request the supervisor does not know raises `InvalidSpec` (the
        supervisor answers it with that error and keeps running)."""
        return await raw_call(self, msg, timeout)

    def statistics(self) -> SupervisorStatistics:
        """The mailbox figures, and the monitored children's recent exits (`RECENT_EXITS`,
        oldest first; a dynamic supervisor's temporary children are not monitored, so their
        exits are not there)."""
        return supervisor_statistics(self)


@final
class SupervisorRef(SupervisorRefBase):
    """The ref of a static supervisor: an `ActorRef` plus OTP's supervisor requests."""

    __slots__ = ()

    async def which_children(self, timeout: float | None = None) -> list[ChildInfo]:  # noqa: ASYNC109
        """Every child in start order: id, ref (None when not running), status, restarts.
        No timeout by default, as in OTP (the supervisor may be busy restarting)."""
        result: list[ChildInfo] = await _request(self, ("which_children",), timeout)
        return result

    async def count_children(self, timeout: float | None = None) -> ChildCounts:  # noqa: ASYNC109
        """How many specs, running children, supervisors and workers (no timeout by default)."""
        result: ChildCounts = await _request(self, ("count_children",), timeout)
        return result

    async def terminate_child(self, child_id: Hashable, timeout: float | None = None) -> None:  # noqa: ASYNC109
        """Stop a child through its shutdown ladder; it stays stopped (a temporary child's spec is
        removed). Raises `UnknownChild` for an unknown id."""
        await _request(self, ("terminate_child", child_id), timeout)

    async def restart_child(
        self,
        child_id: Hashable,
        timeout: float | None = None,  # noqa: ASYNC109
    ) -> ActorRef | None:
        """Start a stopped child again and return its new ref (None if its init returned
        `IGNORE`: it stays stopped). Raises `UnknownChild`, `StartError`, or `SupervisorError`
        if it is running."""
        result: ActorRef | None = await _request(self, ("restart_child", child_id), timeout)
        return result

    async def start_child(self, spec: ChildSpec, timeout: float | None = None) -> ActorRef | None:  # noqa: ASYNC109
        """Add `spec` at the end of the children and start it (OTP's start_child/2); its ref, or
        None if its init returned `IGNORE` (the spec is kept, not running; a temporary one's is
        dropped, as OTP's). Raises
        `InvalidSpec` (not a `ChildSpec`, a duplicate id, a significant child without
        auto_shutdown) and `StartError` if its init fails (then the spec is not kept). The
        strategy applies to it from then on. Cancellation: a caller already cancelled sends
        nothing; one cancelled while waiting abandons the reply, and the child may still start.
        """
        if not isinstance(spec, ChildSpec):
            raise InvalidSpec(f"start_child needs a ChildSpec, got {spec!r}")
        result: ActorRef | None = await _request(self, ("start_child", spec), timeout)
        return result

    async def delete_child(self, child_id: Hashable, timeout: float | None = None) -> None:  # noqa: ASYNC109
        """Forget a stopped child's spec (OTP's delete_child/2); its registry name is no longer
        claimed, so `Registry.call` to it fails at once with `NoProcess`. Raises
        `UnknownChild`, or `SupervisorError` if it is running (`terminate_child` it first).
        Cancellation: a caller cancelled while waiting abandons the reply; the request may still
        be handled."""
        await _request(self, ("delete_child", child_id), timeout)


Supervisor._ref_class = SupervisorRef


async def start_supervisor(
    nursery: trio.Nursery,
    children: Sequence[ChildSpec],
    strategy: Strategy = "one_for_one",
    max_restarts: int = 3,
    max_seconds: float = 5,
    *,
    auto_shutdown: AutoShutdown = "never",
    name: Hashable | None = None,
    registry: Registry | None = None,
    mailbox_size: int = DEFAULT_MAILBOX_SIZE,
) -> SupervisorRef:
    """Start a supervisor in `nursery`; its children start in order before this returns.

    A child that fails to start stops the ones already started (reverse order) and raises
    `StartError` naming that child. `auto_shutdown` (OTP's): with ``"any_significant"`` the
    supervisor shuts down (exit `Shutdown()`, children stopped in reverse order) when a child
    whose spec is `significant` exits on its own and is not restarted; with
    ``"all_significant"`` when the last of them has. `mailbox_size` bounds the supervisor's
    own mailbox; its requests (`which_children`, `restart_child`, ...) wait for room rather
    than fail.
    """
    from ._spawn import start_actor

    check_start(Supervisor, name, registry, mailbox_size)
    check_nursery(nursery, "start_supervisor")
    _check_strategy(strategy, auto_shutdown)
    try:
        ref = await start_actor(
            nursery,
            Supervisor,
            (children, strategy, max_restarts, max_seconds, auto_shutdown),
            {},
            name,
            registry,
            mailbox_size,
        )
    except StartError as exc:
        inner = exc.__cause__
        if isinstance(inner, SupervisorError):
            raise inner from inner.__cause__
        raise
    assert isinstance(ref, SupervisorRef)
    return ref


def supervisor_spec(
    id: Hashable,
    children: Sequence[ChildSpec],
    strategy: Strategy = "one_for_one",
    max_restarts: int = 3,
    max_seconds: float = 5,
    *,
    auto_shutdown: AutoShutdown = "never",
    restart: Literal["permanent", "transient", "temporary"] = "permanent",
    shutdown: float | Literal["brutal_kill", "infinity"] = "infinity",
    significant: bool = False,
    name: Hashable | None = None,
    registry: Registry | None = None,
    mailbox_size: int = DEFAULT_MAILBOX_SIZE,
) -> ChildSpec:
    """A `ChildSpec` for a nested static supervisor (type ``"supervisor"``)."""
    _check_limits(max_restarts, max_seconds)
    _check_strategy(strategy, auto_shutdown)
    return ChildSpec(
        id=id,
        start=Start(
            Supervisor,
            (tuple(children), strategy, max_restarts, max_seconds, auto_shutdown),
            name=name,
            registry=registry,
            mailbox_size=mailbox_size,
        ),
        restart=restart,
        shutdown=shutdown,
        type="supervisor",
        significant=significant,
    )


@asynccontextmanager
async def open_supervisor(
    children: Sequence[ChildSpec],
    strategy: Strategy = "one_for_one",
    max_restarts: int = 3,
    max_seconds: float = 5,
    *,
    auto_shutdown: AutoShutdown = "never",
    name: Hashable | None = None,
    registry: Registry | None = None,
    mailbox_size: int = DEFAULT_MAILBOX_SIZE,
) -> AsyncIterator[SupervisorRef]:
    """``async with open_supervisor(children) as sup:`` — a supervisor scoped to the block.

    Leaving the block, or a cancellation of the scope around it, shuts the children down in
    reverse order through their shutdown policies (`terminate(Shutdown())` runs). An exception
    raised in the block comes out of the ``async with`` as itself (no `ExceptionGroup`). If the
    supervisor gives up while the block runs, the block is cancelled and `ActorExited` (reason
    `Shutdown`) is raised from the ``async with``.
    """
    async with _scoped(
        lambda nursery: start_supervisor(
            nursery,
            children,
            strategy,
            max_restarts,
            max_seconds,
            auto_shutdown=auto_shutdown,
            name=name,
            registry=registry,
            mailbox_size=mailbox_size,
        )
    ) as ref:
        yield ref


@asynccontextmanager
async def _scoped(starter: Any) -> AsyncIterator[Any]:
    """Run a supervisor for the duration of a block, in a nursery the block never sees: what
    the block raises is re-raised after the nursery has closed, so it is never wrapped in an
    ExceptionGroup (trio's advice for context managers that hide a nursery). A SystemExit or
    KeyboardInterrupt from an actor of the tree comes out bare too, so that ``sys.exit(3)`` in
    an actor gives the program exit status 3 (a group would give 1)."""
    try:
        async with _scoped_nursery(starter) as ref:
            yield ref
    except BaseExceptionGroup as group:
        leaf = _first_interrupt(group)
        if leaf is None:
            raise
        raise leaf from None


def _first_interrupt(exc: BaseException) -> BaseException | None:
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = _first_interrupt(inner)
            if found is not None:
                return found
        return None
    return exc if isinstance(exc, SystemExit | KeyboardInterrupt) else None


@asynccontextmanager
async def _scoped_nursery(starter: Any) -> AsyncIterator[Any]:
    gave_up: list[ExitReason] = []
    raised: list[BaseException] = []
    async with trio.open_nursery() as nursery:
        ref: ActorRef = await starter(nursery)
        closing = False

        async def watch() -> None:
            reason = await ref.wait()
            if not closing:
                gave_up.append(reason)
                nursery.cancel_scope.cancel()

        nursery.start_soon(watch)
        try:
            yield ref
        except trio.Cancelled:
            raise  # belongs to a scope: trio routes it (ours is absorbed by the nursery)
        except BaseException as exc:
            raised.append(exc)
        finally:
            closing = True
            with trio.CancelScope(shield=True):
                await ref.stop(Shutdown(), timeout=None)
            nursery.cancel_scope.cancel()
    if raised:
        raise raised[0]
    if gave_up:
        reason = gave_up[0]
        err = ActorExited(reason, repr(ref))
        if isinstance(reason, Crash):
            raise err from reason.exception
        raise err
