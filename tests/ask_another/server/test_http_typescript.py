"""The official TypeScript MCP client (npm `@modelcontextprotocol/sdk`, pinned in
tests/ts/package-lock.json) against a real `serve --http`: a bearer token, the tool list, a
streamed completion with its progress, a wrong token refused.

The test installs the client itself: `npm ci` in tests/ts, once per run, when the locked version
is not installed there already (a fresh clone has no node_modules). Where npm cannot be used (no
node or npm, or `npm ci` fails, offline say) it skips with one line saying why.
"""

from __future__ import annotations

import fcntl
import json
import shutil
import subprocess
from pathlib import Path

import pytest
import trio
from http_server import http_server
from stdio_server import REPO

from ask_another.config import Config
from ask_another.server import build_server
from ask_another.server.auth import TokensFile
from ask_another.simulator import Reply, Simulator

pytestmark = pytest.mark.slow  # starts a real server process and node

TS = REPO / "tests" / "ts"
FAKE_KEY = "sk-test-NEVER-SHOW-7d1e4c9a2b"


SDK = TS / "node_modules" / "@modelcontextprotocol" / "sdk"


def _installed_is_locked() -> bool:
    locked = json.loads((TS / "package-lock.json").read_text())
    wanted = locked["packages"]["node_modules/@modelcontextprotocol/sdk"]["version"]
    installed = SDK / "package.json"
    return installed.is_file() and json.loads(installed.read_text()).get("version") == wanted


@pytest.fixture(scope="session")
def typescript_client() -> Path:
    """tests/ts with the locked client installed (`npm ci` once, under a lock: pytest-xdist
    workers may ask at once), or a skip saying why it cannot be."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node and npm are not installed: the TypeScript client cannot run")
    with (TS / ".npm-ci.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not _installed_is_locked():
            done = subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"],
                                  cwd=TS, capture_output=True, text=True, timeout=300,
                                  check=False)
            if done.returncode != 0 or not _installed_is_locked():
                last = (done.stderr.strip().splitlines() or ["no output"])[-1]
                pytest.skip(f"`npm ci` in tests/ts failed (exit {done.returncode}: {last}): "
                            "the TypeScript client cannot be installed here")
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
