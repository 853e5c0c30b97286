"""Benchmark of what traces cost (issue 43): CPU per `completion` call of the real stdio server's
process tree (the server and its gateway worker), and of the client, three ways, interleaved.

- compiled out: this code with `ask_another/tracing.py` and `gateway/_spans.py` replaced by stubs
  that do nothing (`_STUB_TRACING`, `_STUB_SPANS`), copied into a temporary directory and run
  from there: what the server costs with no tracing code of ours at all (the MCP SDK's own
  request span stays, as it did before traces);
- off: this code with no `OTEL_*` setting (target: within 1.02x of compiled out);
- on: this code exporting every span with the SDK's OTLP/HTTP exporter to a receiver in this
  process on 127.0.0.1 (its overhead).

Every call carries a `_meta.traceparent`, as a host that traces sends: the context the MCP SDK
then makes current is what the off path must not pass on. The code before traces (5ae7cac) is
not a variant any more: main has moved on from it (the worker's HTTP handler, among others), so
its ratio measured those changes too.

Each server is started once (a private worker, `ASK_ANOTHER_GATEWAY_SHARED=0`, so the worker is
in the server's process tree) and warmed; then `cycles` cycles, each a short block of `calls`
concurrent completions on each of the three in a rotating order, against the simulator in its
own process. A block's CPU is read from each process's own CPU clock (`clock_getcpuclockid`,
nanoseconds, all threads, not /proc's 10 ms ticks), from the block's start to `_SETTLE` after
its last answer (the exporter's batches, sent every `OTEL_BSP_SCHEDULE_DELAY` = 20 ms here, land
in their block), for the server's tree and for the client (this process's main thread: the
receiver's thread is the collector's work, not ours). The ratios are per cycle, so a busy spell
of the machine weighs on both sides of a ratio; the rows give their median, quartiles and range,
and the load average before and after.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import trio

from bench.report import Row
from bench.server import REPO, _env, _over_trees

SUITE = "tracing"
TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
_SETTLE = 0.1  # seconds after a block's last answer still counted in it (5 export delays)

_STUB_TRACING = '''"""Tracing compiled out (bench/tracing.py): tracing.py's names, doing nothing."""
import contextlib
import os

CAPTURE_CONTENT = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
DEFAULT_SERVICE = "ask-another"
STATEMENTS = "ask_another.store.statements"
JOB_ID = "ask_another.job.id"
_OFF = contextlib.nullcontext()


def wanted(environ=None):
    return False


def capture_content(environ=None):
    value = (os.environ if environ is None else environ).get(CAPTURE_CONTENT, "")
    return value.strip().lower() == "true"


def configure(environ=None):
    return False


def traceparent():
    return None


def span(name, attributes=None, *, parent=None, client=False, job=None):
    return _OFF


def count_statement():
    pass
'''
_STUB_SPANS = '''"""Provider spans compiled out (bench/tracing.py)."""
import contextlib

__all__ = ["completed", "provider_span", "searched"]


def provider_span(operation, model, kwargs, traceparent):
    return contextlib.nullcontext()


def completed(span, result):
    pass


def searched(span, result):
    pass
