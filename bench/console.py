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

- pages with 10,000 jobs: another node, on a home whose store holds 10,000 jobs of an admin
  (one waiting for an answer, the oldest): the time of each console page an approver opens (the
  Jobs list, its last pages by cursor, a search, a filter; the Approvals page and its live
  part), median of `PAGE_ROUNDS` loopback requests each, the slowest page reported. Target:
  under 100 ms.

The pages are driven by httpx rather than ten Chromium tabs: the server sees the same requests
(the browser tests check that the script makes them), and this suite needs no browser.
"""

from __future__ import annotations

import os
import re
import statistics
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
JOBS = 10_000
PAGE_ROUNDS = 15
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


async def _serve(home: Path, log: Path) -> tuple[trio.Process, str]:
    """A `serve --http` on `home`: the process and its base URL."""
    env = {"PATH": os.environ.get("PATH", ""), "ASK_ANOTHER_HOME": str(home),
           "ASK_ANOTHER_LOG_LEVEL": "INFO"}
    with log.open("w") as err:
        process = await trio.lowlevel.open_process(
            [sys.executable, "-m", "ask_another", "serve", "--http", "--port", "0"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, env=env, cwd=REPO)
    with trio.fail_after(60):
        while True:  # another process writes the log: nothing here to wait on
            found = LISTENING.search(await trio.Path(log).read_text())
            if found:
                return process, found.group(1).removesuffix("/mcp")
            await trio.sleep(0.1)


async def _fill(home: Path, count: int) -> str:
    """`count` finished jobs in the home's store, the oldest of them waiting for a permission
    (through `JobStore`, the one way into the job tables); the waiting job's id."""
    from ask_another.interaction.types import PermissionRequest, Question
    from ask_another.store import open_database
    from ask_another.store.jobs import JobRecord, job_store

    asks = Question(kind="permission", tool_call_id="call-1", expires_at=time.time() + 86_400,
                    request=PermissionRequest(tool_call_id="call-1", tool="read_article",
                                              server="host", class_="read",
                                              arguments={"url": "https://example.com/a"}))
    start = time.time() - count
    async with open_database(home / "ask-another.sqlite3") as db:
        store = job_store(db)
        # Owned by another process with a live lease, as a job of another node: this node
        # leaves it alone (a job of nobody's would be taken over, and fail: no such model).
        now = time.time()
        await store.insert(JobRecord(id="r-waiting000", model="openai/m1", query="the one "
                                     "that waits", created_at=start - 1, status="in_progress",
                                     waiting_for=[asks], owner="another-node",
                                     lease_expires=now + 86_400), now)

        async def some(first: int) -> None:
            for n in range(first, min(first + 100, count - 1)):
                await store.insert(JobRecord(
                    id=f"r-{n:010}", model=("openai/m1", "gemini/g")[n % 2],
                    query=f"question {n} about structured concurrency", created_at=start + n,
                    ended_at=start + n + 1, status="completed"))

        async with trio.open_nursery() as nursery:  # group commit: 100 writes in flight
            for first in range(0, count - 1, 100):
                nursery.start_soon(some, first)
    return "r-waiting000"


async def _page_times(quick: bool) -> Row:
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        from ask_another.server.auth import TokensFile

        token = TokensFile(home / "tokens.json").add("root", admin=True)
        waiting = await _fill(home, JOBS)
        process, base = await _serve(home, Path(tmp) / "serve.log")
        try:
            async with httpx.AsyncClient(base_url=base) as client:
                login = await client.post("/console/login", data={"token": token})
                assert login.status_code == 303, login.text
                client.cookies = login.cookies
                deep = "/console/jobs"
                for _ in range(3 if quick else 20):  # 20 pages of 50 back, by the cursor
                    older = re.search(r'href="([^"]+)">Older jobs',
                                      (await client.get(deep)).text)
                    assert older, deep
                    deep = older.group(1).replace("&amp;", "&")
                paths = {"jobs": "/console/jobs", "jobs (live part)": "/console/jobs?part=live",
                         "jobs, a page deep by cursor": deep,
                         "jobs, a search of the questions": "/console/jobs?q=question+9999",
                         "jobs, by state and model": "/console/jobs?status=unfinished&model="
                                                     "openai/m1",
                         "approvals": "/console/approvals",
                         "approvals (live part)": "/console/approvals?part=live"}
                rounds = 5 if quick else PAGE_ROUNDS
                samples: dict[str, list[float]] = {name: [] for name in paths}
                for _ in range(rounds):  # interleaved, so a busy moment touches every page
                    for name, path in paths.items():
                        began = time.perf_counter()
                        response = await client.get(path)
                        samples[name].append((time.perf_counter() - began) * 1000)
                        assert response.status_code == 200, (path, response.status_code)
                        if name.startswith("approvals"):
                            assert waiting in response.text, "the waiting job is out of sight"
                times = {name: statistics.median(ms) for name, ms in samples.items()}
        finally:
            process.kill()
            await process.wait()
    slowest = max(times, key=lambda name: times[name])
    return Row(SUITE, f"pages with {JOBS:,} jobs: the slowest page's median time", times[slowest],
               "ms", target="< 100 ms", passed=times[slowest] < 100,
               extra={"slowest": slowest, "jobs": JOBS, "rounds": rounds,
                      "median_ms": {name: round(ms, 2) for name, ms in times.items()},
                      "load_average": os.getloadavg()[0]})


async def run(quick: bool) -> list[Row]:
    window = 6.0 if quick else 60.0
    static = _static_mb()
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        from ask_another.server.auth import TokensFile

        token = TokensFile(home / "tokens.json").add("root", admin=True)
        process, base = await _serve(home, Path(tmp) / "serve.log")
        try:
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
        await _page_times(quick),
        Row(SUITE, "RSS added by the console (static + ten open pages)", static + grown, "MiB",
            target="<= 15 MiB", passed=static + grown <= 15, extra=extra),
        Row(SUITE, "live updates, ten open pages: CPU over the idle node", share,
            "% of a core", target="< 1%", passed=share < 1.0, extra=extra),
    ]
