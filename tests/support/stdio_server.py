"""Start `python -m ask_another` as a real subprocess and connect an `mcp.Client` over stdio."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import IO, Any

from deadlines import generous
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from pycache import PYCACHE

REPO = Path(__file__).resolve().parents[2]


def server_parameters(env: dict[str, str], *, probe: bool = False) -> StdioServerParameters:
    """`probe`: run the server under modules_probe.py (its imported modules on SIGUSR1)."""
    return StdioServerParameters(
        command=sys.executable,
        args=[str(REPO / "tests" / "support" / "modules_probe.py")] if probe
        else ["-m", "ask_another"],
        env={"PYTHONPYCACHEPREFIX": str(PYCACHE), **env},
        cwd=str(REPO),
    )


@asynccontextmanager
async def stdio_client_for(env: dict[str, str], stderr: IO[str], mode: str = "auto", *,
                           probe: bool = False, **client_options: Any) -> AsyncIterator[Client]:
    """A connected client; the server's stderr goes to `stderr` (a real file). `client_options`
    go to `mcp.Client` (an `elicitation_callback`, say); `probe`, see `server_parameters`."""
    async with Client(stdio_client(server_parameters(env, probe=probe), errlog=stderr), mode=mode,
                      read_timeout_seconds=generous(60), **client_options) as client:
        yield client
