"""read_article against real pages served on 127.0.0.1, reached through allow_hosts."""

from __future__ import annotations

import httpx
import pytest
import structlog
import trio
from loopback_pages import Page, PageServer, StartServer

from ask_another.articles import CONTENT_CAP, read_article
from ask_another.articles._fetch import _PinnedBackend, open_pinned_client

NAV = "Home World Business Sport Subscribe to our newsletter"
FOOTER = "Copyright 2026 Example Gazette. All rights reserved. Privacy policy. Cookie settings."
PARAGRAPHS = [
    "The river town of Allenford voted on Tuesday to rebuild its century-old footbridge, "
    "ending a dispute that had divided the council for more than three years.",
    "Engineers told the meeting that the original iron spans, installed in 1921, had corroded "
    "beyond repair, and that a timber replacement would last at least sixty years.",
    "Residents who opposed the plan argued that the money would be better spent on the flood "
    "defences downstream, which failed twice during last winter's storms.",
    "The mayor said construction would begin in the spring and that a ferry would carry "
    "pedestrians across the river while the bridge is closed.",
]


def article_html(paragraphs: list[str], title: str = "Allenford votes to rebuild bridge") -> bytes:
    body = "\n".join(f"<p>{p}</p>" for p in paragraphs)
    nav = "".join(f"<li><a href='/{w}'>{w}</a></li>" for w in NAV.split())
    return f"""<!doctype html>
<html><head><title>{title}</title></head>
<body>
<header><nav><ul>{nav}</ul></nav></header>
<main><article>
<h1>{title}</h1>
{body}
</article></main>
<footer><p>{FOOTER}</p></footer>
</body></html>""".encode()


async def test_reads_article_body_and_drops_navigation_and_footer(page_server: PageServer) -> None:
    url = page_server.add("/news/bridge", Page(article_html(PARAGRAPHS)))

    result = await read_article(url, allow_hosts=[page_server.hostport])

    assert result["success"] is True
    assert result["type"] == "article_content"
    assert result["url"] == url
    assert result["truncated"] is False
    for paragraph in PARAGRAPHS:
        assert paragraph in result["content"]
    assert "Copyright 2026" not in result["content"]
    assert "Subscribe" not in result["content"]
    assert set(result) == {"success", "type", "url", "content", "truncated"}
    (request,) = page_server.requests
    assert request.method == "GET"
    assert request.headers["host"] == page_server.hostport


async def test_long_article_is_cut_at_40000_characters(page_server: PageServer) -> None:
    paragraphs = [
        f"Paragraph {i}: " + " ".join(f"word{i}x{j}" for j in range(80)) for i in range(120)
    ]
    url = page_server.add("/long", Page(article_html(paragraphs)))

    result = await read_article(url, allow_hosts=[page_server.hostport])

    assert result["success"] is True
    assert result["truncated"] is True
    assert len(result["content"]) == CONTENT_CAP == 40_000
    assert paragraphs[0] in result["content"]
    assert paragraphs[-1] not in result["content"]


async def test_plain_text_is_returned_as_is(page_server: PageServer) -> None:
    text = "Line one of the notes.\n\n  Indented line two <b>not html</b>.\n"
    url = page_server.add("/notes.txt", Page(text.encode(), content_type="text/plain"))

    result = await read_article(url, allow_hosts=[page_server.hostport])

    assert result == {
        "success": True,
        "type": "article_content",
        "url": url,
        "content": text,
        "truncated": False,
    }


async def test_declared_and_meta_charsets_are_honoured(page_server: PageServer) -> None:
    latin = ["Café crème à Zürich: " + p for p in PARAGRAPHS]
    declared = page_server.add(
        "/latin1",
        Page(
            article_html(latin).decode().encode("latin-1"),
            content_type="text/html; charset=iso-8859-1",
        ),
    )
    html = article_html(latin).decode().replace("<head>", '<head><meta charset="windows-1252">')
    meta = page_server.add("/meta", Page(html.encode("cp1252"), content_type="text/html"))

    for url in (declared, meta):
        result = await read_article(url, allow_hosts=[page_server.hostport])
        assert result["success"] is True, result
        assert "Café crème à Zürich" in result["content"]


