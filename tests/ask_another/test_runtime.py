"""The runtime: store and gateway as supervised actors; handles survive a child's restart."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from ask_another.config import Config
from ask_another.errors import InvalidArgument, ModelNotAllowed
from ask_another.runtime import open_runtime
from ask_another.simulator import Simulator
from supervisors import Shutdown


async def test_store_and_gateway_are_children_of_the_root_supervisor(
    make_config: Callable[..., Config],
):
    async with open_runtime(make_config(), prewarm_after=None) as runtime:
        children = {c.id: c for c in await runtime.supervisor.which_children()}
        assert {"store", "gateway"} <= set(children)
        assert all(children[name].status == "running" for name in ("store", "gateway"))


async def test_a_restarted_gateway_and_store_are_picked_up(
    make_config: Callable[..., Config], sim: Simulator
):
    async with open_runtime(make_config(), prewarm_after=0) as runtime:
        first = await runtime.gateway()
        assert (await runtime.complete("sim", "one")).text.endswith("one")
        old_db = await runtime.database()
        await runtime.supervisor.terminate_child("gateway")
        await runtime.supervisor.restart_child("gateway")
        await runtime.supervisor.terminate_child("store")
        await runtime.supervisor.restart_child("store")
        assert first.closed and old_db.closed
        assert (await runtime.complete("sim", "two")).text.endswith("two")
        assert await runtime.gateway() is not first
        record = await runtime.add_feedback("after a restart")
        assert record.id == 1


async def test_a_caller_waits_for_a_restarting_store_instead_of_failing(
    make_config: Callable[..., Config],
):
    async with open_runtime(make_config(), prewarm_after=None) as runtime:
        old = await runtime.database()
        store = runtime.registry.whereis("store")
        assert store is not None
        # It exits on its own (not terminate_child, after which a call by name is noproc at
        # once, as OTP's): its supervisor restarts it, and the caller waits for the new one.
        await store.stop(Shutdown("restart"))
        new = await runtime.database()
        assert old.closed and new is not old and not new.closed


async def test_complete_checks_its_arguments(make_config: Callable[..., Config], sim: Simulator):
    async with open_runtime(make_config(), prewarm_after=None) as runtime:
        with pytest.raises(InvalidArgument, match="timeout must be"):
            await runtime.complete("sim", "x", timeout=0)
        with pytest.raises(InvalidArgument, match="prompt is empty"):
            await runtime.complete("sim", "  ")
        with pytest.raises(ModelNotAllowed):
            await runtime.complete("gpt-9", "x")
    assert sim.requests == []
