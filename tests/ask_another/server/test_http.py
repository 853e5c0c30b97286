"""The real thing over HTTP: `python -m ask_another serve --http` (hypercorn on trio), an
`mcp.Client` over Streamable HTTP in both protocol eras, bearer tokens from the tokens file,
and the loopback simulator as the provider.

Each test starts one server process (its gateway worker imports litellm: seconds), so each runs
a session of scenarios in order.
"""

from __future__ import annotations

import json
import socket
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from http_server import http_client_for, http_server, process_env, run_cli
from loopback_pages import Page, PageServer
from mcp.types import ElicitResult
from postgres_server import PostgresServer
from tool_results import call, text_of

from ask_another.config import Config
from ask_another.server import build_server
from ask_another.server.auth import TokensFile
from ask_another.simulator import Reply, Simulator, ToolCall, ToolCalls

pytestmark = pytest.mark.slow  # starts real server processes

FAKE_KEY = "sk-test-NEVER-SHOW-7d1e4c9a2b"
ERAS = (("auto", "2026-07-28"), ("legacy", "2025-11-25"))


def server_env(sim: Simulator, home: Path, **extra: str) -> dict[str, str]:
    return {"ASK_ANOTHER_HOME": str(home), "MODEL_SIM": f"openai/m1;{FAKE_KEY};{sim.openai_base}",
            **extra}


async def post(url: str, token: str | None, body: dict[str, Any], **extra: str
               ) -> httpx.Response:
    headers = {"Accept": "application/json, text/event-stream",
               "Content-Type": "application/json", "MCP-Protocol-Version": "2025-11-25", **extra}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    async with httpx.AsyncClient() as http:
        return await http.post(url, headers=headers, json=body)


INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                         "clientInfo": {"name": "raw", "version": "0"}}}


async def test_http_serves_every_tool_in_both_eras_behind_tokens(sim: Simulator, tmp_path: Path):
    home = tmp_path / "home"
    # Behind a reverse proxy on the same machine: the public Host is let through.
    env = server_env(sim, home, ASK_ANOTHER_PUBLIC_URL="https://ask.example.com/mcp")
    tokens = TokensFile(home / "tokens.json")
    alice = tokens.add("alice")
    stdio_tools = {t.name for t in await build_server(Config.from_env(env)).list_tools()}

    pieces: list[str] = []

    async def on_progress(_done: float, _total: float | None, message: str | None) -> None:
        pieces.append(message or "")

    async with http_server(env, tmp_path / "stderr.log") as server:
        assert "1 token(s)" in server.log()
        for mode, era in ERAS:
            async with http_client_for(server.url, alice, mode) as client:
                assert client.protocol_version == era
                assert {t.name for t in (await client.list_tools()).tools} == stdio_tools

                error, text = await call(client, "completion", model="sim", prompt=f"2+2 {era}")
                assert not error and text.startswith(f"[simulated m1] answer to: 2+2 {era}")

                # Streamed from the simulator, and to the client as progress notifications.
                sim.script("m1", [Reply("Streamed over SSE, piece by piece, to the client.")])
                pieces.clear()
                result = await client.call_tool("completion", {"model": "sim", "prompt": "s"},
                                                progress_callback=on_progress)
                assert text_of(result).startswith("Streamed over SSE, piece by piece")
                assert "".join(pieces) == "Streamed over SSE, piece by piece, to the client."

                error, text = await call(client, "feedback", issue=f"http {era}")
                assert not error and "recorded" in text

        # No token, a wrong token: the SDK's 401 with its WWW-Authenticate challenge.
        for token in (None, "aa_not-a-token", alice + "x"):
            refused = await post(server.url, token, INITIALIZE)
            assert refused.status_code == 401, (token, refused.text)
            challenge = refused.headers["www-authenticate"]
            assert challenge.startswith("Bearer ") and 'error="invalid_token"' in challenge
        assert (await post(server.url, alice, INITIALIZE)).status_code == 200
        async with httpx.AsyncClient() as http:  # a load balancer's check needs no token
            health = await http.get(server.base + "/health")
        assert health.status_code == 200 and health.json() == {"status": "ok"}
        # DNS-rebinding protection on a loopback host: the proxy's public Host passes, another
        # name (a rebound DNS entry in a browser) does not.
        assert (await post(server.url, alice, INITIALIZE,
                           Host="ask.example.com")).status_code == 200
        rebound = await post(server.url, alice, INITIALIZE, Host="evil.example")
        assert rebound.status_code == 421, rebound.text

        # The file is read again when it changes: a new token works, a removed one is refused,
        # without a restart.
        bob = TokensFile(home / "tokens.json").add("bob")
        assert (await post(server.url, bob, INITIALIZE)).status_code == 200
        TokensFile(home / "tokens.json").remove("alice")
        assert (await post(server.url, alice, INITIALIZE)).status_code == 401

    log = server.log()
    assert alice not in log and bob not in log and FAKE_KEY not in log
    with sqlite3.connect(home / "ask-another.sqlite3") as conn:
        assert sorted(conn.execute("SELECT issue FROM feedback").fetchall()) == [
            ("http 2025-11-25",), ("http 2026-07-28",)]


