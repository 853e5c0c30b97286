"""DynamicSupervisor: children started on demand, one_for_one, with an optional max_children.

Like Elixir's DynamicSupervisor: it starts empty, `start_child(spec)` returns the child's ref,
restarts follow each child's restart policy under the supervisor-wide intensity, and on shutdown
every child is stopped concurrently (each through its own shutdown ladder).

Temporary children are never restarted, so the supervisor does not monitor them: no `Down`
message per exit. It drops the ones that have exited whenever it looks at its children (every
request that reports or counts them) and, so that memory stays bounded, whenever the table has
doubled since it last did; an exited temporary child is never reported, counted or terminated.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Hashable
from contextlib import asynccontextmanager
from typing import Any, Literal, final

import trio

from ._actor import ActorRef, Caller, _fail_start, _init_cannot_suspend, _spawn_now, spawn
from ._errors import InvalidSpec, MaxChildren, NameTaken, StartError, UnknownChild
from ._log import debug_enabled, logger
from ._mailbox import YIELD_EVERY
from ._reasons import Down, ExitReason
from ._registry import Registry
from ._spec import ChildSpec, Start
from ._supervisor import (
    ChildCounts,
    ChildInfo,
    _CallError,
    _cause,
    _check_limits,
    _Child,
    _count,
    _request,
    _scoped,
    _should_restart,
    _SupervisorBase,
)

_PRUNE_MIN = 64
"""The table of children is first pruned of exited temporary children at this size."""

_streak = 0
"""Starts done in their caller's task since one of them last yielded (see `start_child`). One
count for the process: a task that never yields is the only one counting, so it yields in
time; others counting too only make it yield sooner."""


class DynamicSupervisor(_SupervisorBase):
    _children: dict[ActorRef, _Child]
    _max_children: int | None
    _prune_at: int

    async def init(
        self, max_children: int | None = None, max_restarts: int = 3, max_seconds: float = 5
    ) -> None:
        _check_max(max_children)
        self._setup_intensity(max_restarts, max_seconds)
        self._max_children = max_children
        self._children = {}
        self._prune_at = _PRUNE_MIN

    def _prune(self) -> dict[ActorRef, _Child]:
        """Drop the temporary children that have exited (they are not monitored); monitored
        ones stay until their `Down` is handled, which decides their restart."""
        children = self._children
        gone = [
            ref
            for ref, child in children.items()
            if ref._reason is not None and child.spec.restart == "temporary"
        ]
        for ref in gone:
            del children[ref]
        self._prune_at = max(_PRUNE_MIN, 2 * len(children))
        return children

    async def terminate(self, reason: ExitReason) -> None:
        children = list(self._prune().values())
        self._children = {}
        async with trio.open_nursery() as nursery:
            for child in reversed(children):
                nursery.start_soon(self._shutdown, child)

    async def handle_call(self, msg: Any, caller: Caller) -> Any:
        # A bad request is answered with the error as a value: it must not crash the supervisor.
        # start_child is matched first and inline: it is the request a busy system sends most.
        try:
            match msg:
                case ("start_child", ChildSpec() as spec):
                    return await self._start_child(spec)
                case ("terminate_child", ActorRef() as ref):
                    found = self._prune().pop(ref, None)
                    if found is None:
                        raise UnknownChild(repr(self.ref), ref)
                    await self._shutdown(found)
                    return None
                case ("which_children",):
                    return [child.info() for child in self._prune().values()]
                case ("count_children",):
                    return _count(list(self._prune().values()))
        except (UnknownChild, StartError, MaxChildren) as exc:
            return _CallError(exc)
        return await super().handle_call(msg, caller)

    def _make_room(self) -> None:
        """Raise `MaxChildren` if full (exited temporary children do not count)."""
        children = self._children
        if len(children) >= self._prune_at:
            self._prune()
        limit = self._max_children
        if limit is not None and len(children) >= limit and len(self._prune()) >= limit:
            raise MaxChildren(repr(self.ref), limit)

    async def _start_child(self, spec: ChildSpec) -> ActorRef:
        self._make_room()
        child = _Child(spec)
        ref = await self._start(child, monitor=spec.restart != "temporary")
        self._children[ref] = child
        # A dynamic supervisor may start thousands of children: build the event only if kept.
        if debug_enabled():
            _log_started(self.ref, spec, ref)
        return ref

    def _start_child_now(self, spec: ChildSpec) -> tuple[ActorRef, ExitReason | None]:
        """`_start_child` in one synchronous step, for a child whose init cannot suspend, run
        by the task that asked while this supervisor is idle (see `start_child`). Returns the
        ref and None, or the ref and the reason its init failed (nothing is recorded then)."""
        self._make_room()
        start = spec.start
        try:
            ref, failed = _spawn_now(
                self.ref._nursery,
                start.actor,
                start.args,
                start.kwargs,
                start.name,
                start.registry,
                start.mailbox_size,
            )
        except NameTaken as exc:
            raise self._start_failed(spec, exc) from exc
        if failed is None:
            if spec.restart != "temporary":
                self.monitor(ref)
            self._children[ref] = _Child(spec, ref, 0, "running")
            if debug_enabled():
                _log_started(self.ref, spec, ref)
        return ref, failed

    async def handle_info(self, msg: Any) -> None:
        if isinstance(msg, Down):
            child = self._children.pop(msg.ref, None)
            if child is not None:
                child.ref = None
                child.status = "stopped"
                if _should_restart(child.spec, msg.reason):
                    await self._restart_child(child, msg.reason)
        else:
            await super().handle_info(msg)

    async def _restart_child(self, child: _Child, reason: ExitReason) -> None:
        logger().info(
            "supervisor.child_exited",
            supervisor=repr(self.ref),
            child=repr(child.spec.id),
            reason=str(reason),
        )
        while True:
            if not self._allow_restart():
                self._give_up(child.spec.id)
                return
            child.status = "restarting"
            try:
                ref = await self._start(child)
            except StartError as exc:
                logger().error(
                    "supervisor.restart_failed",
                    supervisor=repr(self.ref),
                    child=repr(child.spec.id),
                    error=str(exc),
                )
                continue
            child.restarts += 1
            self._children[ref] = child
            logger().info(
                "supervisor.child_restarted",
                supervisor=repr(self.ref),
                child=repr(child.spec.id),
                restarts=child.restarts,
                ref=repr(ref),
            )
            return


def _log_started(supervisor: ActorRef, spec: ChildSpec, ref: ActorRef) -> None:
    logger().debug(
        "supervisor.child_started", supervisor=repr(supervisor), child=repr(spec.id), ref=repr(ref)
    )


def _check_max(max_children: object) -> None:
    if max_children is not None and (type(max_children) is not int or max_children < 0):
        raise InvalidSpec(f"max_children must be None or an int >= 0, got {max_children!r}")


@final
class DynamicSupervisorRef(ActorRef):
    """The ref of a DynamicSupervisor: an `ActorRef` plus start/terminate/introspection."""

    __slots__ = ()

    async def start_child(self, spec: ChildSpec, timeout: float | None = None) -> ActorRef:  # noqa: ASYNC109
        """Start a child from `spec` and return its ref once its init finished. Raises
        `MaxChildren` when full, `StartError` (naming the child id) if init fails.

        Always a cancel point. It is a request to the supervisor, handled after the requests
        queued before it; but when the supervisor is idle (parked on an empty mailbox, so it
        would handle this one next and nothing it does can interleave) and the child's init
        cannot suspend (no ``await`` in it), the start runs in the caller's task instead, in
        one synchronous step, with the same checks, table, errors and logs, and init in the
        supervisor's contextvars context (the child inherits it, as always). Such a start
        yields to the scheduler only every `YIELD_EVERY` times in a row, like a busy actor
        reading its mailbox: a task starting children in a loop never starves the others.
        """
        if not isinstance(spec, ChildSpec):
            raise InvalidSpec(f"start_child needs a ChildSpec, got {spec!r}")
        supervisor = self._actor
        if (
            self._mailbox._reader is not None
            and _init_cannot_suspend(spec.start.actor)
            and type(supervisor) is DynamicSupervisor
        ):
            # Counted before the work, so a start that fails (MaxChildren, StartError) counts
            # too: a task retrying in a loop still lets the children it waits for run.
            global _streak
            _streak += 1
            if _streak >= YIELD_EVERY:
                _streak = 0
                await trio.lowlevel.checkpoint()
            else:
                await trio.lowlevel.checkpoint_if_cancelled()
            task = self._task
            # Still idle? (A yield above lets others send it requests, or stop it.)
            if self._mailbox._reader is not None and task is not None:
                ref, failed = task.context.run(supervisor._start_child_now, spec)
                if failed is not None:
                    try:
                        await _fail_start(ref, failed)
                    except StartError as exc:
                        raise supervisor._start_failed(spec, exc) from _cause(exc)
                return ref
        result = await self.call(("start_child", spec), timeout=timeout)
        if type(result) is _CallError:
            raise result.error
        assert isinstance(result, ActorRef)
        return result

    async def terminate_child(self, ref: ActorRef, timeout: float | None = None) -> None:  # noqa: ASYNC109
        """Stop a child through its shutdown ladder and forget it (`UnknownChild` if not ours)."""
        await _request(self, ("terminate_child", ref), timeout)

    async def which_children(self, timeout: float | None = 5.0) -> list[ChildInfo]:  # noqa: ASYNC109
        """Every running child in start order."""
        result: list[ChildInfo] = await _request(self, ("which_children",), timeout)
        return result

    async def count_children(self, timeout: float | None = 5.0) -> ChildCounts:  # noqa: ASYNC109
        """How many children, running, supervisors and workers."""
        result: ChildCounts = await _request(self, ("count_children",), timeout)
        return result


DynamicSupervisor._ref_class = DynamicSupervisorRef


async def start_dynamic_supervisor(
    nursery: trio.Nursery,
    max_children: int | None = None,
    max_restarts: int = 3,
    max_seconds: float = 5,
    *,
    name: Hashable | None = None,
    registry: Registry | None = None,
) -> DynamicSupervisorRef:
    """Start an empty DynamicSupervisor in `nursery`."""
    _check_max(max_children)
    _check_limits(max_restarts, max_seconds)
    ref = await spawn(
        nursery,
        DynamicSupervisor,
        max_children,
        max_restarts,
        max_seconds,
        name=name,
        registry=registry,
    )
    assert isinstance(ref, DynamicSupervisorRef)
    return ref


def dynamic_supervisor_spec(
    id: Hashable,
    max_children: int | None = None,
    max_restarts: int = 3,
    max_seconds: float = 5,
    *,
    restart: Literal["permanent", "transient", "temporary"] = "permanent",
    shutdown: float | Literal["brutal_kill", "infinity"] = "infinity",
    name: Hashable | None = None,
    registry: Registry | None = None,
) -> ChildSpec:
    """A `ChildSpec` for a DynamicSupervisor nested under another supervisor."""
    _check_max(max_children)
    _check_limits(max_restarts, max_seconds)
    return ChildSpec(
        id=id,
        start=Start(
            DynamicSupervisor,
            (max_children, max_restarts, max_seconds),
            name=name,
            registry=registry,
        ),
        restart=restart,
        shutdown=shutdown,
        type="supervisor",
    )


@asynccontextmanager
async def open_dynamic_supervisor(
    max_children: int | None = None,
    max_restarts: int = 3,
    max_seconds: float = 5,
    *,
    name: Hashable | None = None,
    registry: Registry | None = None,
) -> AsyncIterator[DynamicSupervisorRef]:
    """``async with open_dynamic_supervisor() as sup:`` — scoped like `open_supervisor`."""
    async with _scoped(
        lambda nursery: start_dynamic_supervisor(
            nursery, max_children, max_restarts, max_seconds, name=name, registry=registry
        )
    ) as ref:
        yield ref