async def test_host_entry_without_port_allows_every_port(page_server: PageServer) -> None:
    url = page_server.add("/a", Page(article_html(PARAGRAPHS)))
    result = await read_article(url, allow_hosts=["127.0.0.1"])
    assert result["success"] is True


async def test_private_host_without_allowlist_is_refused_before_any_connection(
    page_server: PageServer,
) -> None:
    url = page_server.add("/a", Page(article_html(PARAGRAPHS)))

    result = await read_article(url)
    other_port = await read_article(url, allow_hosts=["127.0.0.1:1"])

    assert result == {
        "success": False,
        "error": f"Could not fetch article content from {url}: 127.0.0.1 is a loopback address; "
        f"to allow it, add 127.0.0.1:{page_server.port} to ASK_ANOTHER_ALLOW_HOSTS",
    }
    assert other_port["success"] is False
    assert page_server.requests == []


async def test_localhost_name_is_refused_as_loopback(page_server: PageServer) -> None:
    url = f"http://localhost:{page_server.port}/a"
    result = await read_article(url)
    assert result["success"] is False
    assert "localhost resolves to a loopback address" in result["error"]
    assert page_server.requests == []


async def test_redirect_within_allowed_host_is_followed(page_server: PageServer) -> None:
    page_server.add("/final", Page(article_html(PARAGRAPHS)))
    url = page_server.add("/old", Page(status=301, headers={"Location": "/final"}))

    result = await read_article(url, allow_hosts=[page_server.hostport])

    assert result["success"] is True
    assert result["url"] == url
    assert PARAGRAPHS[0] in result["content"]
    assert [r.target for r in page_server.requests] == ["/old", "/final"]


async def test_redirect_from_allowed_host_to_unallowed_loopback_is_refused_before_connecting(
    page_server: PageServer, start_page_server: StartServer
) -> None:
    internal = await start_page_server()
    target = internal.add("/secret", Page(b"<p>internal admin page</p>"))
    target = target.replace("127.0.0.1", "localhost")
    url = page_server.add("/go", Page(status=302, headers={"Location": target}))

    result = await read_article(url, allow_hosts=[page_server.hostport])

    assert result["success"] is False
    assert result["error"].startswith(f"Could not fetch article content from {url}: ")
    assert (
        f"it redirects to {target}, but localhost resolves to a loopback address"
        in (result["error"])
    )
    assert f"add localhost:{internal.port} to ASK_ANOTHER_ALLOW_HOSTS" in result["error"]
    assert internal.requests == []
    assert [r.target for r in page_server.requests] == ["/go"]


@pytest.mark.parametrize(
    ("location", "reason"),
    [
        ("http://10.0.0.1/admin", "10.0.0.1 is a private address"),
        ("http://169.254.169.254/latest/meta-data/", "169.254.169.254 is a cloud metadata address"),
        ("http://[::ffff:127.0.0.1]:8080/", "::ffff:127.0.0.1 is a loopback address"),
        ("ftp://example.com/file", "ftp: URLs are not supported"),
        ("file:///etc/passwd", "file: URLs are not supported"),
    ],
)
async def test_redirect_to_forbidden_target_is_refused(
    page_server: PageServer, location: str, reason: str
) -> None:
    url = page_server.add("/go", Page(status=307, headers={"Location": location}))
    with trio.fail_after(5):  # a connection attempt to 10.0.0.1 would hang, not fail fast
        result = await read_article(url, allow_hosts=[page_server.hostport])
    assert result["success"] is False
    assert "it redirects to " in result["error"]
    assert reason in result["error"]


