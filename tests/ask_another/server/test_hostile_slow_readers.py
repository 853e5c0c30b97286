"""Clients that never read their answers, without a token, against a real `serve --http`
whose open-files limit is 1,024 (issue 42): each connection whose write has waited
`ASK_ANOTHER_WRITE_SECONDS` is closed, so a wave of them does not keep the node's files, and
a normal client is served after it while the attacker still holds every socket."""

from __future__ import annotations

import resource
import socket
from pathlib import Path

import httpx
import pytest
import trio
from http_server import http_server

pytestmark = pytest.mark.slow  # a server process, and a wave of 1,100 connections

CONNECTIONS = 1_100  # more than the node's 1,024 files
PIPELINED = 100  # requests each: 35 kB of answers, more than the sockets' buffers hold (17 kB)
REQUEST = "GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n"
"""No token: each is answered 401 (350 bytes with its WWW-Authenticate), nothing read."""


async def never_reading(port: int, held: list[trio.SocketStream], limiter: trio.CapacityLimiter
                        ) -> None:
    """A connection with a small receive buffer that sends `PIPELINED` requests at once and
    reads nothing; kept in `held` (the attacker holds it)."""
    async with limiter:
        sock = trio.socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 2048)
        try:
            with trio.move_on_after(30):  # a full node may never accept it
                await sock.connect(("127.0.0.1", port))
                stream = trio.SocketStream(sock)
                held.append(stream)
                await stream.send_all(REQUEST.format(port=port).encode() * PIPELINED)
        except OSError:
            sock.close()


async def test_pipelined_requests_never_read_do_not_keep_the_nodes_files(tmp_path: Path):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < CONNECTIONS + 1_000:
        pytest.skip(f"this test's process may open only {hard} files")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, CONNECTIONS + 1_000), hard))
    env = {"ASK_ANOTHER_HOME": str(tmp_path / "home"), "ASK_ANOTHER_WRITE_SECONDS": "5"}
    held: list[trio.SocketStream] = []
    try:
        async with http_server(env, tmp_path / "server.log", "--no-auth",
                               open_files=(1024, 1024)) as server:
            port = int(server.base.rsplit(":", 1)[1])
            for _wave in range(2):
                limiter = trio.CapacityLimiter(200)
                async with trio.open_nursery() as nursery:
                    for _ in range(CONNECTIONS):
                        nursery.start_soon(never_reading, port, held, limiter)
                # Served after the wave, while every socket of it is still held open.
                served = None
                with trio.fail_after(240):  # before: never (out of files, accept failed)
                    while served is None:
                        try:
                            async with httpx.AsyncClient(timeout=10) as http:
                                served = await http.get(server.base + "/health")
                        except httpx.TransportError:
                            await trio.sleep(1)
                assert served.status_code == 200, served.text
            assert server.process.returncode is None
            # A deadline counts from when a write began to wait, and on a loaded machine the
            # node may answer /health before it has written (and waited on) a wave's pipelined
            # answers: the write timeouts come after, while the attacker still holds the sockets.
            with trio.move_on_after(120):
                while True:
                    if "http.write_timeout" in server.log():
                        break
                    await trio.sleep(0.2)
            log = server.log()
    finally:
        for stream in held:
            stream.socket.close()
    # Those whose answers filled the buffers were closed by the write deadline (183 of 2,200 in
    # one run; the others' answers fit, and keep-alive closed them): without it, they were held
    # for as long as the client kept them, and after the first wave nobody was served.
    assert "http.write_timeout" in log
