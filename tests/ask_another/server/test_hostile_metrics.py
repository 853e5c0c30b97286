"""`/metrics` under a token holder's made-up tool names (issue 42), against a real
`serve --http`: only the server's own tools are labels, every other name is `unknown`, so the
scrape stays small however many names are sent."""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx
import pytest
import trio
from http_server import http_client_for, http_server
from tool_results import call

from ask_another.server.auth import TokensFile

pytestmark = pytest.mark.slow  # a server process

META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}}
NAMES = 3_000


async def made_up_calls(url: str, token: str, names: list[str]) -> None:
    async with httpx.AsyncClient(timeout=60) as http:
        for name in names:
            answer = await http.post(url, content=json.dumps({
                "jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": name, "arguments": {}, "_meta": META}}), headers={
                "Authorization": f"Bearer {token}", "Content-Type": "application/json",
                "Accept": "application/json, text/event-stream",
                "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call",
                "Mcp-Name": name})
            assert answer.status_code in (200, 429), answer.text


async def test_made_up_tool_names_are_one_unknown_label_and_the_scrape_stays_small(
        tmp_path: Path):
    home = tmp_path / "home"
    tokens = TokensFile(home / "tokens.json")
    mallory, root = tokens.add("mallory"), tokens.add("root", admin=True)
    # The default rate (120 calls a minute) refuses most of them: refused calls were labelled
    # too.
    async with http_server({"ASK_ANOTHER_HOME": str(home)}, tmp_path / "server.log") as server:
        names = [f"made-up-{i}-" + "x" * 200 for i in range(NAMES)]
        async with trio.open_nursery() as nursery:
            for worker in range(8):
                nursery.start_soon(made_up_calls, server.url, mallory, names[worker::8])
        async with http_client_for(server.url, root) as client:
            error, text = await call(client, "list_models")
            assert not error, text
        async with httpx.AsyncClient(timeout=60) as http:
            scrape = await http.get(server.base + "/metrics",
                                    headers={"Authorization": f"Bearer {root}"})
    assert scrape.status_code == 200, scrape.text
    text = scrape.text
    assert "made-up" not in text
    # Before: one counter and one histogram (13 buckets) per name, 5.3 MB for 3,000 names.
    assert len(scrape.content) < 30_000, len(scrape.content)
    calls = re.findall(r'ask_another_tool_calls_total\{outcome="(\w+)",tool="unknown"\} (\S+)',
                       text)
    assert sum(float(count) for _, count in calls) == NAMES, calls
    assert 'ask_another_tool_calls_total{outcome="ok",tool="list_models"} 1.0' in text
