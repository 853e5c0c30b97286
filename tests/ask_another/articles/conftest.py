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
        return await PageServer().start(nursery, ssl_context)

    return start


@pytest.fixture
async def page_server(start_page_server: StartServer) -> PageServer:
    return await start_page_server()
