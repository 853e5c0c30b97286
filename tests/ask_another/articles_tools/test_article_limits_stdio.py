"""read_article's limits against hostile pages, through the real stdio server (issue 16, items 1
and 2): a stacked compression bomb is stopped on decoded bytes as they stream, with the server's
memory bounded by the limit, and compression layers are read (or refused) by name."""

from __future__ import annotations

import gzip
import json
import sys
import zlib
from pathlib import Path

from loopback_pages import Page, PageServer
from mcp import Client
from mcp.client.stdio import stdio_client
from stdio_server import server_parameters
from tool_results import call

# The server writes its pid first, so the test can read its peak memory (VmHWM) from /proc.
WITH_PID = ("import os, runpy, sys; open({path!r}, 'w').write(str(os.getpid())); "
            "sys.argv = ['ask_another']; runpy.run_module('ask_another', run_name='__main__')")
ARTICLE = (b"<html><head><title>Allenford</title></head><body><article>"
           + b"<p>The river town of Allenford voted on Tuesday to rebuild its footbridge, ending "
             b"a dispute that had divided the council for more than three years.</p>" * 5
           + b"</article></body></html>")


def gzip_bomb(decoded_mb: int) -> bytes:
    """gzip of `decoded_mb` MB of an HTML page's worth of spaces, built without holding it."""
    squeeze = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    parts = [squeeze.compress(b"<html><body><p>")]
    block = b" " * 1_000_000
    parts += [squeeze.compress(block) for _ in range(decoded_mb)]
    parts.append(squeeze.flush())
    return b"".join(parts)


def peak_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


async def test_compression_is_decoded_within_the_limit_layer_by_layer(
        pages: PageServer, tmp_path: Path):
    inner = gzip_bomb(300)  # 300 MB decoded, about 300 kB
    bomb = gzip.compress(inner, 9)  # gzip, gzip: a few kB on the wire
    assert len(bomb) < 10_000
    pages.add("/bomb", Page(bomb, headers={"Content-Encoding": "gzip, gzip"}))
    layered = zlib.compress(gzip.compress(ARTICLE))
    pages.add("/layered", Page(gzip.compress(layered),
                               headers={"Content-Encoding": "gzip, deflate, gzip"}))
    pages.add("/brotli", Page(b"\x1b\x00", headers={"Content-Encoding": "br"}))
    pages.add("/deep", Page(b"x", headers={"Content-Encoding": "gzip, gzip, gzip, gzip"}))
    pid_file = tmp_path / "server.pid"
    params = server_parameters({"ASK_ANOTHER_HOME": str(tmp_path / "home"),
                                "ASK_ANOTHER_ALLOW_HOSTS": pages.hostport})
    params.command, params.args = sys.executable, ["-c", WITH_PID.format(path=str(pid_file))]
    with (tmp_path / "stderr.log").open("w") as stderr:
        async with Client(stdio_client(params, errlog=stderr), read_timeout_seconds=60) as client:
            pid = int(pid_file.read_text())
            # Warm up (the first read imports httpx and trafilatura), then measure.
            error, text = await call(client, "read_article", url=pages.url("/layered"))
            assert not error and "Allenford voted" in json.loads(text)["content"], text
            before = peak_kb(pid)
            error, text = await call(client, "read_article", url=pages.url("/bomb"))
            grew_mb = (peak_kb(pid) - before) / 1000
            body = json.loads(text)
            assert not body["success"], body
            assert "larger than the 5 MB limit" in body["error"], body
            # The limit is 5 MB; httpx's own decoding grew the peak by the whole 300 MB.
            assert grew_mb < 40, f"peak memory grew by {grew_mb:.0f} MB"
            error, text = await call(client, "read_article", url=pages.url("/brotli"))
            assert "content encoding br is not supported" in json.loads(text)["error"], text
            error, text = await call(client, "read_article", url=pages.url("/deep"))
            assert "compressed 4 times over" in json.loads(text)["error"], text


def table_page(rows: int) -> bytes:
    cells = "".join(f"<tr><td>{i}</td><td>cell {i}</td><td>x</td></tr>" for i in range(rows))
    return f"<html><body><p>A table.</p><table>{cells}</table></body></html>".encode()


async def test_extraction_is_bounded_and_its_memory_given_back(pages: PageServer,
                                                               tmp_path: Path):
    pages.add("/table", Page(table_page(8_000)))  # 32,000 elements: parsed in a child
    pages.add("/dump", Page(table_page(50_000)))  # 200,000 elements: not parsed at all
    pid_file = tmp_path / "server.pid"
    params = server_parameters({"ASK_ANOTHER_HOME": str(tmp_path / "home"),
                                "ASK_ANOTHER_ALLOW_HOSTS": pages.hostport})
    params.command, params.args = sys.executable, ["-c", WITH_PID.format(path=str(pid_file))]
    pages.add("/small", Page(ARTICLE))
    with (tmp_path / "stderr.log").open("w") as stderr:
        async with Client(stdio_client(params, errlog=stderr), read_timeout_seconds=60) as client:
            pid = int(pid_file.read_text())
            error, text = await call(client, "read_article", url=pages.url("/small"))
            assert not error and "Allenford voted" in json.loads(text)["content"], text
            before = peak_kb(pid)
            error, text = await call(client, "read_article", url=pages.url("/table"))
            body = json.loads(text)
            assert body["success"] and "cell 1" in body["content"], body
            grew_mb = (peak_kb(pid) - before) / 1000
            # Parsed in the server's own thread, 15,000 rows grew its peak by about 100 MB. This
            # page has 8,000: with 15,000 the child took over its 15 s in CI's whole suite.
            assert grew_mb < 25, f"the server's peak memory grew by {grew_mb:.0f} MB"
            error, text = await call(client, "read_article", url=pages.url("/dump"))
            body = json.loads(text)
            assert not body["success"], body
            assert "the page has 200,00" in body["error"], body
            assert "more than the 150,000 that are extracted" in body["error"], body


async def test_an_extraction_past_its_deadline_is_killed_and_named() -> None:
    import pytest

    from ask_another.articles._extract import ExtractionRefused, extract_bounded

    with pytest.raises(ExtractionRefused, match=r"took longer than 0\.05 s"):
        await extract_bounded(table_page(15_000).decode(), timeout=0.05)
