"""A child start that fails outside `init` (the class's constructor raises, a restart's does)
is that start's failure, as OTP wraps every start in its supervisor: `StartError` to whoever
asked, a failed restart retried within the intensity, and never a crash of the supervisor or
of its siblings."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest
import trio
import trio.testing
from actors_for_tests import Echo, Journal

from supervisors import (
    GIVE_UP_REASON,
    Actor,
    ActorExited,
    Crash,
    InvalidSpec,
    Registry,
    Start,
    StartError,
    child_spec,
    open_dynamic_supervisor,
    open_supervisor,
    spawn,
    start_supervisor,
)


class Fragile(Echo):
    """An actor whose constructor raises once `broken` holds something (set by the test)."""

    broken: ClassVar[list[str]] = []  # a switch the tests flip, read by the constructor

    def __init__(self) -> None:
        if self.broken:
            raise OSError(self.broken[0])


@pytest.fixture
def broken() -> Any:
    Fragile.broken = []
    yield Fragile.broken
    Fragile.broken = []


async def test_spawn_of_a_class_whose_constructor_raises_is_a_start_error(
    nursery: trio.Nursery, broken: list[str]
) -> None:
    broken.append("no socket")
    with pytest.raises(StartError, match="no socket") as raised:
        await spawn(nursery, Fragile)
    assert isinstance(raised.value.reason, Crash)
    assert isinstance(raised.value.__cause__, OSError)


async def test_start_child_whose_constructor_raises_fails_only_that_start(
    autojump_clock: trio.testing.MockClock, broken: list[str]
) -> None:
    journal: Journal = []
    async with open_supervisor([child_spec(Echo, journal, "sibling", id="sibling")]) as sup:
        broken.append("no socket")
        with pytest.raises(StartError, match="no socket") as raised:
            await sup.start_child(child_spec(Fragile, id="fragile"))
        assert raised.value.child == "fragile"
        (sibling,) = await sup.which_children()
        assert sibling.status == "running" and sibling.ref is not None
        assert await sibling.ref.call("still here") == "still here"
    async with open_dynamic_supervisor() as dynamic:
        with pytest.raises(StartError, match="no socket"):
            await dynamic.start_child(child_spec(Fragile, id="fragile"))
        assert (await dynamic.count_children()).specs == 0
        assert dynamic.alive


async def test_a_restart_whose_constructor_raises_is_retried_then_the_supervisor_gives_up(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, broken: list[str]
) -> None:
    journal: Journal = []
    children = [
        child_spec(Echo, journal, "sibling", id="sibling"),
        child_spec(Fragile, journal, "fragile", id="fragile"),
    ]
    sup = await start_supervisor(nursery, children, max_restarts=2)
    _, fragile = await sup.which_children()
    assert fragile.ref is not None
    broken.append("no socket")
    with pytest.raises(ActorExited):
        await fragile.ref.call("crash")
    # OTP: each failed restart counts against the intensity; past it the supervisor exits
    # shutdown and stops the siblings gracefully (their terminate runs), none crashed.
    assert await sup.wait() == GIVE_UP_REASON
    assert ("stop", "sibling") in journal


async def test_a_restart_whose_constructor_raises_once_is_retried_and_succeeds(
    autojump_clock: trio.testing.MockClock, broken: list[str]
) -> None:
    class Once(Echo):
        failures: ClassVar[list[str]] = ["no socket"]

        def __init__(self) -> None:
            if broken and self.failures:
                raise OSError(self.failures.pop())

    async with open_supervisor([child_spec(Once, id="once")], max_restarts=3) as sup:
        (child,) = await sup.which_children()
        assert child.ref is not None
        broken.append("on")
        with pytest.raises(ActorExited):
            await child.ref.call("crash")
        await trio.testing.wait_all_tasks_blocked()
        (child,) = await sup.which_children()
        assert child.status == "running" and child.restarts == 1
        assert child.ref is not None and await child.ref.call("back") == "back"


async def test_an_unhashable_registry_name_is_refused_where_it_is_given(
    nursery: trio.Nursery,
) -> None:
    registry = Registry()
    with pytest.raises(InvalidSpec, match="hashable"):
        Start(Actor, name=["not", "hashable"], registry=registry)
    with pytest.raises(InvalidSpec, match="hashable"):
        await spawn(nursery, Actor, name=["not", "hashable"], registry=registry)
    assert len(registry) == 0


# -- mistakes refused where they are made --------------------------------------------------------


def test_a_hook_without_async_is_refused_at_class_definition() -> None:
    with pytest.raises(TypeError, match=r"Sync\.handle_call must be a coroutine"):

        class Sync(Actor):
            def handle_call(self, msg: Any, caller: Any) -> Any:  # type: ignore[override]
                return msg


def test_a_constructor_needing_arguments_is_refused_when_the_spec_is_made() -> None:
    class Needy(Actor):
        def __init__(self, db: str) -> None:
            self.db = db

    with pytest.raises(InvalidSpec, match=r"Needy\.__init__ needs arguments.*async def init"):
        child_spec(Needy, "app.db")
    with pytest.raises(InvalidSpec, match="needs arguments"):
        Start(Needy)

    class Fine(Actor):
        def __init__(self, db: str = "app.db") -> None:
            self.db = db

    assert child_spec(Fine).start.actor is Fine


async def test_spawn_of_a_constructor_needing_arguments_is_a_start_error(
    nursery: trio.Nursery,
) -> None:
    class Needy(Actor):
        def __init__(self, db: str) -> None:
            self.db = db

    with pytest.raises(StartError, match=r"Needy\(\) raised") as raised:
        await spawn(nursery, Needy)
    assert isinstance(raised.value.__cause__, TypeError)
