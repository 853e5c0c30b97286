"""Fixtures for the simulator tests: one simulator for the session, cleared for each test.

One simulator (one port) for every test keeps litellm to one cached HTTP client per API: a new
api_base per test made litellm cache, evict and drop clients without closing their sockets.
"""

from __future__ import annotations

import asyncio
import gc
import warnings
from collections.abc import Iterator
from types import ModuleType

import pytest

from ask_another.simulator import Simulator


@pytest.fixture(scope="session")
def shared_sim() -> Iterator[Simulator]:
    with Simulator.running() as running:
        yield running


@pytest.fixture
def sim(shared_sim: Simulator) -> Iterator[Simulator]:
    shared_sim.clear()
    shared_sim.latency = 0.0
    yield shared_sim
    shared_sim.clear()


@pytest.fixture(scope="session")
def litellm() -> Iterator[ModuleType]:
    import litellm as module

    # Its exception banner goes to stdout otherwise.
    module.suppress_debug_info = True
    # litellm's sync service logger calls asyncio.get_event_loop() on the calling thread, which
    # creates a loop there and never closes it; once dropped, its GC fails whichever test is
    # running. Give it one we own and close.
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    yield module
    asyncio.set_event_loop(None)
    loop.close()
    # litellm's sync API leaves cached HTTP clients and a spare asyncio loop behind (which ones
    # depends on the mix of calls). Collect them here, where they are known to be litellm's,
    # rather than letting pytest's end-of-session GC report them as our leaks.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        module.in_memory_llm_clients_cache.flush_cache()
        gc.collect()
