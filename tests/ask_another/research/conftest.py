"""Fixtures for the research tests: the simulator, a config with research models, a runtime
(on each store backend)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from research_helpers import research_env

from ask_another.config import Config
from ask_another.research import ResearchJobs
from ask_another.runtime import Runtime, open_runtime
from ask_another.simulator import Simulator


@pytest.fixture
def research_config(sim: Simulator, tmp_path: Path) -> Callable[..., Config]:
    def make(**extra: str) -> Config:
        # In-process tests keep litellm in a thread (as make_config does): a worker process per
        # test costs seconds each; the stdio tests use the worker, the default.
        return Config.from_env({**research_env(sim.url, tmp_path / "home"),
                                "ASK_ANOTHER_GATEWAY_PROCESS": "0", **extra})
    return make


@pytest.fixture(params=["sqlite", "postgres"])
def store_env(request: pytest.FixtureRequest) -> dict[str, str]:
    """The runtime's store, once per backend: the SQLite file under the home, and a fresh
    database on the session's PostgreSQL server."""
    if request.param == "sqlite":
        return {}
    return {"ASK_ANOTHER_DATABASE_URL": request.getfixturevalue("postgres_url")}


@pytest.fixture
async def runtime(research_config: Callable[..., Config],
                  store_env: dict[str, str]) -> AsyncIterator[Runtime]:
    async with open_runtime(research_config(**store_env), prewarm_after=0) as rt:
        yield rt


@pytest.fixture
def jobs(runtime: Runtime) -> ResearchJobs:
    return runtime.jobs
