"""Fixtures that start loopback page servers in the test's nursery; they stop with the test."""

from __future__ import annotations

import pytest
import trio
from loopback_pages import PageServer, StartServer


@pytest.fixture
def start_page_server(nursery: trio.Nursery) -> StartServer:
    """Start another PageServer on a free loopback port; it stops when the test ends."""

    async def start() -> PageServer:
        server = PageServer()
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        server.port = listeners[0].socket.getsockname()[1]
        nursery.start_soon(trio.serve_listeners, server.handle, listeners)
        return server

    return start


@pytest.fixture
async def page_server(start_page_server: StartServer) -> PageServer:
    return await start_page_server()
