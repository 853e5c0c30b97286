"""Settings shared by every test: nothing here may reach the network or the user's own state."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

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