ARTICLE = ("<html><body><article><h1>Tides</h1><p>" + "The moon pulls the sea. " * 40
           + "</p></article></body></html>").encode()


async def test_http_elicitation_asks_the_client_in_both_eras(sim: Simulator, tmp_path: Path,
                                                            nursery: Any):
    pages = await PageServer().start(nursery)
    home = tmp_path / "home"
    env = server_env(sim, home, ASK_ANOTHER_PERMISSIONS="read=ask",
                     ASK_ANOTHER_ALLOW_HOSTS="127.0.0.1")
    token = TokensFile(home / "tokens.json").add("alice")
    asked: list[str] = []
    progress: list[str] = []

    async def on_elicit(_ctx: Any, params: Any) -> ElicitResult:
        asked.append(params.message)
        return ElicitResult(action="accept", content={"decision": "allow"})

    async def on_progress(_done: float, _total: float | None, message: str | None) -> None:
        progress.append(message or "")

    async with http_server(env, tmp_path / "stderr.log") as server:
        for mode, era in ERAS:
            asked.clear()
            progress.clear()
            url = pages.add(f"/tides-{era}", Page(ARTICLE))
            sim.script("m1", [ToolCalls([ToolCall("read_article", {"url": url}, id="call-a")]),
                              Reply(f"The report ({era}): the moon pulls the sea.")])
            async with http_client_for(server.url, token, mode,
                                       elicitation_callback=on_elicit) as client:
                assert client.protocol_version == era
                result = await client.call_tool(
                    "start_research", {"model": "sim", "query": "tides?", "method": "agent",
                                       "timeout": 60}, progress_callback=on_progress)
            text = text_of(result)
            assert not result.is_error, text
            assert json.loads(text)["report"] == f"The report ({era}): the moon pulls the sea."
            assert len(asked) == 1 and "read_article" in asked[0] and "call-a" in asked[0]
            assert [r.target for r in pages.requests if r.target == f"/tides-{era}"]
            assert any("(call-a)" in p and "completed" in p for p in progress), progress


def test_serve_options_without_http_are_refused_not_ignored(tmp_path: Path):
    # `serve --port 8765` served stdio and ignored the port.
    done = run_cli({"ASK_ANOTHER_HOME": str(tmp_path)}, "serve", "--port", "8765")
    assert done.returncode == 2
    assert "--port is for --http only" in done.stderr and "add --http" in done.stderr


def test_a_home_that_is_a_file_is_one_line_at_serve_http(tmp_path: Path):
    # The tokens file under it was stat'ed unguarded: NotADirectoryError, a traceback.
    home = tmp_path / "a-file"
    home.write_text("not a directory")
    done = run_cli({"ASK_ANOTHER_HOME": str(home)}, "serve", "--http", "--port", "0")
    assert done.returncode == 1
    assert done.stderr.startswith(f"the tokens file {home / 'tokens.json'} cannot be read: ")
    assert "Traceback" not in done.stderr


async def test_token_commands_and_refusals_are_one_line(tmp_path: Path):
    home = tmp_path / "home"
    env = {"ASK_ANOTHER_HOME": str(home)}

    # No tokens at all: serve --http says what to run, before binding anything.
    refused = run_cli(env, "serve", "--http", "--port", "0")
    assert refused.returncode == 1
    assert "run `ask-another token add NAME`" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1 and "Traceback" not in refused.stderr
    # ... also on a port that is taken (the README's simulator once sat on serve's default):
    # "address already in use" hid what to run.
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        refused = run_cli(env, "serve", "--http", "--port", str(taken.getsockname()[1]))
    assert refused.returncode == 1
    assert "run `ask-another token add NAME`" in refused.stderr, refused.stderr
    assert "cannot listen" not in refused.stderr

    # --no-auth only on loopback.
    refused = run_cli(env, "serve", "--http", "--host", "0.0.0.0", "--port", "0", "--no-auth")
    assert refused.returncode == 1
    assert refused.stderr.startswith("--no-auth is allowed only on a loopback address")
    assert len(refused.stderr.strip().splitlines()) == 1

    added = run_cli(env, "token", "add", "alice", "--admin")
    assert added.returncode == 0, added.stderr
    token = added.stdout.strip()
    assert token.startswith("aa_") and len(token) > 40
    assert "shown only this once" in added.stderr
    assert run_cli(env, "token", "add", "bob").returncode == 0

    tokens_file = home / "tokens.json"
    assert tokens_file.stat().st_mode & 0o777 == 0o600
    stored = tokens_file.read_text()
    assert token not in stored  # only its hash
    users = TokensFile(tokens_file).users()
    assert [(u.name, u.admin) for u in users] == [("alice", True), ("bob", False)]

    listed = run_cli(env, "token", "list")
    assert listed.stdout.splitlines()[0].startswith("alice (admin)")
    assert listed.stdout.splitlines()[1].startswith("bob ")
    assert token not in listed.stdout

    again = run_cli(env, "token", "add", "alice")
    assert again.returncode == 1 and "alice already has a token" in again.stderr
    bad = run_cli(env, "token", "add", "no spaces")
    assert bad.returncode == 1 and "is not a user name" in bad.stderr
    assert "Traceback" not in again.stderr + bad.stderr

    assert run_cli(env, "token", "remove", "alice").returncode == 0
    assert [u.name for u in TokensFile(tokens_file).users()] == ["bob"]
    gone = run_cli(env, "token", "remove", "alice")
    assert gone.returncode == 1 and "no token for 'alice'" in gone.stderr

    # OAuth off loopback needs the public URL (the tokens' audience, the metadata's resource).
    refused = run_cli({**env, "ASK_ANOTHER_OAUTH_ISSUER": "https://login.example"}, "serve",
                      "--http", "--host", "0.0.0.0", "--port", "0")
    assert refused.returncode == 1
    assert refused.stderr.startswith("ASK_ANOTHER_OAUTH_ISSUER needs ASK_ANOTHER_PUBLIC_URL")

    # Another user's tokens file, named by ASK_ANOTHER_TOKENS_FILE.
    elsewhere = tmp_path / "team" / "tokens.json"
    assert run_cli({**env, "ASK_ANOTHER_TOKENS_FILE": str(elsewhere)}, "token", "add",
                   "carol").returncode == 0
    assert [u.name for u in TokensFile(elsewhere).users()] == ["carol"]


