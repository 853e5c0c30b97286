"""Chromium driven by Playwright for the console's browser tests, and a real `serve --http`.

Playwright cannot download its own browsers here: it drives Debian's `chromium`
(`/usr/bin/chromium`, installed by .ci/run where it is missing), with the flags that keep it off
the network. Where no Chromium can be had, `chromium_path()` is None and the tests skip with one
line saying so.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from http_server import process_env, server_command
from stdio_server import REPO

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
LISTENING = re.compile(r"http\.listening .*?url=(\S+)")
SCREENSHOTS = os.environ.get("ASK_ANOTHER_SCREENSHOTS")
"""A directory to save each page's screenshot in (docs/console/ is made this way)."""


def chromium_path() -> str | None:
    for candidate in ("/usr/bin/chromium", shutil.which("chromium"),
                      shutil.which("chromium-browser")):
        if candidate and Path(candidate).exists():
            return candidate
    return None


@dataclass
class Served:
    base: str  # http://127.0.0.1:PORT
    process: subprocess.Popen[bytes]
    log: Path

    @property
    def mcp(self) -> str:
        return f"{self.base}/mcp"


@contextmanager
def serve_http(env: dict[str, str], log: Path, *args: str) -> Iterator[Served]:
    """A real `serve --http` on a free port (extra `args`), killed afterwards."""
    with log.open("w") as err:
        process = subprocess.Popen(server_command(*args), stdin=subprocess.DEVNULL,
                                   stdout=subprocess.DEVNULL, stderr=err,
                                   env=process_env(env), cwd=REPO)
    try:
        deadline = time.monotonic() + 60
        while True:
            found = LISTENING.search(log.read_text())
            if found:
                break
            if process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"serve --http did not start:\n{log.read_text()}")
            time.sleep(0.05)
        yield Served(found.group(1).removesuffix("/mcp"), process, log)
    finally:
        process.kill()
        process.wait()


ARTICLE = b"""<!doctype html><html><head><title>Trio 0.35 released</title></head><body>
<article><h1>Trio 0.35 released</h1>
<p>Trio 0.35 brings cancellation reasons to every cancel scope, so a program can say why it
cancelled a task and the task can read it. The release also makes memory channels cheaper.</p>
<p>Upgrading is a matter of changing the pin; no code changes are needed for most programs, and
the test suite of the library runs on CPython 3.10 to 3.14 and on PyPy.</p>
</article></body></html>"""


@contextmanager
def article_site() -> Iterator[str]:
    """An article on 127.0.0.1 (an allowed host in these tests); yields its URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(ARTICLE)))
            self.end_headers()
            self.wfile.write(ARTICLE)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/trio-035"
    finally:
        server.shutdown()
        server.server_close()


CONSOLE_LINK = re.compile(r"http://127\.0\.0\.1:\d+/console/login/once\?code=\S+")


@contextmanager
def console_process(env: dict[str, str], log: Path) -> Iterator[str]:
    """A real `ask-another console --no-browser` over the home of `env`; yields its login link
    (read from its stdout), and stops it with Ctrl-C (SIGINT) afterwards, which must end it with
    no call in flight at once: well before its shutdown deadline, set long here (a browser's
    idle keep-alive connections once held it for the whole deadline)."""
    import signal

    out = log.with_suffix(".out")
    with log.open("w") as err, out.open("w") as stdout:
        process = subprocess.Popen(
            [sys.executable, "-m", "ask_another", "console", "--no-browser"],
            stdin=subprocess.DEVNULL, stdout=stdout, stderr=err,
            env=process_env({**env, "ASK_ANOTHER_SHUTDOWN_SECONDS": "120"}), cwd=REPO)
    try:
        deadline = time.monotonic() + 60
        while not (found := CONSOLE_LINK.search(out.read_text())):
            if process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"console did not start:\n{log.read_text()}")
            time.sleep(0.05)
        yield found.group(0)
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
