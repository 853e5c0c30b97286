"""A stdio client that never reads stdout (issue 42): past `UNANSWERED` requests read and not
answered the server stops reading stdin, so its memory stays bounded, where it held an answer
for each of 10,000 `tools/list` (1.15 GB); and once the client reads again, every request is
answered."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import trio
from stdio_server import server_parameters

from ask_another.server.stdio import UNANSWERED

pytestmark = pytest.mark.slow  # a server process

REQUESTS = 10_000
"""Before the bound the server read them all and held an answer of about 115 kB for each (1.15
GB); with it, at most `UNANSWERED` (256) are read and unanswered."""
BOUND_MB = 300


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def line(message: dict[str, object]) -> bytes:
    return json.dumps(message).encode() + b"\n"


async def test_a_client_that_never_reads_makes_the_server_stop_reading(tmp_path: Path):
    params = server_parameters({"ASK_ANOTHER_HOME": str(tmp_path / "home")})
    with (tmp_path / "stderr.log").open("w") as err:
        server = await trio.lowlevel.open_process(
            [params.command, *params.args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=err, env=params.env, cwd=params.cwd)
    assert server.stdin is not None and server.stdout is not None
    try:
        await server.stdin.send_all(line({
            "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "raw", "version": "0"}}}))
        received = b""
        with trio.fail_after(120):
            while b"\n" not in received:
                received += await server.stdout.receive_some(65536)
        await server.stdin.send_all(line({"jsonrpc": "2.0",
                                          "method": "notifications/initialized"}))
        before = rss_mb(server.pid)
        sent = 0

        async def send_until_blocked() -> None:
            nonlocal sent
            while sent < REQUESTS:
                await server.stdin.send_all(line({"jsonrpc": "2.0", "id": sent + 1,
                                                  "method": "tools/list"}))
                sent += 1

        # The server stops reading: the pipe fills and the sends block. Sending ends when they
        # have made no progress for 3 s (or all were sent, as before the fix, or after 60 s).
        with trio.move_on_after(60):
            async with trio.open_nursery() as sending:
                sending.start_soon(send_until_blocked)
                last, still = -1, 0.0
                while sent < REQUESTS and still < 3:
                    await trio.sleep(0.1)
                    last, still = sent, (still + 0.1 if sent == last else 0.0)
                sending.cancel_scope.cancel()
        grown = rss_mb(server.pid) - before
        # Now the client reads: every request it sent is answered.
        answered: set[int] = set()
        buffer = b""
        with trio.fail_after(300):
            async with trio.open_nursery() as nursery:
                async def send_the_rest() -> None:
                    nonlocal sent
                    while sent < REQUESTS:
                        await server.stdin.send_all(line({"jsonrpc": "2.0", "id": sent + 1,
                                                          "method": "tools/list"}))
                        sent += 1

                nursery.start_soon(send_the_rest)
                while len(answered) < REQUESTS:
                    buffer += await server.stdout.receive_some(1 << 20)
                    *lines, buffer = buffer.split(b"\n")
                    answered.update(json.loads(text)["id"] for text in lines if text)
    finally:
        server.kill()
        await server.wait()
    # Before: every request read and answered into memory, about 115 kB each.
    assert sent < REQUESTS or grown < BOUND_MB, (sent, grown)
    assert grown < BOUND_MB, f"the server grew {grown:.0f} MB with {UNANSWERED} unanswered at most"
    assert answered == set(range(1, REQUESTS + 1))
