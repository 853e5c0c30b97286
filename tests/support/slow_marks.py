"""Which tests are `slow`: those that start processes (a server, the gateway worker, the CLI,
a browser: each imports litellm or more, seconds apiece). `uv run pytest -m "not slow"` stays
under a minute only if every one of them is marked. tests/conftest.py takes both hooks.
"""

from __future__ import annotations

import subprocess
import traceback
from collections.abc import Iterator
from pathlib import Path

import pytest

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


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """A test outside `slow` that starts a process fails, naming it: the file scan above misses
    a process started through a helper (the twenty first starts of test_concurrent_first_starts
    ran in the fast subset, 14 s of CPU that also starved the other worker). Only the test's own
    call is watched: a session fixture (the PostgreSQL server) may start one for everybody, and
    the standard library's `platform` runs `uname -p` once for the first litellm import."""
    if item.get_closest_marker("slow") is not None:
        return (yield)
    started: list[str] = []
    execute = subprocess.Popen._execute_child  # type: ignore[attr-defined]

    def record(self: subprocess.Popen[bytes], args: object, *rest: object) -> None:
        if not any(Path(frame.filename).name == "platform.py"
                   for frame in traceback.extract_stack()):
            started.append(str(args))
        execute(self, args, *rest)

    subprocess.Popen._execute_child = record  # type: ignore[attr-defined]
    try:
        result = yield
    finally:
        subprocess.Popen._execute_child = execute  # type: ignore[attr-defined]
    if started:
        pytest.fail(f"this test starts a process ({started[0][:200]}): mark it slow", pytrace=False)
    return result
