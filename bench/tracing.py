"""Benchmark of what traces cost (issue 43): CPU per `completion` call of the real stdio server's
process tree (the server and its gateway worker), three ways, interleaved.

- today: the code before traces (the commit `REFERENCE`, exported with `git archive` into a
  temporary directory and run from there, on this environment's packages);
- off: this code with no `OTEL_*` setting (target: within 1.02x of today);
- on: this code exporting every span with the SDK's OTLP/HTTP exporter to a receiver in this
  process on 127.0.0.1 (its overhead).

Each server is started once (a private worker, `ASK_ANOTHER_GATEWAY_SHARED=0`, so the worker is
in the server's process tree) and warmed with one call; each round runs `calls` concurrent
completions through an `mcp.Client` on each of the three in turn, in a rotating order, against the
simulator in its own process. The CPU is user + system time of the server's tree from /proc
around the calls. The ratios are the median of the per-round ratios, with their range and the
load average; on a shared machine a 2% difference is within the noise of one round, so the
rounds are what to read.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import threading
from collections.abc import AsyncIterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import trio

from bench.report import Row
from bench.server import REPO, _cpu_seconds, _env, _over_trees

SUITE = "tracing"
REFERENCE = "5ae7cac"  # main before traces


class _Receiver:
    """An OTLP/HTTP endpoint that takes every export and counts its bytes."""

    def __init__(self) -> None:
        self.requests = 0
        self.bytes = 0
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                receiver.bytes += len(self.rfile.read(int(self.headers["Content-Length"])))
                receiver.requests += 1
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *_args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _roots(home: Path) -> set[int]:
    """This process's children serving `home` (the server; its worker is below it)."""
    marker = f"ASK_ANOTHER_HOME={home}".encode()
    found = set()
    for entry in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            if ppid == os.getpid() and marker in (entry / "environ").read_bytes().split(b"\0"):
                found.add(int(entry.name))
    return found


@contextlib.asynccontextmanager
async def _session(home: Path, openai_base: str, code: Path, **extra: str
                   ) -> AsyncIterator[Any]:
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    env = _env(home, MODEL_SIM=f"openai/m1;bench-key;{openai_base}",
               ASK_ANOTHER_GATEWAY_SHARED="0", ASK_ANOTHER_RATE_PER_MINUTE="0",
               PYTHONPATH=str(code), **extra)
    parameters = StdioServerParameters(command=sys.executable, args=["-m", "ask_another"],
                                       env=env, cwd=str(code))
    with (home / "server-stderr.log").open("w") as errlog:
        async with Client(stdio_client(parameters, errlog=errlog),
                          read_timeout_seconds=300) as client:
            warm = await client.call_tool("completion", {"model": "sim", "prompt": "warm up"})
            assert not warm.is_error, warm
            yield client


async def _round(client: Any, home: Path, calls: int) -> float:
    """CPU milliseconds per call of the server's tree for `calls` concurrent completions."""
    failures = 0

    async def one(i: int) -> None:
        nonlocal failures
        result = await client.call_tool("completion", {"model": "sim", "prompt": f"q {i}"})
        failures += bool(result.is_error)

    roots = _roots(home)
    assert roots, f"no server found for {home}"
    before = _over_trees(roots, _cpu_seconds)
    async with trio.open_nursery() as nursery:
        for i in range(calls):
            nursery.start_soon(one, i)
    cpu = _over_trees(roots, _cpu_seconds) - before
    if failures:
        raise RuntimeError(f"{failures} of {calls} completion calls failed")
    return 1000 * cpu / calls


def _loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


TODAY, OFF, ON = "today (before traces)", "tracing off", "OTLP exporter on"


def _today(root: Path) -> Path:
    """The package as it was at `REFERENCE`, in a directory of its own under `root`."""
    today = root / "today"
    today.mkdir()
    archive = subprocess.run(["git", "archive", REFERENCE, "ask_another"], cwd=REPO,
                             check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(today)], input=archive, check=True)
    assert not (today / "ask_another" / "tracing.py").exists()
    for home in ("h-today", "h-off", "h-on"):
        (root / home).mkdir()
    return today


async def _measure(openai_base: str, root: Path, today: Path, calls: int, rounds: int
                   ) -> dict[str, list[dict[str, Any]]]:
    receiver = _Receiver()
    runs: dict[str, list[dict[str, Any]]] = {TODAY: [], OFF: [], ON: []}
    try:
        async with _session(root / "h-today", openai_base, today) as c_today, \
                _session(root / "h-off", openai_base, REPO) as c_off, \
                _session(root / "h-on", openai_base, REPO,
                         OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url) as c_on:
            sessions = {TODAY: (c_today, root / "h-today"), OFF: (c_off, root / "h-off"),
                        ON: (c_on, root / "h-on")}
            names = list(sessions)
            for r in range(rounds):
                for name in names[r % 3:] + names[:r % 3]:
                    client, home = sessions[name]
                    cpu = await _round(client, home, calls)
                    runs[name].append({"round": r, "cpu_ms_per_call": round(cpu, 3),
                                       "loadavg": _loadavg()})
    finally:
        receiver.close()
    runs["receiver"] = [{"requests": receiver.requests, "bytes": receiver.bytes}]
    return runs


def _ratio_row(name: str, runs: dict[str, list[dict[str, Any]]], ours: str, reference: str,
               target: str | None, limit: float | None) -> Row:
    ratios = [o["cpu_ms_per_call"] / r["cpu_ms_per_call"]
              for o, r in zip(runs[ours], runs[reference], strict=True) if r["cpu_ms_per_call"]]
    median = statistics.median(ratios)
    return Row(SUITE, name, statistics.median(o["cpu_ms_per_call"] for o in runs[ours]), "ms",
               reference, statistics.median(r["cpu_ms_per_call"] for r in runs[reference]),
               target=target, passed=None if limit is None else median <= limit,
               extra={"ratio_median": round(median, 3),
                      "ratio_range": [round(min(ratios), 3), round(max(ratios), 3)],
                      "rounds": {k: v for k, v in runs.items()}})


def run(quick: bool) -> list[Row]:
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    from ask_another.simulator import Simulator

    calls, rounds = (10, 2) if quick else (200, 5)
    with Simulator.process(latency=0.05) as urls, tempfile.TemporaryDirectory() as tmp:
        runs = trio.run(_measure, urls.openai_base, Path(tmp), _today(Path(tmp)), calls,
                        rounds)
    return [
        _ratio_row(f"{calls} concurrent completions, CPU per call: tracing off vs before",
                   runs, OFF, TODAY, "<= 1.02x", 1.02),
        _ratio_row(f"{calls} concurrent completions, CPU per call: OTLP exporter vs off",
                   runs, ON, OFF, None, None),
    ]
