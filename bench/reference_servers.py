"""The two reference servers of `bench http`: `python -m bench.reference_servers KIND BASE KEY`.

Each is the smallest MCP server that does what ours does for a `completion(model, prompt)` call
on the same SDK (mcp 2.x, `MCPServer`, its Streamable HTTP app, the 2026-07-28 era the clients
pick), against the same simulated provider (`BASE`, an OpenAI-compatible /v1 URL, key `KEY`):

- `floor`: the SDK's app on hypercorn's trio worker (as ours runs), the chat call made with
  httpx from a small pool of clients (one shared client spends its CPU scanning its pool with
  hundreds of calls in flight, /work/shared/notes/libraries.md). No auth, no store, no ledger,
  no separate worker process: what the SDK and one HTTP call cost, the floor nothing can beat.
- `peer`: the server a user would write instead: the SDK's app on uvicorn (asyncio), the call
  made with `litellm.acompletion` in-process.

Both listen on a port of their own (port 0) and log ``http.listening url=...`` on stderr, as
`serve --http` does, so the benchmark starts them the same way. Nothing here is part of
ask-another.
"""

from __future__ import annotations

import itertools
import logging
import os
import socket
import sys
from typing import Any

from mcp.server.mcpserver import MCPServer

POOL = 8  # httpx clients in the floor's pool


def _socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(1024)
    return sock


def _announce(sock: socket.socket) -> None:
    port = sock.getsockname()[1]
    print(f"http.listening url=http://127.0.0.1:{port}/mcp", file=sys.stderr, flush=True)


def _answer(body: dict[str, Any]) -> str:
    return str(body["choices"][0]["message"]["content"])


def floor(base: str, key: str) -> None:
    import httpx
    import trio
    from hypercorn.config import Config
    from hypercorn.trio import serve

    server = MCPServer("floor")
    clients: list[httpx.AsyncClient] = []
    turn = itertools.count()

    @server.tool()
    async def completion(model: str, prompt: str) -> str:
        """One chat completion."""
        if not clients:
            clients.extend(httpx.AsyncClient(base_url=base, timeout=60) for _ in range(POOL))
        http = clients[next(turn) % POOL]
        response = await http.post("/chat/completions", headers={
            "Authorization": f"Bearer {key}"}, json={
            "model": model, "messages": [{"role": "user", "content": prompt}]})
        response.raise_for_status()
        return _answer(response.json())

    sock = _socket()
    _announce(sock)
    config = Config()
    config.bind = [f"fd://{sock.detach()}"]
    config.accesslog = None
    config.errorlog = logging.getLogger("hypercorn.error")
    app = server.streamable_http_app(streamable_http_path="/mcp", host="127.0.0.1")
    trio.run(serve, app, config)  # type: ignore[arg-type]


def peer(base: str, key: str) -> None:
    import asyncio

    import uvicorn

    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    import litellm

    litellm.suppress_debug_info = True
    server = MCPServer("peer")

    @server.tool()
    async def completion(model: str, prompt: str) -> str:
        """One chat completion."""
        response = await litellm.acompletion(
            model=f"openai/{model}", api_base=base, api_key=key, timeout=60,
            messages=[{"role": "user", "content": prompt}])
        return str(response.choices[0].message.content)

    sock = _socket()
    _announce(sock)
    app = server.streamable_http_app(streamable_http_path="/mcp", host="127.0.0.1")
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on")
    asyncio.run(uvicorn.Server(config).serve(sockets=[sock]))


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    kind, base_url, api_key = sys.argv[1:4]
    {"floor": floor, "peer": peer}[kind](base_url, api_key)
