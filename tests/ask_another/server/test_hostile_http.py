"""Hostile input over HTTP (issue 30), against a real `serve --http` process with a real token:
a body the SDK's parser refuses is answered `-32700` the way stdio answers it, and a client that
hangs up in the middle of its body costs one quiet log line."""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx
import pytest
import trio
from http_server import http_server, run_cli, wait_for_line

from ask_another.simulator import Simulator

pytestmark = pytest.mark.slow  # a server process

META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}}


def server_env(sim: Simulator, home: Path) -> dict[str, str]:
    return {"ASK_ANOTHER_HOME": str(home),
            "MODEL_SIM": f"openai/m1;sk-test-HOSTILE-HTTP-1234;{sim.openai_base}"}


async def post_raw(url: str, token: str, body: str, era: str, **headers: str) -> httpx.Response:
    sent = {"Authorization": f"Bearer {token}", "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": era,
            **headers}
    async with httpx.AsyncClient(timeout=30) as http:
        return await http.post(url, headers=sent, content=body.encode())


async def test_a_lone_surrogate_is_a_parse_error_in_both_eras_and_a_hang_up_one_line(
        sim: Simulator, tmp_path: Path):
    env = server_env(sim, tmp_path / "home")
    token = run_cli(env, "token", "add", "mallory", check=True).stdout.strip()
    async with http_server(env, tmp_path / "server.log") as server:
        # 2026-07-28: the SDK parses with Python's json, which reads "\ud800"; the tool then
        # failed with "Internal error (UnicodeEncodeError)" and a traceback.
        call = ('{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"_meta":'
                + json.dumps(META) + ',"name":"completion","arguments":{"model":"sim",'
                '"prompt":"\\ud800"}}}')
        modern = await post_raw(server.url, token, call, "2026-07-28",
                                **{"Mcp-Method": "tools/call", "Mcp-Name": "completion"})
        # The handshake era: the same answer (it was -32700 with a null id).
        opening = ('{"jsonrpc":"2.0","id":"h1","method":"initialize","params":{'
                   '"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{'
                   '"name":"\\udfff","version":"0"}}}')
        handshake = await post_raw(server.url, token, opening, "2025-11-25")
        deep = await post_raw(server.url, token, '{"jsonrpc":"2.0","id":5,"method":"ping",'
                              '"params":{"a":' + "[" * 1000 + "]" * 1000 + "}}", "2025-11-25")

        # A client that sends half its body and hangs up.
        host, port = server.url.split("//")[1].split("/")[0].split(":")
        for _ in range(5):
            stream = await trio.open_tcp_stream(host, int(port))
            await stream.send_all(
                f"POST /mcp HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {token}\r\n"
                "Accept: application/json, text/event-stream\r\nContent-Type: application/json"
                "\r\nContent-Length: 1000\r\n\r\n{\"jsonrpc\":".encode())
            await trio.sleep(0.1)
            await stream.aclose()
        await wait_for_line(server.stderr, re.compile(r"(?s)(?:http\.client_gone.*?){5}"),
                            server.process, seconds=30)
        # The server still serves.
        async with httpx.AsyncClient() as http:
            assert (await http.get(server.base + "/health")).status_code == 200
        log = server.log()

    for answer, request_id in ((modern, 4), (handshake, "h1")):
        assert answer.status_code == 400, answer.text
        error = answer.json()
        assert error["id"] == request_id, error
        assert error["error"]["code"] == -32700, error
        assert "lone surrogate" in error["error"]["message"], error
    assert deep.status_code == 400 and deep.json()["error"]["code"] == -32700, deep.text
    assert deep.json()["id"] is None
    assert "UnicodeEncodeError" not in log
    assert "Traceback" not in log and "ClientDisconnect" not in log, log
    gone = [line for line in log.splitlines() if "http.client_gone" in line]
    assert len(gone) == 5 and all("[info" in line for line in gone), gone