def test_the_token_commands_import_no_mcp_sdk(tmp_path: Path):
    # A `token` command reads and writes one JSON file: importing the SDK with the verifiers
    # (about a second of CPU) made each take over a second.
    code = ("import sys\n"
            "from ask_another.cli import main\n"
            "assert main(['token', 'add', 'dora']) == 0\n"
            "assert main(['token', 'list']) == 0\n"
            "print(sorted(m for m in ('mcp', 'starlette', 'hypercorn') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=process_env({"ASK_ANOTHER_HOME": str(tmp_path / "home")}),
                          timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "[]"
    assert [u.name for u in TokensFile(tmp_path / "home" / "tokens.json").users()] == ["dora"]


async def test_no_auth_on_loopback_serves_the_local_user_with_the_homes_token(
        sim: Simulator, tmp_path: Path):
    # Not without any token: every local account reaches a loopback port (test_hostile_local.py
    # shows another one refused). The token is in the home, readable by the local user only.
    env = server_env(sim, tmp_path / "home")  # no tokens file at all
    async with http_server(env, tmp_path / "stderr.log", "--no-auth") as server:
        token_file = tmp_path / "home" / "local-token"
        assert f"the local user's token in {token_file}" in server.log()
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        token = token_file.read_text().strip()
        async with http_client_for(server.url, token) as client:
            error, text = await call(client, "completion", model="sim", prompt="local")
            assert not error and "answer to: local" in text
            error, usage = await call(client, "usage")
            assert not error and "By user" not in usage  # the local user's own calls
        assert (await post(server.url, None, INITIALIZE)).status_code == 401
    # A restart keeps the token: a client's configuration stays valid.
    async with http_server(env, tmp_path / "stderr.log", "--no-auth") as server:
        assert token_file.read_text().strip() == token


def test_serve_http_whose_runtime_cannot_open_exits_with_one_line(sim: Simulator,
                                                                   tmp_path: Path):
    # It served 503 forever instead, even once the cause was gone (a database not up yet), and
    # a service manager never restarted it: the process had not exited.
    home = tmp_path / "home"
    env = server_env(sim, home)
    database = Config.from_env(env).database_path
    database.parent.mkdir(parents=True)
    database.write_bytes(b"this is not a database, just some bytes" * 100)
    done = run_cli(env, "serve", "--http", "--port", "0", "--no-auth")
    assert done.returncode == 1, done
    assert done.stderr.splitlines()[-1].startswith(f"cannot open the database {database}")
    assert "http.listening" not in done.stderr
    assert "Traceback" not in done.stderr  # the crash reports name the error without one


def test_serve_http_on_a_postgresql_it_cannot_use_exits_without_showing_the_password(
        sim: Simulator, tmp_path: Path, postgres_server: PostgresServer):
    # A refused login or a missing database is one line naming the server (password masked);
    # a node never falls back to a private SQLite file.
    url = f"postgresql://postgres:s3cret-PW@127.0.0.1:{postgres_server.port}/no_such_database"
    env = server_env(sim, tmp_path / "home", ASK_ANOTHER_DATABASE_URL=url)
    done = run_cli(env, "serve", "--http", "--port", "0", "--no-auth")
    assert done.returncode == 1, done
    shown = f"postgresql://postgres:****@127.0.0.1:{postgres_server.port}/no_such_database"
    assert done.stderr.splitlines()[-1].startswith(f"cannot connect to the database {shown}: ")
    assert 'database "no_such_database" does not exist' in done.stderr
    assert "s3cret-PW" not in done.stderr + done.stdout and "Traceback" not in done.stderr
    assert not (tmp_path / "home" / "ask-another.sqlite3").exists()
