"""Helpers shared by the conversation and article-tool tests (imported by module name).

`ArticlePages` is a small real HTTP/1.1 server on 127.0.0.1 serving fixed pages; the tests reach
it through ``ASK_ANOTHER_ALLOW_HOSTS`` (loopback is refused otherwise).
"""

from __future__ import annotations

import http
from dataclasses import dataclass
from typing import Any

import trio

# Long enough for trafilatura to keep it as the article body.
ARTICLE_FACT = "The lighthouse keeper of Ardnamurchan counted 4,117 ships in the winter of 1923."
ARTICLE_HTML = f"""<!doctype html>
<html><head><title>The lighthouse keeper's ledger</title></head>
<body>
<nav><a href="/">Home</a> | <a href="/about">About</a> | Subscribe to our newsletter</nav>
<article>
<h1>The lighthouse keeper's ledger</h1>
<p>{ARTICLE_FACT} Every vessel went into a leather ledger, with its flag, its heading and the
state of the sea, in a hand that grew steadier as the nights grew longer.</p>
<p>Historians who found the ledger in 2019 used it to reconstruct the coastal trade of the
western Highlands between the wars, a trade that no port authority had recorded in such detail.
The keeper's notes on weather also matched the Met Office's own archive remarkably well.</p>
<p>The ledger is now kept in the museum at Kilchoan, where visitors can read a page of it
under glass, turned to a new date each week by the volunteers who look after the collection.</p>
</article>
<footer>Copyright the Coastal Gazette. All rights reserved. Cookie settings.</footer>
</body></html>"""


@dataclass
class Page:
    body: bytes
    status: int = 200
    content_type: str = "text/html; charset=utf-8"
    headers: dict[str, str] | None = None


class ArticlePages:
    """Serve `pages` (path -> Page) on a free loopback port; records the paths requested."""

    def __init__(self) -> None:
        self.pages: dict[str, Page] = {}
        self.requested: list[str] = []
        self.port = 0

    @property
    def hostport(self) -> str:
        return f"127.0.0.1:{self.port}"

    def add(self, path: str, page: Page) -> str:
        self.pages[path] = page
        return f"http://{self.hostport}{path}"

    async def start(self, nursery: trio.Nursery) -> ArticlePages:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        self.port = listeners[0].socket.getsockname()[1]
        nursery.start_soon(trio.serve_listeners, self._handle, listeners)
        return self

    async def _handle(self, stream: trio.SocketStream) -> None:
        try:
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = await stream.receive_some(65536)
                if not chunk:
                    return
                data += chunk
            target = data.split(b"\r\n", 1)[0].decode("latin-1").split(" ")[1]
            self.requested.append(target)
            page = self.pages.get(target, Page(b"<h1>Not here</h1>", status=404))
            head = [f"HTTP/1.1 {page.status} {http.HTTPStatus(page.status).phrase}",
                    "Connection: close", f"Content-Type: {page.content_type}",
                    f"Content-Length: {len(page.body)}",
                    *[f"{k}: {v}" for k, v in (page.headers or {}).items()]]
            await stream.send_all(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + page.body)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            await stream.aclose()


def tool_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m for m in messages if m.get("role") == "tool"]