async def test_redirect_loop_stops_after_five_hops(page_server: PageServer) -> None:
    url = page_server.add("/loop", Page(status=302, headers={"Location": "/loop"}))
    result = await read_article(url, allow_hosts=[page_server.hostport])
    assert result["success"] is False
    assert result["error"].endswith(": it redirected more than 5 times")
    assert len(page_server.requests) == 6


async def test_oversized_body_is_refused(page_server: PageServer) -> None:
    big = article_html(PARAGRAPHS * 400)  # about 230 kB
    declared = page_server.add("/big", Page(big))
    undeclared = page_server.add("/big-chunked", Page(big, send_length=False))
    endless = page_server.add("/endless", Page(endless=True))
    allow = [page_server.hostport]

    by_length = await read_article(declared, allow_hosts=allow, max_bytes=100_000)
    by_stream = await read_article(undeclared, allow_hosts=allow, max_bytes=100_000)
    with trio.fail_after(10):
        never_ends = await read_article(endless, allow_hosts=allow)

    assert by_length["error"].endswith(f"the page is {len(big) // 1000} kB, over the 100 kB limit")
    assert by_stream["error"].endswith("the page is larger than the 100 kB limit")
    assert never_ends["error"].endswith("the page is larger than the 5 MB limit")


@pytest.mark.parametrize(
    "content_type", ["application/pdf", "image/png", "application/octet-stream", "video/mp4"]
)
async def test_binary_content_type_is_refused(page_server: PageServer, content_type: str) -> None:
    url = page_server.add("/file", Page(b"%PDF-1.7\x00\x01\x02binary", content_type=content_type))
    result = await read_article(url, allow_hosts=[page_server.hostport])
    assert result == {
        "success": False,
        "error": f"Could not fetch article content from {url}: its content type is "
        f"{content_type}; only web pages and plain text (text/html, application/xhtml+xml, "
        "text/plain) can be read",
    }


async def test_undeclared_binary_body_is_refused(page_server: PageServer) -> None:
    url = page_server.add("/blob", Page(b"\x89PNG\r\n\x1a\n\x00\x00\x00", content_type=None))
    result = await read_article(url, allow_hosts=[page_server.hostport])
    assert result["error"].endswith("the page declares no content type and looks binary")


async def test_not_found_page(page_server: PageServer) -> None:
    url = page_server.url("/missing")
    result = await read_article(url, allow_hosts=[page_server.hostport])
    assert result == {
        "success": False,
        "error": f"Could not fetch article content from {url}: the server answered 404 Not Found",
    }
    assert [r.target for r in page_server.requests] == ["/missing"]


async def test_page_without_article_text(page_server: PageServer) -> None:
    url = page_server.add(
        "/empty", Page(b"<html><body><script>var x = 1;</script><img src='a.png'></body></html>")
    )
    result = await read_article(url, allow_hosts=[page_server.hostport])
    assert result["error"].endswith("no readable article text was found on the page")


ONLY_HTTP = "only http and https URLs can be read"


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        (
            "file:///etc/passwd",
            "file: URLs are not supported; only http and https URLs can be read",
        ),
        (
            "ftp://example.com/a.txt",
            "ftp: URLs are not supported; only http and https URLs can be read",
        ),
        (
            "javascript:alert(1)",
            "javascript: URLs are not supported; only http and https URLs can be read",
        ),
        (
            "example.com/news",
            "the URL has no scheme; only http and https URLs can be read; "
            "did you mean https://example.com/news?",
        ),
        ("http:///path-only", "the URL has no host"),
    ],
)
async def test_unsupported_urls_are_refused(url: str, reason: str) -> None:
    result = await read_article(url)
    assert result == {
        "success": False,
        "error": f"Could not fetch article content from {url}: {reason}",
    }


@pytest.mark.parametrize("url", ["", "   ", "\n\t"])
async def test_empty_url(url: str) -> None:
    assert await read_article(url) == {"success": False, "error": "No URL provided"}