'''


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


_libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)


def _cpu_clock(pid: int) -> float:
    """CPU seconds process `pid` has used, all its threads, from its CPU-time clock (ns)."""
    clock = ctypes.c_int()
    if _libc.clock_getcpuclockid(pid, ctypes.byref(clock)) != 0:
        raise OSError(ctypes.get_errno(), f"no CPU clock for process {pid}")
    return time.clock_gettime(clock.value)


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
            for i in range(3):  # litellm's first calls, and the exporter's first batch
                warm = await client.call_tool("completion", {"model": "sim", "prompt": f"w{i}"},
                                              meta={"traceparent": TRACEPARENT})
                assert not warm.is_error, warm
            yield client


async def _block(client: Any, home: Path, calls: int) -> tuple[float, float]:
    """CPU milliseconds per call of the server's tree, and of the client, for `calls`
    concurrent completions."""
    failures = 0

    async def one(i: int) -> None:
        nonlocal failures
        result = await client.call_tool("completion", {"model": "sim", "prompt": f"q {i}"},
                                        meta={"traceparent": TRACEPARENT})
        failures += bool(result.is_error)

    roots = _roots(home)
    assert roots, f"no server found for {home}"
    before, client_before = _over_trees(roots, _cpu_clock), time.thread_time()
    async with trio.open_nursery() as nursery:
        for i in range(calls):
            nursery.start_soon(one, i)
    await trio.sleep(_SETTLE)
    tree, client_cpu = (_over_trees(roots, _cpu_clock) - before,
                        time.thread_time() - client_before)
    if failures:
        raise RuntimeError(f"{failures} of {calls} completion calls failed")
    return 1000 * tree / calls, 1000 * client_cpu / calls


def _loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


STUB, OFF, ON = "tracing compiled out", "tracing off", "OTLP exporter on"


def _stubbed(root: Path) -> Path:
    """This package with its tracing stubbed out, in a directory of its own under `root`."""
    stub = root / "stub"
    shutil.copytree(REPO / "ask_another", stub / "ask_another",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (stub / "ask_another" / "tracing.py").write_text(_STUB_TRACING)
    (stub / "ask_another" / "gateway" / "_spans.py").write_text(_STUB_SPANS)
    for home in ("h-stub", "h-off", "h-on"):
        (root / home).mkdir()
    return stub


async def _measure(openai_base: str, root: Path, stub: Path, calls: int, cycles: int
                   ) -> dict[str, Any]:
    receiver = _Receiver()
    runs: dict[str, list[dict[str, Any]]] = {STUB: [], OFF: [], ON: []}
    load = [_loadavg()]
    try:
        async with _session(root / "h-stub", openai_base, stub) as c_stub, \
                _session(root / "h-off", openai_base, REPO) as c_off, \
                _session(root / "h-on", openai_base, REPO,
                         OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url,
                         OTEL_BSP_SCHEDULE_DELAY="20") as c_on:
            sessions = {STUB: (c_stub, root / "h-stub"), OFF: (c_off, root / "h-off"),
                        ON: (c_on, root / "h-on")}
            names = list(sessions)
            for cycle in range(cycles):
                for name in names[cycle % 3:] + names[:cycle % 3]:
                    client, home = sessions[name]
                    tree, client_cpu = await _block(client, home, calls)
                    runs[name].append({"cycle": cycle, "tree_ms": round(tree, 4),
                                       "client_ms": round(client_cpu, 4)})
    finally:
        receiver.close()
    load.append(_loadavg())
    return {"runs": runs, "receiver": {"requests": receiver.requests, "bytes": receiver.bytes},
            "loadavg": load}


def _quartiles(values: list[float]) -> list[float]:
    if len(values) < 2:
        return [values[0]] * 3
    low, median, high = statistics.quantiles(values, n=4)
    return [low, median, high]


def _ratio_row(name: str, measured: dict[str, Any], ours: str, reference: str,
               cpu: Callable[[dict[str, Any]], float], target: str | None,
               limit: float | None) -> Row:
    runs = measured["runs"]
    ratios = [cpu(o) / cpu(r) for o, r in zip(runs[ours], runs[reference], strict=True)
              if cpu(r)]
    median = statistics.median(ratios)
    return Row(SUITE, name, statistics.median(cpu(o) for o in runs[ours]), "ms",
               reference, statistics.median(cpu(r) for r in runs[reference]),
               target=target, passed=None if limit is None else median <= limit,
               extra={"ratio_median": round(median, 4),
                      "ratio_quartiles": [round(q, 4) for q in _quartiles(ratios)],
                      "ratio_range": [round(min(ratios), 4), round(max(ratios), 4)],
                      "cycles": len(ratios), "loadavg": measured["loadavg"],
                      "receiver": measured["receiver"], "runs": runs})


def _tree(run: dict[str, Any]) -> float:
    return float(run["tree_ms"])


def _with_client(run: dict[str, Any]) -> float:
    return float(run["tree_ms"]) + float(run["client_ms"])


def run(quick: bool) -> list[Row]:
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    from ask_another.simulator import Simulator

    calls, cycles = (5, 3) if quick else (20, 60)
    with Simulator.process(latency=0.05) as urls, tempfile.TemporaryDirectory() as tmp:
        measured = trio.run(_measure, urls.openai_base, Path(tmp), _stubbed(Path(tmp)), calls,
                            cycles)
    per = f"{calls} concurrent completions x {cycles} cycles, CPU per call"
    return [
        _ratio_row(f"{per} (server + worker): tracing off vs compiled out", measured, OFF, STUB,
                   _tree, "<= 1.02x", 1.02),
        _ratio_row(f"{per} (server + worker + client): tracing off vs compiled out", measured,
                   OFF, STUB, _with_client, "<= 1.02x", 1.02),
        _ratio_row(f"{per} (server + worker): OTLP exporter vs off", measured, ON, OFF, _tree,
                   None, None),
    ]
