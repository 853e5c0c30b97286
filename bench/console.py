"""Benchmark of the console: what it adds to a served node's memory, and what its live updates
cost with ten open pages.

A real `serve --http` (tokens file, a private gateway worker) on a fresh home. Measured on the
server's own process (the gateway worker does no work here and is left out):

- memory: the console's static part, measured in a fresh interpreter that has imported the
  server (`ask_another.server.http`): RSS before and after importing the console and rendering
  each page's templates once (Jinja2 compiles them on first use); plus the node's RSS growth
  from idle after start to the end of the ten open pages' window. Target: <= 15 MiB together.
- CPU: ten logged-in pages (4 jobs tables, 3 approvals pages, 3 runtime pages: the live
  fragments their script polls, each with its page's cookie, as the browser's fetch does, at
  the fastest pace the script polls, every `POLL_SECONDS`) for a window, against the same node
  over a window of the same length with no page open. Target: the difference < 1% of one core.

The pages are driven by httpx rather than ten Chromium tabs: the server sees the same requests
(the browser tests check that the script makes them), and this suite needs no browser.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import trio

from ask_another.console._app import POLL_SECONDS  # the pages refresh at this pace
from bench.report import Row
from bench.server import _cpu_seconds, _rss_mb

SUITE = "console"
REPO = Path(__file__).resolve().parents[1]
LISTENING = re.compile(r"http\.listening .*?url=(\S+)")
PAGES = ["/console/jobs?part=live"] * 4 + ["/console/approvals?part=live"] * 3 + [
    "/console/runtime?part=live"] * 3

STATIC = """
import os, secrets
def rss():
    status = open("/proc/self/status").read().splitlines()
    return int(next(x for x in status if x.startswith("VmRSS:")).split()[1]) / 1024
import ask_another.server.http
before = rss()
from ask_another.console import Console, Login
console = Console(None, secrets.token_bytes(32), Login("open"))
for name in console.templates.list_templates():
    console.templates.get_template(name)
print(rss() - before)
"""


def _static_mb() -> float:
    out = subprocess.run([sys.executable, "-c", STATIC], capture_output=True, text=True,
                         check=True, cwd=REPO)
    return float(out.stdout.strip().splitlines()[-1])


async def _window(pid: int, seconds: float) -> float:
    """CPU seconds `pid` used over `seconds` of wall time."""
    began = _cpu_seconds(pid)
    await trio.sleep(seconds)
    return _cpu_seconds(pid) - began


async def _page(client: httpx.AsyncClient, path: str, until: float, offset: float,
                counts: list[int]) -> None:
    await trio.sleep(offset)  # pages opened at different moments, as people do
    while trio.current_time() < until:
        response = await client.get(path)
        assert response.status_code == 200, (path, response.status_code)
        counts[0] += 1
        await trio.sleep(POLL_SECONDS)


async def run(quick: bool) -> list[Row]:
    window = 6.0 if quick else 60.0
    static = _static_mb()
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        env = {"PATH": os.environ.get("PATH", ""), "ASK_ANOTHER_HOME": str(home),
               "ASK_ANOTHER_LOG_LEVEL": "INFO"}
        from ask_another.server.auth import TokensFile

        token = TokensFile(home / "tokens.json").add("root", admin=True)
        log = Path(tmp) / "serve.log"
        with log.open("w") as err:
            process = await trio.lowlevel.open_process(
                [sys.executable, "-m", "ask_another", "serve", "--http", "--port", "0"],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, env=env,
                cwd=REPO)
        try:
            with trio.fail_after(60):
                while True:  # another process writes the log: nothing here to wait on
                    found = LISTENING.search(log.read_text())
                    if found:
                        break
                    await trio.sleep(0.1)
            base = found.group(1).removesuffix("/mcp")
            await trio.sleep(3)  # the worker's litellm import, which this node does at start
            idle_cpu = await _window(process.pid, window)
            idle_rss = _rss_mb(process.pid)
            clients = []
            for _ in PAGES:
                client = httpx.AsyncClient(base_url=base)
                login = await client.post("/console/login", data={"token": token})
                assert login.status_code == 303, login.text
                client.cookies = login.cookies
                clients.append(client)
            counts = [0]
            began = time.monotonic()
            async with trio.open_nursery() as nursery:
                until = trio.current_time() + window
                for i, (client, path) in enumerate(zip(clients, PAGES, strict=True)):
                    nursery.start_soon(_page, client, path, until, i * POLL_SECONDS / len(PAGES),
                                       counts)
                busy_cpu = await _window(process.pid, window)
            busy_seconds = time.monotonic() - began
            grown = _rss_mb(process.pid) - idle_rss
            for client in clients:
                await client.aclose()
        finally:
            process.kill()
            await process.wait()
    share = max(0.0, busy_cpu - idle_cpu) / window * 100
    extra = {"window_s": window, "requests": counts[0], "requests_per_s": counts[0] /
             busy_seconds, "idle_cpu_s": idle_cpu, "pages_cpu_s": busy_cpu,
             "static_mb": static, "grown_mb": grown, "store": "a fresh home (no jobs)"}
    return [
        Row(SUITE, "RSS added by the console (static + ten open pages)", static + grown, "MiB",
            target="<= 15 MiB", passed=static + grown <= 15, extra=extra),
        Row(SUITE, "live updates, ten open pages: CPU over the idle node", share,
            "% of a core", target="< 1%", passed=share < 1.0, extra=extra),
    ]
