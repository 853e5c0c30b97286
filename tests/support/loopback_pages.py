"""A tiny real HTTP/1.1 server on 127.0.0.1 for the tests that read pages (articles, article
tools, conversations), started in the test's nursery by their fixtures.

It is deliberately dumb (one request per connection, ``Connection: close``) so that each test
controls exactly what goes over the socket: status, headers, delays, dripping or endless bodies,
and it records every request it received, so a test can prove a request never arrived.
"""

from __future__ import annotations

import http
import ssl
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Protocol

import trio


async def read_request_head(stream: trio.abc.ReceiveStream) -> str | None:
    """An HTTP request's line and headers (up to the blank line), or None if the client hung up
    first."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = await stream.receive_some(65536)
        if not chunk:
            return None
        data += chunk
    return data.split(b"\r\n\r\n", 1)[0].decode("latin-1")


@dataclass
class Page:
    """What the server answers for one path."""

    body: bytes = b""
    status: int = 200
    content_type: str | None = "text/html; charset=utf-8"
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # seconds before the status line
    drip: float | None = None  # seconds between body bytes
    endless: bool = False  # stream 64 kB chunks until the client hangs up
    send_length: bool = True


@dataclass(frozen=True)
class SeenRequest:
    method: str
    target: str
    headers: dict[str, str]


class PageServer:
    def __init__(self) -> None:
        self.pages: dict[str, Page] = {}
        self.requests: list[SeenRequest] = []
        self.port = 0

    @property
    def hostport(self) -> str:
        return f"127.0.0.1:{self.port}"

    def url(self, path: str) -> str:
        return f"http://{self.hostport}{path}"

    def add(self, path: str, page: Page) -> str:
        self.pages[path] = page
        return self.url(path)

    async def start(self, nursery: trio.Nursery,
                    ssl_context: ssl.SSLContext | None = None) -> PageServer:
        """Serve on a free loopback port in `nursery` (HTTPS with an `ssl_context`)."""
        listeners: list[trio.SocketListener] | list[trio.SSLListener[trio.SocketStream]]
        if ssl_context is None:
            listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
            self.port = listeners[0].socket.getsockname()[1]
        else:
            listeners = await trio.open_ssl_over_tcp_listeners(
                0, ssl_context, host="127.0.0.1", https_compatible=True
            )
            self.port = listeners[0].transport_listener.socket.getsockname()[1]
        nursery.start_soon(trio.serve_listeners, self.handle, listeners)
        return self

    async def handle(self, stream: trio.abc.Stream) -> None:
        try:
            head = await read_request_head(stream)
            if head is None:
                return
            request_line, *header_lines = head.split("\r\n")
            method, target, _version = request_line.split(" ", 2)
            headers = {}
            for line in header_lines:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
            self.requests.append(SeenRequest(method, target, headers))
            page = self.pages.get(target, Page(b"<h1>Not here</h1>", status=404))
            await self._respond(stream, page)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # the client hung up, which several tests provoke on purpose
        finally:
            await stream.aclose()

    async def _respond(self, stream: trio.abc.Stream, page: Page) -> None:
        if page.delay:
            await trio.sleep(page.delay)
        lines = [
            f"HTTP/1.1 {page.status} {http.HTTPStatus(page.status).phrase}",
            "Connection: close",
        ]
        if page.content_type is not None:
            lines.append(f"Content-Type: {page.content_type}")
        if page.send_length and not page.endless:
            lines.append(f"Content-Length: {len(page.body)}")
        lines += [f"{k}: {v}" for k, v in page.headers.items()]
        await stream.send_all(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        if page.endless:
            chunk = b"<p>" + b"x" * 65530 + b"</p>"
            while True:
                await stream.send_all(chunk)
        elif page.drip is not None:
            for i in range(len(page.body)):
                await stream.send_all(page.body[i : i + 1])
                await trio.sleep(page.drip)
        else:
            await stream.send_all(page.body)


class StartServer(Protocol):
    def __call__(self, ssl_context: ssl.SSLContext | None = None) -> Awaitable[PageServer]: ...