async def test_slow_server_times_out(page_server: PageServer) -> None:
    silent = page_server.add("/silent", Page(article_html(PARAGRAPHS), delay=30))
    # Each byte arrives within the per-read timeout, but the whole page never does in time.
    dripping = page_server.add("/drip", Page(article_html(PARAGRAPHS), drip=0.05))
    allow = [page_server.hostport]

    start = trio.current_time()
    silent_result = await read_article(silent, allow_hosts=allow, timeout=0.5)
    drip_result = await read_article(dripping, allow_hosts=allow, timeout=0.5)
    elapsed = trio.current_time() - start

    assert silent_result["success"] is False
    assert silent_result["error"].startswith(f"Could not fetch article content from {silent}: ")
    assert "0.5 s" in silent_result["error"]
    assert drip_result["error"].endswith("it took longer than the 0.5 s limit")
    assert elapsed < 3


async def test_failure_is_logged_with_its_reason(page_server: PageServer) -> None:
    url = page_server.url("/missing").replace("http://", "http://user:hunter2@")
    with structlog.testing.capture_logs() as logs:
        await read_article(url, allow_hosts=[page_server.hostport])
    (event,) = [e for e in logs if e["event"] == "article.fetch_failed"]
    assert event["reason"] == "the server answered 404 Not Found"
    assert event["log_level"] == "warning"
    assert "hunter2" not in repr(logs)


async def test_connections_go_to_the_pinned_address_with_the_real_host_header(
    page_server: PageServer,
) -> None:
    # rebind.test has no DNS record at all: the request can only arrive because the client
    # connected to the pinned, checked address, while the Host header kept the name.
    page_server.add("/pinned", Page(b"ok", content_type="text/plain"))
    backend = _PinnedBackend()
    backend.pin("rebind.test", page_server.port, ["127.0.0.1"])
    async with open_pinned_client(backend, 5) as client:
        response = await client.get(f"http://rebind.test:{page_server.port}/pinned")
        with pytest.raises(httpx.ConnectError, match="unchecked host"):
            await client.get(f"http://unpinned.test:{page_server.port}/pinned")
    assert response.text == "ok"
    assert [(r.target, r.headers["host"]) for r in page_server.requests] == [
        ("/pinned", f"rebind.test:{page_server.port}")
    ]


async def test_closed_port_is_a_clear_connection_failure() -> None:
    listener = (await trio.open_tcp_listeners(0, host="127.0.0.1"))[0]
    port = listener.socket.getsockname()[1]
    await listener.aclose()  # nothing listens there any more
    url = f"http://127.0.0.1:{port}/a"

    result = await read_article(url, allow_hosts=[f"127.0.0.1:{port}"])

    assert result["success"] is False
    assert result["error"].startswith(
        f"Could not fetch article content from {url}: could not connect to 127.0.0.1 ("
    )


async def test_a_crash_inside_extraction_is_a_failure_not_an_exception(
    page_server: PageServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken_extract(html: str, url: str | None = None) -> str | None:
        raise RuntimeError("parser exploded")

    monkeypatch.setattr("ask_another.articles._extract.extract_article_text", broken_extract)
    url = page_server.add("/a", Page(article_html(PARAGRAPHS)))

    with structlog.testing.capture_logs() as logs:
        result = await read_article(url, allow_hosts=[page_server.hostport])

    assert result == {
        "success": False,
        "error": f"Could not fetch article content from {url}: "
        "an unexpected error occurred (RuntimeError)",
    }
    assert [e["event"] for e in logs] == ["article.read_crashed", "article.fetch_failed"]


async def test_a_plain_string_allowlist_is_a_programming_error() -> None:
    with pytest.raises(TypeError, match="not one string"):
        await read_article("http://127.0.0.1/", allow_hosts="127.0.0.1,localhost")
