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

from collections.abc import AsyncIterator, Hashable, Iterable
from contextlib import asynccontextmanager
from typing import Any, Literal, final

import trio

from ._call import Caller
from ._errors import InvalidSpec, MaxChildren, StartError, UnknownChild
from ._log import debug_logger, logger
from ._reasons import Down, ExitReason
from ._ref import ActorRef
from ._registry import Registry
from ._spawn import DEFAULT_MAILBOX_SIZE, check_start
from ._spec import ChildSpec, Start
from ._supervisor import (
    ChildCounts,
    ChildInfo,
    SupervisorRefBase,
    _CallError,
    _check_limits,
    _Child,
    _count,
    _request,
    _scoped,
    _should_restart,
    _SupervisorBase,
)
from ._threads import check_nursery

_PRUNE_MIN = 64
"""The table of children is first pruned of exited temporary children at this size."""


class DynamicSupervisor(_SupervisorBase):
    _children: dict[ActorRef, _Child]
    _max_children: int | None
    _prune_at: int

    async def init(
        self,
        max_children: int | None = None,
        max_restarts: int = 3,
        max_seconds: float = 5,
        extra_arguments: tuple[Any, ...] = (),
    ) -> None:
        _check_max(max_children)
        _check_extra(extra_arguments)
        self._extra_arguments = extra_arguments
        self._children = {}
        await self._setup(max_restarts, max_seconds)
        self._max_children = max_children
        self._prune_at = _PRUNE_MIN

    def _prune(self) -> dict[ActorRef, _Child]:
        """Drop the temporary children that have exited (they are not monitored); monitored
        ones stay until their `Down` is handled, which decides their restart."""
        children = self._children
        gone = [
            ref
            for ref, child in children.items()
            if not ref.alive and child.spec.restart == "temporary"
        ]
        for ref in gone:
            del children[ref]
        self._prune_at = max(_PRUNE_MIN, 2 * len(children))
        return children

    def _live_children(self) -> Iterable[ActorRef]:
        return list(self._children)

    async def terminate(self, reason: ExitReason) -> None:
        children = list(self._prune().values())
        async with trio.open_nursery() as nursery:
            for child in reversed(children):
                nursery.start_soon(self._shutdown, child)
        self._children = {}

    async def handle_call(self, msg: Any, caller: Caller) -> Any:
        # A bad request is answered with the error as a value: it must not crash the supervisor.
        try:
            match msg:
                case ("start_child", ChildSpec() as spec):
                    return await self._start_child(spec)
                case ("terminate_child", ActorRef() as ref):
                    found = self._prune().get(ref)
                    if found is None:
                        raise UnknownChild(repr(self.ref), ref)
                    await self._shutdown(found)
                    self._children.pop(ref, None)
                    self._forget(found)
                    return None
                case ("which_children",):
                    return [child.info() for child in self._prune().values()]
                case ("count_children",):
                    return _count(list(self._prune().values()))
        except (UnknownChild, StartError, MaxChildren, InvalidSpec) as exc:
            return _CallError(exc)
        return self._unknown_request(msg)

    def _make_room(self) -> None:
        """Raise `MaxChildren` if full (exited temporary children do not count)."""
        children = self._children
        if len(children) >= self._prune_at:
            self._prune()
        limit = self._max_children
        if limit is not None and len(children) >= limit and len(self._prune()) >= limit:
            raise MaxChildren(repr(self.ref), limit)

    async def _start_child(self, spec: ChildSpec) -> ActorRef | None:
        if spec.significant:
            raise InvalidSpec(
                f"child {spec.id!r} is significant, but a DynamicSupervisor has no auto_shutdown "
                "(as Elixir's); use a static supervisor"
            )
        self._make_room()
        child = self._adopt(spec)
        try:
            ref = await self._start(child, monitor=spec.restart != "temporary")
        except StartError:
            self._forget(child)
            raise
        if ref is None:  # init returned IGNORE: nothing started, nothing kept
            self._forget(child)
            return None
        self._children[ref] = child
        _log_started(self.ref, spec, ref)
        return ref

    async def handle_info(self, msg: Any) -> None:
        if isinstance(msg, Down):
            child = self._children.get(msg.ref)
            if child is not None and child.monitor is msg.monitor:
                del self._children[msg.ref]
                child.ref = None
                child.monitor = None
                child.status = "stopped"
                self._child_exited_with(child, msg.reason)
                if _should_restart(child.spec, msg.reason) and not self._children_cancelled():
                    await self._restart_child(child)
                else:
                    self._forget(child)
        else:
            await super().handle_info(msg)

    async def _restart_child(self, child: _Child) -> None:
        while True:
            if not self._allow_restart():
                self._give_up(child.spec.id)
                return
            child.status = "restarting"
            try:
                ref = await self._start(child, restart=True)
            except StartError as exc:
                logger().error(
                    "supervisor.restart_failed",
                    supervisor=repr(self.ref),
                    child=repr(child.spec.id),
                    error=str(exc),
                )
                continue
            child.restarts += 1
            if ref is None:  # init returned IGNORE: as OTP, the child is gone
                self._forget(child)
                return
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
    # A dynamic supervisor may start thousands of children: a debug event, built only when
    # the application configured structlog (the fallback drops debug events).
    log = debug_logger()
    if log is not None:
        log.debug(
            "supervisor.child_started",
            supervisor=repr(supervisor),
            child=repr(spec.id),
            ref=repr(ref),
        )


def _check_extra(extra_arguments: object) -> None:
    if type(extra_arguments) is not tuple:
        raise InvalidSpec(f"extra_arguments must be a tuple, got {extra_arguments!r}")


