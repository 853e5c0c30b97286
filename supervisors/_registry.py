"""Unique names for actors: `whereis(name)`, bound at spawn time, released when the actor exits."""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from typing import TYPE_CHECKING, final

from ._errors import NameTaken

if TYPE_CHECKING:
    from ._actor import ActorRef


@final
class Registry:
    """A namespace of unique actor names. Any hashable works as a name, e.g. ``("job", "abc")``.

    Pass it to `spawn(..., name=..., registry=...)` (or put both in a child spec): the name is bound
    before `init` runs, released automatically when the actor exits, and bound again to the new
    actor when a supervisor restarts the child. Not thread-safe: use it from trio tasks.
    """

    __slots__ = ("_names",)

    def __init__(self) -> None:
        self._names: dict[Hashable, ActorRef] = {}

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
        ref._bind_name(self, name)
        self._names[name] = ref

    def unregister(self, name: Hashable) -> None:
        """Release `name` (no error if it is not bound)."""
        ref = self._names.pop(name, None)
        if ref is not None:
            ref._unbind_name(self, name)

    def _release(self, name: Hashable, ref: ActorRef) -> None:
        if self._names.get(name) is ref:
            del self._names[name]

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
