"""No connection can end the node (issue 42, item 1): what one of hypercorn's connections raises
stays in that connection, and hypercorn 0.18's write-after-close race is gone. The listener is
the one `serve --http` and the console run (`hosting.serve_until_stopped`), in this process, on
loopback, with a small ASGI app."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
import structlog
import trio
from hypercorn.protocol.h11 import H11Protocol

from ask_another.config import Config
from ask_another.hosting import Drain, listen, serve_until_stopped

HEADERS = b"POST /slow HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000\r\n\r\n"


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """`/slow` answers 408 if its body has not come within 0.3 s (as server/http.py's
    `WholeBodies` does at its deadline); anything else is 200."""
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    status = 200
    if scope["path"] == "/slow":
        status = 408
        with trio.move_on_after(0.3):
            while (await receive())["type"] != "http.disconnect":
                pass
            return
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-length", b"2"), (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": b"ok"})


@asynccontextmanager
async def listener(tmp_path: Any) -> AsyncIterator[str]:
    """The app served until the block ends; its base URL."""
    sock = listen("127.0.0.1", 0)
    base = f"http://127.0.0.1:{sock.getsockname()[1]}"
    async with trio.open_nursery() as nursery:
        ready = trio.Event()
        nursery.start_soon(lambda: serve_until_stopped(
            Drain(app), sock, Config(home=tmp_path), base, base, "none", ready=ready.set))
        await ready.wait()
        yield base
        nursery.cancel_scope.cancel()


async def half_a_body_then_gone(base: str, seconds: float) -> None:
    """Headers and some of a body for about `seconds`, then a hang-up."""
    stream = await trio.open_tcp_stream("127.0.0.1", int(base.rsplit(":", 1)[1]))
    try:
        await stream.send_all(HEADERS)
        with trio.move_on_after(seconds):
            while True:
                await stream.send_all(b"x")
                await trio.sleep(0.01)
    except trio.BrokenResourceError:
        pass  # the node closed first (after its 408)
    finally:
        await stream.aclose()


async def test_what_a_connection_raises_ends_that_connection_not_the_node(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # Deterministic: what trio raises when hypercorn 0.18 loses its race, raised where it was
    # raised (hypercorn's 400 for a client gone mid-body). It went through TCPServer.run, the
    # server's nursery and trio.run: the node exited with status 1.
    async def lost_race(self: H11Protocol, status_code: int) -> None:
        raise trio.BusyResourceError("another task is currently sending data on this SocketStream")

    monkeypatch.setattr(H11Protocol, "_send_error_response", lost_race)
    with structlog.testing.capture_logs() as logs:
        async with listener(tmp_path) as base:
            for _ in range(3):
                await half_a_body_then_gone(base, 0.05)
            with trio.fail_after(30):
                # a log line has no event to wait on (and the old code had no hook)
                while sum(entry["event"] == "http.connection_fault" for entry in logs) < 3:  # noqa: ASYNC110
                    await trio.sleep(0.01)
            async with httpx.AsyncClient() as http:
                assert (await http.get(base + "/health")).text == "ok"
    faults = [entry for entry in logs if entry["event"] == "http.connection_fault"]
    assert len(faults) == 3, faults
    assert faults[0]["error"] == "BusyResourceError", faults[0]


@pytest.mark.slow  # 1,000 connections, a few seconds
async def test_clients_hanging_up_as_their_slow_body_is_refused_never_race_the_close(
        tmp_path: Any) -> None:
    # The race as it happens: 200 clients at a time hang up near the moment the app refuses
    # their body. On hypercorn's own connection a wave (in 4 runs of 5) raised
    # BusyResourceError (the 400 for the hang-up written while the refusal's close held the
    # stream), ending the node.
    with structlog.testing.capture_logs() as logs:
        async with listener(tmp_path) as base:
            for _ in range(5):
                async with trio.open_nursery() as wave:
                    for _ in range(200):
                        wave.start_soon(half_a_body_then_gone, base, random.uniform(0.28, 0.32))
            async with httpx.AsyncClient() as http:
                assert (await http.get(base + "/health")).text == "ok"
    assert [entry for entry in logs if entry["event"] == "http.connection_fault"] == []
