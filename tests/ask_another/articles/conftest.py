"""Fixtures that start loopback page servers in the test's nursery; they stop with the test."""

from __future__ import annotations

import ssl

import pytest
import trio
from loopback_pages import PageServer, StartServer


@pytest.fixture
def start_page_server(nursery: trio.Nursery) -> StartServer:
    """Start another PageServer on a free loopback port; it stops when the test ends.

    With an ``ssl_context`` the server speaks HTTPS.
    """

    async def start(ssl_context: ssl.SSLContext | None = None) -> PageServer:
        server = PageServer()
        listeners: list[trio.SocketListener] | list[trio.SSLListener[trio.SocketStream]]
        if ssl_context is None:
            listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
            server.port = listeners[0].socket.getsockname()[1]
        else:
            listeners = await trio.open_ssl_over_tcp_listeners(
                0, ssl_context, host="127.0.0.1", https_compatible=True
            )
            server.port = listeners[0].transport_listener.socket.getsockname()[1]
        nursery.start_soon(trio.serve_listeners, server.handle, listeners)
        return server

    return start


@pytest.fixture
async def page_server(start_page_server: StartServer) -> PageServer:
    return await start_page_server()
