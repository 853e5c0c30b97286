"""Unique names for actors: `whereis(name)`, bound at spawn time, released when the actor exits,
and `call(name, msg)`, which waits for the name's next holder while a child restarts.

A supervisor claims the names its restartable children register under, for as long as it keeps
their specs and lives; `call` waits only for a claimed name, and fails at once (`NoProcess`,
OTP's noproc) for one no actor holds and no supervisor will start."""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterator
from typing import TYPE_CHECKING, Any, final

import trio

from ._errors import CallTimeout, NameTaken, NoProcess

if TYPE_CHECKING:
    from ._exited import Exited
    from ._process import Process
    from ._ref import ActorRef


@final
class Registry:
    """A namespace of unique actor names. Any hashable works as a name, e.g. ``("job", "abc")``.

    Pass it to `spawn(..., name=..., registry=...)` (or put both in a child spec): the name is bound
    before `init` runs, released automatically when the actor exits, and bound again to the new
    actor when a supervisor restarts the child. Not thread-safe: use it from trio tasks.
    """

    __slots__ = ("_bound", "_claims", "_names")

    def __init__(self) -> None:
        self._names: dict[Hashable, ActorRef] = {}
        self._bound: trio.lowlevel.ParkingLot | None = None
        self._claims: dict[Hashable, list[Process | Exited]] = {}

    def _claimed(self, name: Hashable) -> bool:
        """Whether a live supervisor will (re)start an actor under `name`."""
        owners = self._claims.get(name)
        if owners is None:
            return False
        owners[:] = [owner for owner in owners if owner.reason is None]
        if not owners:
            del self._claims[name]
        return bool(owners)

    def whereis(self, name: Hashable) -> ActorRef | None:
        """The live actor bound to `name`, or None."""
        return self._names.get(name)

    def register(self, name: Hashable, ref: ActorRef) -> None:
        """Bind `name` to a live actor; raises `NameTaken` if another live actor holds it.

        Raises `ActorExited` if `ref` has already exited (a dead actor cannot hold a name).
        """
        holder = self._names.get(name)
        if holder is not None and holder is not ref:
            raise NameTaken(name, repr(holder))
        from ._ref import process_of

        process_of(ref).bind_name(self, name)
        self._names[name] = ref
        if self._bound:
            self._bound.unpark_all()

    def unregister(self, name: Hashable) -> None:
        """Release `name` (no error if it is not bound)."""
        ref = self._names.pop(name, None)
        if ref is not None:
            from ._ref import process_of

            process_of(ref).unbind_name(self, name)

    async def call(self, name: Hashable, msg: Any, timeout: float | None = 5.0) -> Any:  # noqa: ASYNC109
        """`call` the actor bound to `name`, waiting (within `timeout`) for the name to be bound
        to a live actor: while its supervisor restarts it, the call goes to the new actor.

        A message is never sent twice: once it is queued, the call has the rules of
        `ActorRef.call` (`ActorExited` if that actor exits before replying). Raises `CallTimeout`
        if no reply (or no actor under `name`) within `timeout`. A name no actor holds and no
        live supervisor claims (one has never seen it, or its supervisor is gone) raises
        `NoProcess` at once (OTP's noproc), also when it becomes so while the call waits for
        a holder to come back.
        """
        from ._call import call, check_timeout
        from ._ref import process_of
        from ._threads import in_trio_run, refuse_foreign

        if not in_trio_run():
            raise refuse_foreign("Registry.call")
        check_timeout("call", timeout)
        deadline = math.inf if timeout is None else trio.current_time() + timeout
        with trio.CancelScope(deadline=deadline):
            while True:
                ref = self._names.get(name)
                if ref is not None and process_of(ref).accepting:
                    return await call(process_of(ref), msg, None, wait_for_room=False)
                if ref is None and not self._claimed(name):
                    raise NoProcess(name)
                # Unbound, or bound to an actor that is exiting: wait for the next binding.
                if self._bound is None:
                    self._bound = trio.lowlevel.ParkingLot()
                await self._bound.park()
        raise CallTimeout(repr(name), 0.0 if timeout is None else timeout)

    def names(self) -> list[Hashable]:
        """Every bound name, in binding order."""
        return list(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def __contains__(self, name: object) -> bool:
        return name in self._names

    def __iter__(self) -> Iterator[Hashable]:
        return iter(list(self._names))

    def __repr__(self) -> str:
        return f"<Registry with {len(self._names)} names>"


def release_name(registry: Registry, name: Hashable, ref: ActorRef) -> None:
    """Drop `name` if `ref` still holds it (the actor exited)."""
    if registry._names.get(name) is ref:
        del registry._names[name]
        if registry._bound and name not in registry._claims:
            registry._bound.unpark_all()  # a waiting call learns there is no one to wait for


def claim_name(registry: Registry, name: Hashable, owner: Process | Exited) -> None:
    """`owner` (a supervisor) will start actors under `name`: `call` waits for them."""
    owners = registry._claims.setdefault(name, [])
    owners[:] = [p for p in owners if p.reason is None]
    if owner not in owners:
        owners.append(owner)


def unclaim_name(registry: Registry, name: Hashable, owner: Process | Exited) -> None:
    """`owner` will no longer start actors under `name`. A call already waiting for the name
    (parked after its holder exited, before the supervisor heard of the exit) learns it then:
    without the wake-up it waited its whole timeout for a holder nobody would start."""
    owners = registry._claims.get(name)
    if owners is not None and owner in owners:
        owners.remove(owner)
        if not owners:
            del registry._claims[name]
            if registry._bound and name not in registry._names:
                registry._bound.unpark_all()
