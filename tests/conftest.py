"""Settings shared by every test: nothing here may reach the network or the user's own state."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from postgres_server import PostgresServer, own_server

# litellm fetches its model cost map at import unless told to use the bundled copy.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


# `uv run pytest -m "not slow"` stays under a minute only if every test that starts a process
# (a server, the gateway worker, the CLI: each imports litellm, seconds apiece) is marked slow.
# Files mark themselves (`pytestmark = pytest.mark.slow`, or per test); this marks the whole of a
# new file that starts processes and says nothing.
_STARTS_A_PROCESS = ("stdio_client_for(", "stdio_client(", "subprocess.run(",
                     "subprocess.Popen(", "open_process(", "run_process(",
                     "gateway_process=True")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    starts: dict[Path, bool] = {}
    for item in items:
        path = item.path
        if path not in starts:
            text = path.read_text() if path.suffix == ".py" else ""
            starts[path] = ("mark.slow" not in text
                            and any(sign in text for sign in _STARTS_A_PROCESS))
        if starts[path] and item.get_closest_marker("slow") is None:
            item.add_marker(pytest.mark.slow)


def _shared_workers(under: Path) -> set[int]:
    """The shared gateway workers (gateway/_shared.py) whose socket lies under `under`, from
    /proc: the ones this test run started (another run on the machine has its own)."""
    found = set()
    needle = b"\0--shared\0" + os.fsencode(under) + b"/"
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                command = (entry / "cmdline").read_bytes()
                if b"ask_another.gateway._worker" in command and needle in command:
                    found.add(int(entry.name))
    return found


@pytest.fixture(autouse=True)
def _no_shared_worker_outlives_its_test(tmp_path_factory: pytest.TempPathFactory
                                        ) -> Iterator[None]:
    """The stdio server and the people commands share one detached gateway worker per home by
    default, which would otherwise wait out its idle time (15 minutes) after each test. Homes
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
