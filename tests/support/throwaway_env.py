"""A throwaway Python environment for a client this project's own environment cannot hold.

Agent frameworks and older MCP SDKs pin an MCP SDK of their own (strands-agents needs mcp < 2.2,
fastmcp 3 the 1.x line), so the tests that drive ask-another through them build an environment
with uv from the package registry (uv's cache makes later runs quick) and run a client script
with its Python. Without uv or the registry (offline) the test is skipped in one line.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest


def throwaway_python(tmp_path_factory: pytest.TempPathFactory, name: str,
                     *requirements: str) -> Path:
    """The Python of a new environment holding `requirements` (skips the test when it cannot
    be built: no uv, or no registry)."""
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip(f"uv is not on PATH: cannot build {name}'s own environment")
    venv = tmp_path_factory.mktemp(name) / "venv"
    made = subprocess.run([uv, "venv", "-q", "-p", sys.executable, str(venv)],
                          capture_output=True, text=True, timeout=120, check=False)
    if made.returncode != 0:
        pytest.skip(f"uv venv failed: {made.stderr.strip().splitlines()[-1:]}")
    python = venv / "bin" / "python"
    installed = subprocess.run([uv, "pip", "install", "-q", "-p", str(python), *requirements],
                               capture_output=True, text=True, timeout=600, check=False)
    if installed.returncode != 0:
        last = (installed.stderr.strip().splitlines() or ["no output"])[-1]
        pytest.skip(f"{' '.join(requirements)} could not be installed from the registry "
                    f"(offline?): {last}")
    return python