def _check_max(max_children: object) -> None:
    if max_children is not None and (type(max_children) is not int or max_children < 0):
        raise InvalidSpec(f"max_children must be None or an int >= 0, got {max_children!r}")


@final
class DynamicSupervisorRef(SupervisorRefBase):
    """The ref of a DynamicSupervisor: an `ActorRef` plus start/terminate/introspection."""

    __slots__ = ()

    async def start_child(self, spec: ChildSpec, timeout: float | None = None) -> ActorRef | None:  # noqa: ASYNC109
        """Start a child from `spec` and return its ref once its init finished; None if its init
        returned `IGNORE` (nothing is started or kept, and it is not an error). The
        supervisor's `extra_arguments` come before the spec's own args. Raises `MaxChildren`
        when full, `StartError` (naming the child id) if init fails, `InvalidSpec` for a
        significant spec.

        A request to the supervisor, handled in order with the others. A burst is queued: when
        the supervisor's mailbox is full the request waits for room (within `timeout`) rather
        than fail. Cancellation: a caller already cancelled sends nothing; one cancelled while
        waiting abandons the reply, and the child may still start."""
        if not isinstance(spec, ChildSpec):
            raise InvalidSpec(f"start_child needs a ChildSpec, got {spec!r}")
        result: ActorRef | None = await _request(self, ("start_child", spec), timeout)
        return result

    async def terminate_child(self, ref: ActorRef, timeout: float | None = None) -> None:  # noqa: ASYNC109
        """Stop a child through its shutdown ladder and forget it (`UnknownChild` if not ours).
        Anything but an `ActorRef` (say the None `registry.whereis()` returns for a name no
        actor holds) raises `InvalidSpec` here, before any request is sent."""
        if not isinstance(ref, ActorRef):
            hint = " (registry.whereis() returns None for a name no actor holds)"
            raise InvalidSpec(
                f"terminate_child needs the child's ActorRef, got {ref!r}"
                + (hint if ref is None else "")
            )
        await _request(self, ("terminate_child", ref), timeout)

    async def which_children(self, timeout: float | None = None) -> list[ChildInfo]:  # noqa: ASYNC109
        """Every running child in start order (no timeout by default, as in OTP)."""
        result: list[ChildInfo] = await _request(self, ("which_children",), timeout)
        return result

    async def count_children(self, timeout: float | None = None) -> ChildCounts:  # noqa: ASYNC109
        """How many children, running, supervisors and workers (no timeout by default)."""
        result: ChildCounts = await _request(self, ("count_children",), timeout)
        return result


DynamicSupervisor._ref_class = DynamicSupervisorRef


async def start_dynamic_supervisor(
    nursery: trio.Nursery,
    max_children: int | None = None,
    max_restarts: int = 3,
    max_seconds: float = 5,
    *,
    extra_arguments: tuple[Any, ...] = (),
    name: Hashable | None = None,
    registry: Registry | None = None,
    mailbox_size: int = DEFAULT_MAILBOX_SIZE,
) -> DynamicSupervisorRef:
    """Start an empty DynamicSupervisor in `nursery`. `mailbox_size` bounds its own mailbox;
    `start_child` and its other requests wait for room rather than fail. `extra_arguments`
    (Elixir's): a tuple put before the args of every child it starts, e.g. a shared service
    handle, so that specs need not carry it."""
    from ._spawn import start_actor

    _check_max(max_children)
    _check_extra(extra_arguments)
    _check_limits(max_restarts, max_seconds)
    check_start(DynamicSupervisor, name, registry, mailbox_size)
    check_nursery(nursery, "start_dynamic_supervisor")
    ref = await start_actor(
        nursery,
        DynamicSupervisor,
        (max_children, max_restarts, max_seconds, extra_arguments),
        {},
        name,
        registry,
        mailbox_size,
    )
    assert isinstance(ref, DynamicSupervisorRef)
    return ref


def dynamic_supervisor_spec(
    id: Hashable,
    max_children: int | None = None,
    max_restarts: int = 3,
    max_seconds: float = 5,
    *,
    extra_arguments: tuple[Any, ...] = (),
    restart: Literal["permanent", "transient", "temporary"] = "permanent",
    shutdown: float | Literal["brutal_kill", "infinity"] = "infinity",
    name: Hashable | None = None,
    registry: Registry | None = None,
    mailbox_size: int = DEFAULT_MAILBOX_SIZE,
) -> ChildSpec:
    """A `ChildSpec` for a DynamicSupervisor nested under another supervisor."""
    _check_max(max_children)
    _check_extra(extra_arguments)
    _check_limits(max_restarts, max_seconds)
    return ChildSpec(
        id=id,
        start=Start(
            DynamicSupervisor,
            (max_children, max_restarts, max_seconds, extra_arguments),
            name=name,
            registry=registry,
            mailbox_size=mailbox_size,
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
    extra_arguments: tuple[Any, ...] = (),
    name: Hashable | None = None,
    registry: Registry | None = None,
    mailbox_size: int = DEFAULT_MAILBOX_SIZE,
) -> AsyncIterator[DynamicSupervisorRef]:
    """``async with open_dynamic_supervisor() as sup:`` — scoped like `open_supervisor` (an
    exception in the block comes out as itself; a cancelled scope shuts the children down)."""
    async with _scoped(
        lambda nursery: start_dynamic_supervisor(
            nursery,
            max_children,
            max_restarts,
            max_seconds,
            extra_arguments=extra_arguments,
            name=name,
            registry=registry,
            mailbox_size=mailbox_size,
        )
    ) as ref:
        yield ref
