"""Constants and helpers shared by the research tests (imported by module name)."""

from __future__ import annotations

import sys
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import IO, Any

from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

GEMINI = "gemini/deep-research-pro-preview-12-2025"
GEMINI_AGENT = GEMINI.split("/", 1)[1]
PPLX = "perplexity/sonar-deep-research"
FAKE_KEY = "sk-test-RESEARCH-9f8e7d"


def research_env(sim_url: str, home: Path, poll: float = 0.05) -> dict[str, str]:
    """The environment of a server with a Gemini agent and a Perplexity model on the simulator."""
    return {
        "ASK_ANOTHER_HOME": str(home),
        "ASK_ANOTHER_POLL_SECONDS": str(poll),
        "MODEL_GDR": f"{GEMINI};{FAKE_KEY};{sim_url}",
        "MODEL_PPLX": f"{PPLX};{FAKE_KEY};{sim_url}/v1",
        "MODEL_SIM": f"openai/m1;{FAKE_KEY};{sim_url}/v1",
    }


REPO = Path(__file__).resolve().parents[3]
PYCACHE = Path(tempfile.gettempdir()) / "ask-another-test-pycache"


def server_parameters(env: dict[str, str]) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "ask_another"],
        env={"PYTHONPYCACHEPREFIX": str(PYCACHE), **env},
        cwd=str(REPO),
    )


@asynccontextmanager
async def stdio_client_for(env: dict[str, str], stderr: IO[str]) -> AsyncIterator[Client]:
    """A client connected to a real `python -m ask_another` subprocess over stdio."""
    async with Client(stdio_client(server_parameters(env), errlog=stderr),
                      read_timeout_seconds=60) as client:
        yield client


def text_of(result: Any) -> str:
    return "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")
