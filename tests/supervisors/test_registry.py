"""Registry: unique names, whereis, release on exit, naming at spawn time."""

from __future__ import annotations

import pytest
import trio
from actors_for_tests import Echo, FailingInit

from supervisors import ActorExited, InvalidSpec, NameTaken, Registry, StartError, spawn


async def test_name_at_spawn_and_whereis(nursery: trio.Nursery) -> None:
    registry = Registry()
    ref = await spawn(nursery, Echo, name=("job", "abc"), registry=registry)
    assert registry.whereis(("job", "abc")) is ref
    assert ("job", "abc") in registry and len(registry) == 1
    assert registry.whereis("nobody") is None


async def test_names_are_unique(nursery: trio.Nursery) -> None:
    registry = Registry()
    await spawn(nursery, Echo, name="db", registry=registry)
    with pytest.raises(NameTaken, match="'db' is already registered"):
        await spawn(nursery, Echo, name="db", registry=registry)


async def test_name_is_released_when_the_actor_exits(nursery: trio.Nursery) -> None:
    registry = Registry()
    ref = await spawn(nursery, Echo, name="db", registry=registry)
    ref.cast("crash")
    await ref.wait()
    assert registry.whereis("db") is None
    again = await spawn(nursery, Echo, name="db", registry=registry)
    assert registry.whereis("db") is again


async def test_name_is_released_when_init_fails(nursery: trio.Nursery) -> None:
    registry = Registry()
    with pytest.raises(StartError):
        await spawn(nursery, FailingInit, name="db", registry=registry)
    assert registry.names() == []


async def test_register_and_unregister_an_existing_actor(nursery: trio.Nursery) -> None:
    registry = Registry()
    ref = await spawn(nursery, Echo)
    registry.register("late", ref)
    registry.register("alias", ref)
    assert registry.names() == ["late", "alias"]
    registry.unregister("alias")
    await ref.stop()
    assert registry.names() == []
    with pytest.raises(ActorExited):
        registry.register("ghost", ref)


async def test_registry_without_a_name_is_refused(nursery: trio.Nursery) -> None:
    with pytest.raises(InvalidSpec, match="needs a name"):
        await spawn(nursery, Echo, registry=Registry())
