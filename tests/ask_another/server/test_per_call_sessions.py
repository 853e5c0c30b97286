"""Per-call HTTP sessions are ordinary use (issue 38, item 2), against a real `serve --http`:
the session bound counts the sessions a user has open at once, not those opened, so a client
that opens one per tool call and closes it with DELETE (langchain-mcp-adapters' default) makes
100 calls in a minute; a client that holds many open is still bounded, and told why in the
status line and when to retry.

langchain-mcp-adapters needs mcp 1.x, so its test builds a throwaway environment with uv as
test_tasks_strands.py does, and is skipped (one line) without uv or the registry."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import trio
from http_server import http_client_for, http_server
from stdio_server import REPO
from tool_results import call

from ask_another.server.auth import TokensFile
from ask_another.server.http import SESSIONS_PER_USER

pytestmark = pytest.mark.slow  # a server process

LANGCHAIN = "langchain-mcp-adapters==0.3.2"
CALLS = 100


def server_env(home: Path) -> dict[str, str]:
    # The default rate (120 tool calls a minute per user) is on: it is what turns the session
    # bound on, and the 100 calls are within it.
    return {"ASK_ANOTHER_HOME": str(home)}


async def open_session(url: str, token: str) -> httpx.Response:
    """A handshake-era client's first request: `initialize`, no session id, no version header."""
    async with httpx.AsyncClient() as http:
        return await http.post(url, headers={
            "Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream"},
            json={"jsonrpc": "2.0", "id": 1, "method": "initialize",
                  "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                             "clientInfo": {"name": "raw", "version": "0"}}})


async def test_a_hundred_sessions_of_one_call_each_pass(tmp_path: Path):
    # Before, at most 10 new sessions a minute per user, closed ones counted: the 11th
    # session's initialize was refused 429.
    home = tmp_path / "home"
    token = TokensFile(home / "tokens.json").add("alice")
    async with http_server(server_env(home), tmp_path / "server.log") as server:
        with trio.fail_after(300):
            for _ in range(CALLS):
                # legacy: initialize, the call, then DELETE as the client closes
                async with http_client_for(server.url, token, "legacy") as client:
                    error, text = await call(client, "list_models")
                    assert not error, text
        log = server.log()
    # More sessions than a user may hold open at once: each closed one freed its slot.
    assert CALLS > SESSIONS_PER_USER
    assert "http.too_many_sessions" not in log


async def test_sessions_held_open_are_bounded_and_a_closed_one_frees_its_slot(tmp_path: Path):
    home = tmp_path / "home"
    tokens = TokensFile(home / "tokens.json")
    alice, bob = tokens.add("alice"), tokens.add("bob")
    async with http_server(server_env(home), tmp_path / "server.log") as server:
        opened = []
        for _ in range(SESSIONS_PER_USER):
            answer = await open_session(server.url, bob)
            assert answer.status_code == 200 and "mcp-session-id" in answer.headers, answer.text
            opened.append(answer.headers["mcp-session-id"])
        refused = await open_session(server.url, bob)
        assert refused.status_code == 429, refused.text
        # The reason is in the status line (what clients show), and when to retry.
        assert refused.reason_phrase == (f"too many open sessions: at most {SESSIONS_PER_USER} "
                                         "at once per user; close one (DELETE) or retry when "
                                         "one has ended"), refused.reason_phrase
        assert refused.json()["error"]["message"] == refused.reason_phrase
        assert refused.headers["retry-after"] == "60"
        assert "x-ask-another-reason" not in refused.headers
        assert "mcp-session-id" not in refused.headers
        # Alice's sessions are hers to open.
        async with http_client_for(server.url, alice, "legacy") as client:
            error, text = await call(client, "list_models")
            assert not error, text
        # Bob closes one: its slot is free again.
        async with httpx.AsyncClient() as http:
            closed = await http.delete(server.url, headers={
                "Authorization": f"Bearer {bob}", "Mcp-Session-Id": opened[0],
                "MCP-Protocol-Version": "2025-11-25"})
        assert closed.status_code == 200, closed.text
        again = await open_session(server.url, bob)
        assert again.status_code == 200, again.text
        assert (await open_session(server.url, bob)).status_code == 429


@pytest.fixture(scope="module")
def langchain_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Python of a throwaway environment holding `LANGCHAIN` (skips when it cannot be
    built: no uv, or no registry)."""
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not on PATH: cannot build langchain-mcp-adapters' own environment")
    venv = tmp_path_factory.mktemp("langchain") / "venv"
    made = subprocess.run([uv, "venv", "-q", "-p", sys.executable, str(venv)],
                          capture_output=True, text=True, timeout=120, check=False)
    if made.returncode != 0:
        pytest.skip(f"uv venv failed: {made.stderr.strip().splitlines()[-1:]}")
    python = venv / "bin" / "python"
    installed = subprocess.run([uv, "pip", "install", "-q", "-p", str(python), LANGCHAIN],
                               capture_output=True, text=True, timeout=600, check=False)
    if installed.returncode != 0:
        last = (installed.stderr.strip().splitlines() or ["no output"])[-1]
        pytest.skip(f"{LANGCHAIN} could not be installed from the registry (offline?): {last}")
    return python


async def test_langchain_mcp_adapters_makes_a_hundred_calls_a_session_each(
        langchain_python: Path, tmp_path: Path):
    home = tmp_path / "home"
    token = TokensFile(home / "tokens.json").add("alice")
    async with http_server(server_env(home), tmp_path / "server.log") as server:
        ran = await trio.run_process(
            [str(langchain_python), str(REPO / "tests" / "langchain" / "per_call_client.py"),
             server.url, token, str(CALLS)], capture_stdout=True, capture_stderr=True,
            check=False)
    assert ran.returncode == 0, ran.stderr.decode()[-3000:]
    seen = json.loads(ran.stdout.decode().strip().splitlines()[-1])
    # Before: the 10th call of the minute was refused 429 (get_tools' session was the first).
    assert seen == {"answered": CALLS, "error": None, "seconds": seen["seconds"]}, seen
