"""Clients without a token against a real `serve --http` (issue 42): a request without a valid
token is answered 401 before its body is read and before any bound counts it against an
address that real users share."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
import trio
from http_server import http_server, run_cli

pytestmark = pytest.mark.slow  # a server process

META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}}
SHARED_ADDRESS = "127.0.0.3"  # a proxy or a NAT: real users and an attacker behind one address


def host_port(url: str) -> tuple[str, int]:
    host, port = url.split("//")[1].split("/")[0].split(":")
    return host, int(port)


async def tokenless_slow_body(url: str, sent: trio.Event, statuses: list[int | None]) -> None:
    """A POST without a token whose body comes a byte every half second, from the shared
    address; sets `sent` once its headers are out and records the status it is answered (-1
    for one without `WWW-Authenticate: Bearer`)."""
    host, port = host_port(url)
    stream = await trio.open_tcp_stream(host, port, local_address=SHARED_ADDRESS)
    data = b""
    try:
        await stream.send_all(
            f"POST /mcp HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
            "Accept: application/json, text/event-stream\r\nContent-Length: 1000\r\n\r\n{"
            .encode())
        sent.set()
        async with trio.open_nursery() as nursery:
            async def drip() -> None:
                while True:
                    await trio.sleep(0.5)
                    try:
                        await stream.send_all(b" ")
                    except (trio.BrokenResourceError, trio.ClosedResourceError):
                        return

            nursery.start_soon(drip)
            while b"\r\n\r\n" not in data:
                chunk = await stream.receive_some(4096)
                if not chunk:
                    break
                data += chunk
            nursery.cancel_scope.cancel()
    finally:
        await stream.aclose()
    status = int(data.split()[1]) if data else None
    statuses.append(status if b"\r\nwww-authenticate: bearer" in data.lower() else -1)


async def test_a_request_without_a_token_is_refused_before_its_body_and_every_bound(
        tmp_path: Path):
    env = {"ASK_ANOTHER_HOME": str(tmp_path / "home"), "ASK_ANOTHER_REQUESTS_PER_ADDRESS": "4",
           "ASK_ANOTHER_BODY_SECONDS": "60"}
    token = run_cli(env, "token", "add", "alice", check=True).stdout.strip()
    async with http_server(env, tmp_path / "server.log") as server:
        statuses: list[int | None] = []
        async with trio.open_nursery() as nursery:
            sent = []
            for _ in range(10):
                sent.append(trio.Event())
                nursery.start_soon(tokenless_slow_body, server.url, sent[-1], statuses)
            for event in sent:
                await event.wait()
            # A token holder behind the same address, while those bodies trickle: before, the
            # first four held the address's bound of 4 (the rest were answered 429, not 401)
            # for the 60 s of their body, and this call was refused 429.
            transport = httpx.AsyncHTTPTransport(local_address=SHARED_ADDRESS)
            async with httpx.AsyncClient(transport=transport, timeout=60) as http:
                answer = await http.post(
                    server.url, content=json.dumps({"jsonrpc": "2.0", "id": 1,
                                                    "method": "tools/list",
                                                    "params": {"_meta": META}}),
                    headers={"Authorization": f"Bearer {token}",
                             "Content-Type": "application/json",
                             "Accept": "application/json, text/event-stream",
                             "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"})
        log = server.log()
    assert answer.status_code == 200, answer.text
    assert "completion" in answer.text
    # Each answered 401 at once, not 408 once its body's 60 s had passed (nor 429).
    assert statuses == [401] * 10, statuses
    assert "http.slow_body" not in log and "http.too_many" not in log, log
