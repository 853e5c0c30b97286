"""The official TypeScript MCP client (npm `@modelcontextprotocol/sdk`, pinned in
tests/ts/package-lock.json) against a real `serve --http`: a bearer token, the tool list, a
streamed completion with its progress, a wrong token refused.

The test installs the client itself: `npm ci` in tests/ts, once per run, when the locked version
is not installed there already (a fresh clone has no node_modules). Where npm cannot be used (no
node or npm, or `npm ci` fails, offline say) it skips with one line saying why.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio
from http_server import http_server
from typescript_client import TS, install_typescript_client

from ask_another.config import Config
from ask_another.server import build_server
from ask_another.server.auth import TokensFile
from ask_another.simulator import Reply, Simulator

pytestmark = pytest.mark.slow  # starts a real server process and node

FAKE_KEY = "sk-test-NEVER-SHOW-7d1e4c9a2b"


@pytest.fixture(scope="session")
def typescript_client() -> Path:
    """tests/ts with the locked client installed, or a skip saying why it cannot be."""
    why = install_typescript_client()
    if why is not None:
        pytest.skip(why)
    return TS


async def test_the_typescript_client_lists_tools_and_streams_a_completion(
        sim: Simulator, tmp_path: Path, typescript_client: Path):
    home = tmp_path / "home"
    env = {"ASK_ANOTHER_HOME": str(home), "MODEL_SIM": f"openai/m1;{FAKE_KEY};{sim.openai_base}"}
    token = TokensFile(home / "tokens.json").add("ts-user")
    tools = sorted(t.name for t in await build_server(Config.from_env(env)).list_tools())
    sim.script("m1", [Reply("Streamed to TypeScript, piece by piece.")])

    async with http_server(env, tmp_path / "stderr.log") as server:
        with trio.fail_after(60):
            done = await trio.run_process(["node", str(TS / "client.mjs"), server.url, token],
                                          cwd=TS, capture_stdout=True, capture_stderr=True,
                                          check=False)
    assert done.returncode == 0, done.stderr.decode()
    seen = json.loads(done.stdout.decode().strip().splitlines()[-1])
    assert seen["protocolVersion"] == "2025-11-25" and seen["sessionId"] is True
    assert seen["tools"] == tools
    assert seen["completion"]["isError"] is False
    assert seen["completion"]["text"].startswith("Streamed to TypeScript, piece by piece.")
    assert seen["progress"] == "Streamed to TypeScript, piece by piece."
    assert "invalid_token" in seen["wrongToken"], seen["wrongToken"]  # the 401's body
    assert sim.requests_for("m1")[-1].stream
