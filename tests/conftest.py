"""Settings shared by every test: nothing here may reach the network or the user's own state."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from pycache import PYCACHE

# Before the rest is imported: this process's bytecode, and that of every process it starts with
# its environment (the gateway workers of in-process gateways, the first starts), goes where its
# servers' does (tests/support/pycache.py): compiled once per machine, not at every start.
sys.pycache_prefix = os.environ["PYTHONPYCACHEPREFIX"] = str(PYCACHE)
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

from postgres_server import PostgresServer, own_server  # noqa: E402

# Its hooks mark and watch the tests that start processes (`slow`).
from slow_marks import pytest_collection_modifyitems, pytest_runtest_call  # noqa: E402, F401

# litellm fetches its model cost map at import unless told to use the bundled copy.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto`: two workers per core (at most 8). The whole suite spends about half its time
    waiting on the servers, workers and browsers it starts (leases, restarts, the 4 s page
    refresh): on 2 cores, 4 workers ran it in 391 s where 2 took 508 s, with no more CPU."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS", "").isdigit():
        return int(os.environ["PYTEST_XDIST_AUTO_NUM_WORKERS"])
    return min(2 * len(os.sched_getaffinity(0)), 8)


def _shared_workers(under: Path) -> set[int]:
    """The shared gateway workers (gateway/_shared.py) whose socket lies under `under`, and the
    job hosts (jobhost.py) of homes under it, from /proc: the ones this test run started
    (another run on the machine has its own)."""
    found = set()
    worker = b"\0--shared\0" + os.fsencode(under) + b"/"
    host = b"\0" + os.fsencode(under) + b"/"
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                command = (entry / "cmdline").read_bytes()
                if (b"ask_another.gateway._worker" in command and worker in command) or (
                        b"\0ask_another.jobhost\0" in command and host in command):
                    found.add(int(entry.name))
    return found


@pytest.fixture(autouse=True)
def _no_shared_worker_outlives_its_test(tmp_path_factory: pytest.TempPathFactory
                                        ) -> Iterator[None]:
    """The stdio server and the people commands share one detached gateway worker per home by
    default, which would otherwise wait out its idle time (15 minutes) after each test, and
    start its job host, which would wait out its linger (60 s). Homes
    under the run's temporary directory are this run's; the tests that make homes elsewhere
    stop their workers themselves."""
    base = tmp_path_factory.getbasetemp()
    before = _shared_workers(base)
    yield
    for pid in _shared_workers(base) - before:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A real PostgreSQL server for the whole session (tests/support/postgres_server.py), started
    the first time a test asks for it; skipped where PostgreSQL is not installed (.ci/run
    installs it)."""
    with own_server() as server:
        yield server


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> str:
    """The URL of a new, empty database of this test's own on the session's server."""
    return postgres_server.new_database()
