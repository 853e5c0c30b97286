"""Fixtures for the ask-another server tests: a loopback simulated provider and a config for it."""

from __future__ import annotations

import contextlib
import os
import signal
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from ask_another.config import Config, DatabaseUrl
from ask_another.gateway import ProcessTransport, SharedTransport, ThreadTransport, Transport
from ask_another.simulator import Simulator

# A key shaped like a real one; the secrecy tests look for it everywhere.
FAKE_KEY = "sk-test-NEVER-SHOW-7d1e4c9a2b"


@pytest.fixture
def sim() -> Iterator[Simulator]:
    with Simulator.running() as running:
        yield running


@pytest.fixture
def make_config(sim: Simulator, tmp_path: Path) -> Callable[..., Config]:
    """A Config with `MODEL_SIM` (openai/m1 on the simulator) plus any extra variables."""
    def make(**extra: str) -> Config:
        env = {
            "ASK_ANOTHER_HOME": str(tmp_path / "home"),
            "MODEL_SIM": f"openai/m1;{FAKE_KEY};{sim.openai_base}",
            # In-memory servers run provider calls on the thread transport, whose litellm the
            # test process has imported already; the stdio tests run the server as clients do,
            # worker process and all (test_gateway.py runs every gateway test on both).
            "ASK_ANOTHER_GATEWAY_PROCESS": "0",
            **extra,
        }
        return Config.from_env(env)
    return make


MakeTransport = Callable[[Sequence[str]], Transport]


@pytest.fixture(scope="session")
def shared_worker_home() -> Iterator[Path]:
    """One home for every `shared` gateway test of this test process: each test's transport
    connects to the worker an earlier test started, as servers on one home do (a worker start
    is seconds of CPU). A short path (a unix socket's is at most 104-108 bytes); its worker is
    killed at the end rather than left to its idle exit."""
    with tempfile.TemporaryDirectory(prefix="aa-") as home:
        yield Path(home)
        for pid_file in (Path(home) / "gateway").glob("*.pid"):
            with contextlib.suppress(FileNotFoundError, ProcessLookupError, ValueError):
                os.kill(int(pid_file.read_text()), signal.SIGKILL)


@pytest.fixture(params=[
    pytest.param("thread"),
    pytest.param("process", marks=pytest.mark.slow),  # starts a worker process
    pytest.param("shared", marks=pytest.mark.slow),  # the session's detached shared worker
])
def transport(request: pytest.FixtureRequest) -> Iterator[MakeTransport]:
    """Each gateway test runs on every transport: `transport(secrets)` builds one."""
    if request.param == "thread":
        yield lambda secrets: ThreadTransport(secrets)
    elif request.param == "process":
        yield lambda secrets: ProcessTransport(secrets)
    else:
        home = request.getfixturevalue("shared_worker_home")
        # pytest names the running test in the environment, which is part of the worker's key.
        environ = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}
        yield lambda secrets: SharedTransport(home, secrets, idle_exit=600, environ=environ)


StoreTarget = Path | DatabaseUrl


@pytest.fixture(params=["sqlite", "postgres"])
def store_target(request: pytest.FixtureRequest, tmp_path: Path) -> StoreTarget:
    """Where a store test opens its database, once per backend: a fresh SQLite file, and a
    fresh database on the session's PostgreSQL server."""
    if request.param == "sqlite":
        return tmp_path / "home" / "ask-another.sqlite3"
    url = request.getfixturevalue("postgres_url")
    database = Config.from_env({"ASK_ANOTHER_DATABASE_URL": url}).database_url
    assert database is not None
    return database
