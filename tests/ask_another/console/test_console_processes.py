"""The console as people start it: `ask-another console` (a one-time link on stdout, Ctrl-C
leaves nothing running) and `serve --http` (the console at /console on the same listener,
logging in with a token of the tokens file)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
from http_server import http_client_for, http_server, process_env
from issuer import AuthorizationServer
from mcp.types import ElicitResult
from raw_stdio import raw_stdio
from stdio_server import REPO
from tool_results import call

from ask_another.server.auth import TokensFile
from ask_another.simulator import Reply, Simulator, ToolCall, ToolCalls

pytestmark = pytest.mark.slow  # starts real server processes

LINK = re.compile(r"(http://127\.0\.0\.1:\d+)/console/login/once\?code=\S+")


def children_of(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


async def test_console_prints_a_one_time_link_serves_the_home_and_ctrl_c_leaves_nothing(
    tmp_path: Path
):
    env = process_env({"ASK_ANOTHER_HOME": str(tmp_path / "home")})
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", "ask_another", "console", "--no-browser"],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
        cwd=REPO)
    try:
        assert process.stdout is not None
        text = ""
        with trio.fail_after(60):
            while not LINK.search(text):
                chunk = await process.stdout.receive_some()
                assert chunk, f"console exited before printing its link: {text!r}"
                text += chunk.decode()
        found = LINK.search(text)
        assert found is not None
        async with httpx.AsyncClient(base_url=found.group(1), follow_redirects=True) as client:
            first = await client.get(found.group(0))  # follows to the jobs page
            assert first.status_code == 200 and "Research jobs" in first.text
            assert "local user (admin)" in first.text
            client.cookies.clear()
            again = await client.get(found.group(0))
            assert again.status_code == 403 and "has been used" in again.text
        process.send_signal(signal.SIGINT)
        with trio.fail_after(30):
            assert await process.wait() == 0  # stopped as asked, not a failure
        assert children_of(process.pid) == []
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def test_serve_http_serves_the_console_behind_its_tokens(tmp_path: Path):
    home = tmp_path / "home"
    token = TokensFile(home / "tokens.json").add("alice")
    root = TokensFile(home / "tokens.json").add("root", admin=True)
    async with http_server({"ASK_ANOTHER_HOME": str(home)}, tmp_path / "stderr.log") as server, \
            httpx.AsyncClient(base_url=server.base) as client:
        assert (await client.get("/console/jobs")).status_code == 303
        page = await client.post("/console/login", data={"token": token},
                                 headers={"Origin": server.base}, follow_redirects=True)
        assert page.status_code == 200 and "alice" in page.text
        # Its key is kept in the home, for the owner only: sessions outlive a restart.
        assert os.stat(home / "console.key").st_mode & 0o777 == 0o600
        # A login posted from another site is refused.
        client.cookies.clear()
        other = await client.post("/console/login", data={"token": token},
                                  headers={"Origin": "https://evil.example"})
        assert other.status_code == 403 and "set-cookie" not in other.headers

        # /metrics: an admin's bearer token only.
        assert (await client.get("/metrics")).status_code == 401
        headers = {"Authorization": f"Bearer {token}"}
        assert (await client.get("/metrics", headers=headers)).status_code == 403
        metrics = await client.get("/metrics", headers={"Authorization": f"Bearer {root}"})
        assert metrics.status_code == 200
        assert metrics.headers["content-type"].startswith("text/plain; version=0.0.4")
        assert 'ask_another_process_restarts{process="gateway"} 0.0' in metrics.text


async def test_an_open_pages_refreshes_keep_its_connection(tmp_path: Path):
    # A refresh on a new connection costs the node three times one on a kept-alive connection:
    # at the pace the page's script is given (data-poll-ms), each refresh must come before the
    # listener's keep-alive closes the connection the last one used. (Pages polled every 5 s,
    # against a 5 s keep-alive: every refresh reconnected.) The client keeps idle connections
    # as a browser does (Chromium: up to 5 minutes), so what closes one is the server.
    home = tmp_path / "home"
    token = TokensFile(home / "tokens.json").add("alice")
    limits = httpx.Limits(keepalive_expiry=300)
    async with http_server({"ASK_ANOTHER_HOME": str(home)}, tmp_path / "stderr.log") as server, \
            httpx.AsyncClient(base_url=server.base, limits=limits) as client:
        page = await client.post("/console/login", data={"token": token},
                                 headers={"Origin": server.base}, follow_redirects=True)
        assert page.status_code == 200
        found = re.search(r'data-poll-ms="(\d+)"', page.text)
        assert found, page.text
        pace = int(found.group(1)) / 1000
        ports = []
        for _ in range(3):
            # What the script does: the next refresh `pace` seconds after the last answer.
            await trio.sleep(pace)
            live = await client.get("/console/jobs?part=live")
            assert live.status_code == 200
            ports.append(live.extensions["network_stream"].get_extra_info("client_addr")[1])
        assert len(set(ports)) == 1, ports


async def test_an_elicited_question_on_serve_http_carries_its_approval_link(
    sim: Simulator, tmp_path: Path
):
    home = tmp_path / "home"
    token = TokensFile(home / "tokens.json").add("alice")
    env = {"ASK_ANOTHER_HOME": str(home), "MODEL_SIM": f"openai/m1;sk-test-LINK;{sim.openai_base}",
           "ASK_ANOTHER_PERMISSIONS": "read=ask", "ASK_ANOTHER_CONFIRM_USD": "1000"}
    asked: list[str] = []

    async def allow(_ctx: Any, params: Any) -> ElicitResult:
        asked.append(params.message)
        return ElicitResult(action="accept", content={"decision": "allow"})

    sim.script("m1", [ToolCalls([ToolCall("read_article", {"url": "http://127.0.0.1:9/x"},
                                          id="call-1")]), Reply("allowed by elicitation")])
    async with http_server(env, tmp_path / "stderr.log") as server, \
            http_client_for(server.url, token, "legacy", elicitation_callback=allow) as client:
        error, text = await call(client, "start_research", model="sim", query="q",
                                 method="agent", timeout=120)
        assert not error and "allowed by elicitation" in text, text
    (message,) = asked
    assert re.search(rf"Or answer it at {re.escape(server.base)}/console/approvals/"
                     r"r-[0-9a-f]{10}/call-1$", message), message


@asynccontextmanager
async def console_on(env: dict[str, str]) -> AsyncIterator[tuple[str, str]]:
    """A real `ask-another console --no-browser`: (its base URL, its one-time login link)."""
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", "ask_another", "console", "--no-browser"],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        env=process_env(env), cwd=REPO)
    try:
        assert process.stdout is not None
        text = ""
        with trio.fail_after(60):
            while not (found := LINK.search(text)):
                chunk = await process.stdout.receive_some()
                assert chunk, f"console exited before printing its link: {text!r}"
                text += chunk.decode()
        yield found.group(1), found.group(0)
    finally:
        process.kill()
        await process.wait()


async def test_a_client_that_takes_links_not_forms_is_sent_the_approval_page_and_moves_on(
    sim: Simulator, tmp_path: Path
):
    """A 2025-11-25 client declaring `elicitation: {url: {}}` (no forms) on a home where
    `ask-another console` runs: the question comes as a URL elicitation of its approval page,
    the person answers there, the client is told it is complete and the call ends with the
    report."""
    env = {"ASK_ANOTHER_HOME": str(tmp_path / "home"),
           "MODEL_SIM": f"openai/m1;sk-test-URL;{sim.openai_base}",
           "ASK_ANOTHER_PERMISSIONS": "read=ask", "ASK_ANOTHER_CONFIRM_USD": "1000"}
    sim.script("m1", [ToolCalls([ToolCall("read_article", {"url": "http://127.0.0.1:9/x"},
                                          id="call-1")]), Reply("allowed in the console")])
    asked: dict[str, Any] = {}
    elicited = trio.Event()

    async def on_request(method: str, params: dict[str, Any]) -> dict[str, Any]:
        assert method == "elicitation/create" and not asked, (method, params)
        asked.update(params)
        elicited.set()
        return {"action": "accept"}  # the person opens the page

    result: dict[str, Any] = {}
    async with console_on(env) as (base, link):
        with (tmp_path / "stdio.log").open("w") as err:
            async with raw_stdio(env, err, capabilities={"elicitation": {"url": {}}},
                                 on_request=on_request) as rpc, trio.open_nursery() as nursery:

                async def start() -> None:
                    result.update(await rpc.request("tools/call", {
                        "name": "start_research", "arguments": {
                            "model": "sim", "query": "q", "method": "agent", "timeout": 120}},
                        seconds=150))

                nursery.start_soon(start)
                with trio.fail_after(60):
                    await elicited.wait()
                assert asked["mode"] == "url" and "requestedSchema" not in asked, asked
                assert re.fullmatch(rf"{re.escape(base)}/console/approvals/r-[0-9a-f]{{10}}"
                                    r"/call-1", asked["url"]), asked
                assert "read_article" in asked["message"]
                async with httpx.AsyncClient(base_url=base) as web:
                    await web.get(link, follow_redirects=True)  # the console's login
                    page = await web.get(asked["url"])
                    assert page.status_code == 200, page.text
                    form = re.search(r'name="csrf" value="([^"]+)"', page.text)
                    assert form, page.text
                    answered = await web.post(asked["url"], data={
                        "answer": "allow", "csrf": form.group(1)}, headers={"Origin": base})
                    assert answered.status_code == 303, answered.text
                with trio.fail_after(60):
                    await rpc.notified("notifications/elicitation/complete",
                                       elicitationId=asked["elicitationId"])
    assert not result.get("isError") and "allowed in the console" in \
        result["content"][0]["text"], result


async def test_an_oauth_login_goes_through_the_issuer_and_back(tmp_path: Path):
    issuer = AuthorizationServer()
    env = {"ASK_ANOTHER_HOME": str(tmp_path / "home"), "ASK_ANOTHER_OAUTH_ISSUER": issuer.url,
           "ASK_ANOTHER_OAUTH_CONSOLE_CLIENT_ID": "ask-another-console"}
    try:
        async with http_server(env, tmp_path / "stderr.log") as server, \
                httpx.AsyncClient(base_url=server.base) as browser:
            login = await browser.get("/console/login")
            assert f"Log in with {issuer.url}" in login.text, login.text
            begun = await browser.get("/console/login/oauth?next=/console/approvals")
            assert begun.status_code == 303, begun.text
            to_issuer = begun.headers["location"]
            assert to_issuer.startswith(f"{issuer.url}/authorize?")
            async with httpx.AsyncClient() as elsewhere:  # the issuer's own pages
                back = await elsewhere.get(to_issuer)
            asked = issuer.authorized[-1]
            assert (asked["client_id"], asked["code_challenge_method"], asked["resource"]) == (
                "ask-another-console", "S256", server.url)
            assert asked["redirect_uri"] == f"{server.base}/console/login/oauth/callback"
            assert back.status_code == 302
            came_back = await browser.get(back.headers["location"])
            assert came_back.status_code == 200, came_back.text
            assert 'content="0;url=/console/approvals"' in came_back.text
            page = await browser.get("/console/approvals")
            assert page.status_code == 200 and "carol" in page.text, page.text
            # The same return again (its state cookie is gone, its code used): refused.
            again = await browser.get(back.headers["location"])
            assert again.status_code == 400 and "did not finish" in again.text
            # A return this browser never began (another's state) is refused too.
            browser.cookies.clear()
            await browser.get("/console/login/oauth")
            forged = await browser.get("/console/login/oauth/callback?code=code-9&state=other")
            assert forged.status_code == 400
            assert (await browser.get("/console/jobs")).status_code == 303  # not logged in
    finally:
        issuer.close()


async def test_a_foreign_host_is_refused_by_the_console_as_by_the_mcp_endpoint(tmp_path: Path):
    """Regression (DNS rebinding): on a loopback `serve --http --no-auth` the MCP endpoint
    refused a foreign Host (421) but its console served `Host: rebind.attacker.example` the
    approvals page, a session and a CSRF token, and took its POSTs; `ask-another console`
    alone did the same. Both now refuse it with the MCP endpoint's own check."""
    env = {"ASK_ANOTHER_HOME": str(tmp_path / "home")}

    async def refused(base: str, paths: list[str]) -> None:
        port = base.rsplit(":", 1)[1]
        foreign = {"Host": f"rebind.attacker.example:{port}"}
        local = tmp_path / "home" / "local-token"  # --no-auth's MCP endpoint takes this token
        if local.exists():
            foreign["Authorization"] = f"Bearer {local.read_text().strip()}"
        # A connection each: this is about Host, and in CI's whole suite a kept-alive one was
        # once closed by the node as the next request went out ("Server disconnected").
        async with httpx.AsyncClient(base_url=base,
                                     limits=httpx.Limits(max_keepalive_connections=0)) as client:
            for path in paths:
                answer = await client.get(path, headers=foreign)
                assert answer.status_code == 421, (path, answer.status_code, answer.text)
                assert "set-cookie" not in answer.headers, path
            posted = await client.post("/console/rules/revoke", headers=foreign,
                                       data={"tool": "read_article", "csrf": "x"})
            assert posted.status_code == 421
            ours = await client.get("/console/approvals", follow_redirects=True)
            assert ours.status_code == 200, ours.text  # its own Host still works

    async with http_server(env, tmp_path / "serve.log", "--no-auth") as server:
        await refused(server.base, ["/mcp", "/console/approvals", "/console/jobs?part=live",
                                    "/console/static/console.js"])
    async with console_on(env) as (base, link):
        await refused(base, ["/console/approvals", link.removeprefix(base)])
