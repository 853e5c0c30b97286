"""Benchmark of the ask-another MCP server: cold start over stdio, and completion fan-out.

Cold start: the time from spawning `python -m ask_another` to the `initialize` reply and to the
`tools/list` reply, speaking raw JSON-RPC lines over the pipes (no client library in the timed
path), median of 10 runs after one warm-up run, interleaved with the reference. Python runs with a
bytecode cache (a private `PYTHONPYCACHEPREFIX`, as an installed package has), because this
sandbox otherwise disables it; the extras also record one run without the cache, and three
runs started the way a client config starts it, `uv run ask-another` (uv's own start included).
The reference is what any server built on the MCP SDK pays at start-up: a bare `python -c
"import mcp.server.mcpserver"`. (Ours can come in under it: it imports the SDK with pydantic's
validator building deferred to first use, see ask_another/coldstart.py.) On a shared machine
wall time swings with other processes' load, so the extras also record each process's own CPU
time (user + system) at the same moments: the server's when its tools/list reply arrives, the
reference's when its import has finished.

Against the original ask-another (github.com/matthewgjohnson/ask-another at 8776f64, mcp 1.x, one
process with litellm; installed in its own environment, named by `ASK_ANOTHER_ORIGINAL`, e.g.
/tmp/orig/.venv/bin/ask-another), in the same run and against the same simulator:
- memory: the RSS of the server's process tree (server plus gateway worker) idle after
  `tools/list` and after 100 completions; ours also after the worker's idle exit
  (`ASK_ANOTHER_GATEWAY_IDLE`). Targets: after use <= 1.2x the original's, idle after the
  worker's exit <= 2x the original's idle; the extras split ours into server and worker and
  record the floors (a bare MCP 2.x server at tools/list, a process that only imported litellm);
- the first `completion` after the `tools/list` reply (10 starts; target < 1.0 s), with when
  the worker started after the server and each process's CPU;
- people commands: `ask-another models` (< 1.0 s) and `--help` (< 0.5 s), median of 5.

Cold start is also compared with a bare MCP 2.x server on trio with one tool (`BARE_SERVER`),
timed the same way to its `tools/list` reply (target: within 1.1x).

Fan-out: N concurrent `completion` tool calls through the real server (stdio subprocess, an
`mcp.Client` in this process) against the simulated provider in its own process with a fixed
latency, after one warm-up call that waits for litellm. The references, measured in the same run
against the same simulator: the ideal (one latency) and raw `litellm.acompletion` fan-out of the
same N calls in plain asyncio. Target: within 1.5x of raw. The server runs as a client
starts it, so its completions run in its gateway worker process (docs/server.md). The extras
also record CPU per call on both sides: the server's, from /proc during the fan-out, summed over
its process tree (server and worker); the raw side's process time around its gather.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import trio

from bench.report import Row

SUITE = "server"
REPO = Path(__file__).resolve().parents[1]
PYCACHE = Path(tempfile.gettempdir()) / "ask-another-bench-pycache"


def _env(home: Path, *, cache: bool = True, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("MODEL_", "ASK_ANOTHER_")) and k != "PYTHONDONTWRITEBYTECODE"}
    if cache:
        env["PYTHONPYCACHEPREFIX"] = str(PYCACHE)
    else:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env["PYTHONPYCACHEPREFIX"] = str(home / "no-cache")  # empty: nothing cached to read
    env["ASK_ANOTHER_HOME"] = str(home)  # default logging: what a user runs
    return env | extra


def shared_worker_pids(home: Path) -> list[int]:
    """The shared gateway workers of `home` (gateway/_shared.py), from their pid files."""
    pids = []
    for pid_file in (home / "gateway").glob("*.pid"):
        with contextlib.suppress(OSError, ValueError):
            pids.append(int(pid_file.read_text()))
    return pids


def stop_shared_workers(home: Path) -> None:
    """Stop the shared workers a run started in `home`, and wait until they are gone (they
    would otherwise wait out their idle time, and take their memory into the next row)."""
    pids = shared_worker_pids(home)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 20
    while any(Path(f"/proc/{pid}").exists() and _state(pid) != "Z" for pid in pids):
        if time.monotonic() > deadline:
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            break
        time.sleep(0.05)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "Z"


def _send(stdin: IO[bytes], message: dict[str, Any]) -> None:
    stdin.write(json.dumps(message).encode() + b"\n")
    stdin.flush()


def _reply(stdout: IO[bytes], request_id: int, *, tolerant: bool = False) -> dict[str, Any]:
    """The reply to `request_id`. `tolerant`: skip lines that are not JSON (the original
    ask-another lets litellm print to stdout now and then)."""
    while True:
        line = stdout.readline()
        if not line:
            raise RuntimeError("the server closed stdout before replying")
        if tolerant and not line.startswith(b"{"):
            continue
        message = json.loads(line)
        if message.get("id") == request_id:
            return message  # type: ignore[no-any-return]


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time a running process has used so far (from /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


SERVER = [sys.executable, "-m", "ask_another"]


BARE_SERVER = """
import trio
from mcp.server.mcpserver import MCPServer

server = MCPServer("bare")


@server.tool()
def echo(text: str) -> str:
    \"\"\"Echo the text.\"\"\"
    return text


trio.run(server.run_stdio_async)
"""


def cold_start_once(home: Path, *, cache: bool = True, command: list[str] = SERVER,
                    min_tools: int = 5) -> tuple[float, float, float]:
    """Seconds from spawn to the initialize reply and to the tools/list reply, and the server's
    CPU seconds at the tools/list reply (of the spawned process itself, not its children)."""
    # A private worker: it imports litellm beside the server's start, as a first session's does.
    env = _env(home, cache=cache, MODEL_SIM="openai/m1;key;http://127.0.0.1:9/v1",
               ASK_ANOTHER_GATEWAY_SHARED="0")
    start = time.perf_counter()
    process = subprocess.Popen(command, cwd=REPO, env=env,
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL)
    assert process.stdin is not None and process.stdout is not None
    try:
        _send(process.stdin, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "bench", "version": "0"}}})
        _reply(process.stdout, 1)
        initialized = time.perf_counter() - start
        _send(process.stdin, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        _send(process.stdin, {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}})
        tools = _reply(process.stdout, 2)
        listed = time.perf_counter() - start
        cpu = _cpu_seconds(process.pid)
        assert len(tools["result"]["tools"]) >= min_tools, tools
    finally:
        process.stdin.close()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    return initialized, listed, cpu


def sdk_import_once() -> tuple[float, float]:
    """Seconds from spawn to the end of a bare SDK import, and the CPU seconds used by then.

    Timed to the child's report that the import is done, not to its exit (tearing down the
    interpreter is not part of any server's start-up), as the server is timed to its reply.
    """
    env = _env(Path(tempfile.gettempdir()))
    start = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-c", "import mcp.server.mcpserver, os; print(sum(os.times()[:2]))"],
        cwd=REPO, env=env, stdout=subprocess.PIPE)
    assert process.stdout is not None
    line = process.stdout.readline()
    elapsed = time.perf_counter() - start
    if process.wait() != 0:
        raise RuntimeError("the bare SDK import failed")
    return elapsed, float(line)


def cold_start(runs: int) -> list[Row]:
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        bare = [sys.executable, "-c", BARE_SERVER]
        cold_start_once(home)  # warm-up: fills the bytecode cache
        sdk_import_once()
        cold_start_once(home, command=bare, min_tools=1)
        samples, floors, bares = [], [], []
        for _ in range(runs):  # interleaved, so load from other processes hits both alike
            samples.append(cold_start_once(home))
            floors.append(sdk_import_once())
            bares.append(cold_start_once(home, command=bare, min_tools=1))
        uncached = cold_start_once(home / "uncached", cache=False)
        uv = shutil.which("uv")
        through_uv = ([cold_start_once(home, command=[uv, "run", "--quiet", "ask-another"])[1]
                       for _ in range(3)] if uv else [])
        floor = statistics.median(f[0] for f in floors)
        bare_listed = statistics.median(b[1] for b in bares)
    init = statistics.median(s[0] for s in samples)
    listed = statistics.median(s[1] for s in samples)
    extra: dict[str, object] = {
        "runs": runs, "statistic": "median",
        "initialize_samples_s": [round(s[0], 3) for s in samples],
        "tools_list_samples_s": [round(s[1], 3) for s in samples],
        "sdk_import_samples_s": [round(f[0], 3) for f in floors],
        "bare_server_tools_list_samples_s": [round(b[1], 3) for b in bares],
        "server_cpu_at_tools_list_s": round(statistics.median(s[2] for s in samples), 3),
        "sdk_import_cpu_s": round(statistics.median(f[1] for f in floors), 3),
        "without_bytecode_cache_s": {"initialize": round(uncached[0], 3),
                                     "tools_list": round(uncached[1], 3)},
        # What a client configured with `uv run ask-another` waits for: uv's own start and
        # environment check, then the same server.
        "through_uv_run_tools_list_s": [round(t, 3) for t in through_uv],
    }
    reference = "python -c 'import mcp.server.mcpserver' (a bare SDK import)"
    return [
        Row(SUITE, "cold start to initialize reply (stdio)", init, "s", reference, floor,
            target="< 1.0 s", passed=init < 1.0, extra=extra),
        Row(SUITE, "cold start to tools/list reply (stdio)", listed, "s", reference, floor,
            target="< 1.0 s", passed=listed < 1.0, extra=extra),
        Row(SUITE, "cold start to tools/list reply vs a bare server", listed, "s",
            "a bare MCP 2.x server on trio with one tool, to tools/list", bare_listed,
            target="<= 1.1x", passed=listed <= 1.1 * bare_listed, extra=extra),
    ]


def _parents() -> dict[int, int]:
    """Every process's parent, from /proc."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError, ValueError):  # exited meanwhile
            parents[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
    return parents


def _over_trees(roots: set[int], measure: Callable[[int], float],
                parents: dict[int, int] | None = None) -> float:
    """`measure` summed over `roots` and all their descendants, each process once."""
    parents = _parents() if parents is None else parents
    total = 0.0
    for pid in parents:
        ancestor = pid
        while ancestor in parents and ancestor not in roots:
            ancestor = parents[ancestor]
        if ancestor in roots:
            with contextlib.suppress(OSError, IndexError, StopIteration, ValueError):
                total += measure(pid)
    return total


def _tree_cpu_seconds(marker: str) -> float:
    """User + system CPU of this process's children whose command line contains `marker`, and of
    all their descendants (the server's gateway worker process)."""
    parents = _parents()
    roots = set()
    for pid, ppid in parents.items():
        try:
            if ppid == os.getpid() and marker in Path(f"/proc/{pid}/cmdline").read_text():
                roots.add(pid)
        except OSError:
            continue
    return _over_trees(roots, _cpu_seconds, parents)


async def _ours(openai_base: str, calls: int, home: Path, worker: bool = True
                ) -> tuple[float, float]:
    """Wall seconds for the fan-out, and the server's CPU seconds during it."""
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    env = _env(home, MODEL_SIM=f"openai/m1;bench-key;{openai_base}",
               ASK_ANOTHER_GATEWAY_PROCESS="1" if worker else "0")
    parameters = StdioServerParameters(command=sys.executable, args=["-m", "ask_another"],
                                       env=env, cwd=str(REPO))
    with (home / "server-stderr.log").open("w") as errlog:
        async with Client(stdio_client(parameters, errlog=errlog),
                          read_timeout_seconds=300) as client:
            warm = await client.call_tool("completion", {"model": "sim", "prompt": "warm up"})
            assert not warm.is_error, warm
            failures = 0

            async def one(i: int) -> None:
                nonlocal failures
                result = await client.call_tool("completion",
                                                {"model": "sim", "prompt": f"question {i}"})
                failures += bool(result.is_error)

            cpu = _tree_cpu_seconds("ask_another")
            start = time.perf_counter()
            async with trio.open_nursery() as nursery:
                for i in range(calls):
                    nursery.start_soon(one, i)
            elapsed = time.perf_counter() - start
            cpu = _tree_cpu_seconds("ask_another") - cpu
    if failures:
        raise RuntimeError(f"{failures} of {calls} completion calls failed")
    return elapsed, cpu


async def _raw(openai_base: str, calls: int) -> tuple[float, float]:
    """Wall and CPU seconds of the fan-out in plain asyncio."""
    import litellm

    litellm.suppress_debug_info = True

    async def one(i: int) -> Any:
        return await litellm.acompletion(
            model="openai/m1", api_base=openai_base, api_key="bench-key", max_retries=0,
            messages=[{"role": "user", "content": f"question {i}"}])

    await one(-1)  # warm-up: client creation, first-call imports
    start, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(one(i) for i in range(calls)))
    return time.perf_counter() - start, time.process_time() - cpu


def fanout(calls: int, latency: float, *, thread_too: bool = False) -> list[Row]:
    """`thread_too`: also time the server with completions in its gateway thread (no worker
    process), as it ran before the worker, for the extras."""
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    from ask_another.simulator import Simulator

    with Simulator.process(latency=latency) as urls, tempfile.TemporaryDirectory() as tmp:
        raw, raw_cpu = asyncio.run(_raw(urls.openai_base, calls))
        (Path(tmp) / "worker").mkdir()
        (Path(tmp) / "thread").mkdir()
        try:
            ours, ours_cpu = trio.run(_ours, urls.openai_base, calls, Path(tmp) / "worker")
        finally:
            stop_shared_workers(Path(tmp) / "worker")
        thread = (trio.run(_ours, urls.openai_base, calls, Path(tmp) / "thread", False)
                  if thread_too else None)
    extra: dict[str, object] = {
        "calls": calls, "latency_s": latency, "ideal_s": latency,
        "raw_litellm_s": round(raw, 3), "ours_s": round(ours, 3),
        # CPU per call: what the ratio is made of (the server's summed over server and worker).
        "server_cpu_ms_per_call": round(1000 * ours_cpu / calls, 2),
        "raw_cpu_ms_per_call": round(1000 * raw_cpu / calls, 2),
    }
    if thread is not None:
        extra["thread_gateway_s"] = round(thread[0], 3)
        extra["thread_gateway_cpu_ms_per_call"] = round(1000 * thread[1] / calls, 2)
    return [
        Row(SUITE, f"{calls} concurrent completions via MCP vs raw litellm", ours, "s",
            "raw litellm.acompletion fan-out (asyncio)", raw, target="<= 1.5x raw",
            passed=ours <= 1.5 * raw, extra=extra),
        Row(SUITE, f"{calls} concurrent completions via MCP vs ideal", ours, "s",
            f"ideal (one {latency * 1000:.0f} ms latency)", latency, extra=extra),
    ]


ORIGINAL_ENV = "ASK_ANOTHER_ORIGINAL"


def _pss_mb(pid: int) -> float:
    """Proportional set size (MiB): RSS with each page shared by N processes counted 1/N (the
    interpreter, libpython and extension modules that a server and its worker both map)."""
    rollup = Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()
    return int(next(x for x in rollup if x.startswith("Pss:")).split()[1]) / 1024


def _tree_pss_mb(root: int) -> float:
    """PSS of `root` and all its descendants (MiB), from /proc."""
    return _over_trees({root}, _pss_mb)


def _tree_rss_mb(root: int) -> float:
    """RSS of `root` and all its descendants (MiB), from /proc."""
    return _over_trees({root}, _rss_mb)


def _tree_cpu_of(root: int) -> float:
    """User + system CPU of `root` and its children (the gateway worker), from /proc."""
    total = _cpu_seconds(root)
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == root:
                total += _cpu_seconds(int(stat.parent.name))
    return total


def _children(root: int) -> int:
    count = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == root:
                count += 1
    return count


class _Session:
    """A stdio server spoken to in raw JSON-RPC lines (no client library in the timed path)."""

    def __init__(self, command: list[str], env: dict[str, str], *,
                 tolerant: bool = False) -> None:
        self._tolerant = tolerant
        self.process = subprocess.Popen(command, cwd=REPO, env=env, stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self._ids = iter(range(10, 1_000_000))

    def open(self) -> None:
        assert self.process.stdin is not None and self.process.stdout is not None
        _send(self.process.stdin, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "bench", "version": "0"}}})
        _reply(self.process.stdout, 1, tolerant=self._tolerant)
        _send(self.process.stdin, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        _send(self.process.stdin, {"jsonrpc": "2.0", "id": 2, "method": "tools/list",
                                   "params": {}})
        _reply(self.process.stdout, 2, tolerant=self._tolerant)

    def call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        assert self.process.stdin is not None and self.process.stdout is not None
        request_id = next(self._ids)
        _send(self.process.stdin, {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                                   "params": {"name": name, "arguments": arguments}})
        reply = _reply(self.process.stdout, request_id, tolerant=self._tolerant)
        result = reply.get("result") or {}
        if "error" in reply or result.get("isError"):
            raise RuntimeError(f"{name} failed: {reply}")
        return result  # type: ignore[no-any-return]

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def _original_command() -> list[str] | None:
    path = os.environ.get(ORIGINAL_ENV)
    return [path] if path and Path(path).exists() else None


def _ours_session(home: Path, openai_base: str, **extra: str) -> _Session:
    return _Session(SERVER, _env(home, MODEL_SIM=f"openai/m1;bench-key;{openai_base}", **extra))


def _original_session(command: list[str], home: Path, openai_base: str) -> _Session:
    env = _env(home, PROVIDER_OPENAI="openai;bench-key", FAVOURITES="openai/m1",
               OPENAI_API_BASE=openai_base, OPENAI_BASE_URL=openai_base,
               LITELLM_LOCAL_MODEL_COST_MAP="True")
    return _Session(command, env, tolerant=True)


def _rss_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text().splitlines()
    return int(next(x for x in status if x.startswith("VmRSS:")).split()[1]) / 1024


LITELLM_IMPORT = """
import os
os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
from ask_another.gateway import _litellm
_litellm.load(quick=True)
status = open("/proc/self/status").read().splitlines()
print(int(next(x for x in status if x.startswith("VmRSS:")).split()[1]) / 1024,
      sum(os.times()[:2]))
"""


def _litellm_import() -> tuple[float, float]:
    """RSS (MiB) and CPU seconds of a process that has only imported litellm as the worker does
    (validators deferred): the floor under the worker's memory and its start."""
    done = subprocess.run([sys.executable, "-c", LITELLM_IMPORT], cwd=REPO, check=True,
                          env=_env(Path(tempfile.gettempdir())), capture_output=True, text=True)
    rss, cpu = done.stdout.split()
    return float(rss), float(cpu)


def memory(completions: int) -> list[Row]:
    """Server tree RSS idle, after `completions` completions and (ours) after the worker's idle
    exit, against the original ask-another in the same run."""
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    from ask_another.simulator import Simulator

    original = _original_command()
    idle_exit = 3.0
    with Simulator.process(latency=0.0) as urls, tempfile.TemporaryDirectory() as tmp:
        # As a client starts it: its worker is the home's shared one, started by this server
        # (so its child while it runs) and counted with it.
        ours = _ours_session(Path(tmp), urls.openai_base,
                             ASK_ANOTHER_GATEWAY_IDLE=str(idle_exit))
        try:
            ours.open()
            ours.call("completion", {"model": "sim", "prompt": "warm"})  # the worker is up
            ours_idle = _sessions_rss_mb([ours], Path(tmp))
            for i in range(completions):
                ours.call("completion", {"model": "sim", "prompt": f"question {i}"})
            ours_used = _sessions_rss_mb([ours], Path(tmp))
            ours_used_pss = _sessions_rss_mb([ours], Path(tmp), pss=True)
            server_used = _rss_mb(ours.process.pid)
            # The connection closes after idle_exit without a call, the worker as long after.
            deadline = time.monotonic() + 2 * idle_exit + 20
            while _children(ours.process.pid) and time.monotonic() < deadline:
                time.sleep(0.1)
            time.sleep(0.5)
            ours_after_exit = _sessions_rss_mb([ours], Path(tmp))
            worker_gone = _children(ours.process.pid) == 0 and not shared_worker_pids(Path(tmp))
            ours_server_alone = ours_after_exit
        finally:
            ours.close()
            stop_shared_workers(Path(tmp))
        orig_idle = orig_used = orig_used_pss = None
        if original is not None:
            theirs = _original_session(original, Path(tmp), urls.openai_base)
            try:
                theirs.open()
                time.sleep(2)  # litellm is imported at the first call; this is its idle start
                orig_idle = _tree_rss_mb(theirs.process.pid)
                for i in range(completions):
                    theirs.call("completion", {"model": "openai/m1", "prompt": f"question {i}"})
                orig_used = _tree_rss_mb(theirs.process.pid)
                orig_used_pss = _tree_pss_mb(theirs.process.pid)
            finally:
                theirs.close()
        bare = _Session([sys.executable, "-c", BARE_SERVER], _env(Path(tmp)))
        try:
            bare.open()
            bare_server = _rss_mb(bare.process.pid)
        finally:
            bare.close()
    extra: dict[str, object] = {
        "completions": completions, "idle_exit_s": idle_exit,
        "ours_after_one_call_mib": round(ours_idle, 1),
        "ours_after_use_mib": round(ours_used, 1),
        # Where it goes: the server process and the gateway worker, against what each would be
        # at the least: a bare MCP 2.x server on trio at its tools/list reply, and a process that
        # has only imported litellm (as the worker does, validators deferred).
        "ours_server_after_use_mib": round(server_used, 1),
        "ours_worker_after_use_mib": round(ours_used - server_used, 1),
        "bare_server_at_tools_list_mib": round(bare_server, 1),
        "litellm_import_alone_mib": round(_litellm_import()[0], 1),
        "ours_after_worker_exit_mib": round(ours_server_alone, 1), "worker_gone": worker_gone,
        "original_idle_mib": None if orig_idle is None else round(orig_idle, 1),
        "original_after_use_mib": None if orig_used is None else round(orig_used, 1),
        # PSS counts a page that server and worker both map (the interpreter, libpython,
        # pydantic-core and other extension modules) once, not twice as the RSS sum does.
        "ours_after_use_pss_mib": round(ours_used_pss, 1),
        "original_after_use_pss_mib": None if orig_used_pss is None else round(orig_used_pss, 1),
    }
    reference = "the original ask-another (8776f64, mcp 1.x)"
    return [
        Row(SUITE, f"server tree RSS after {completions} completions", ours_used, "MiB",
            reference, orig_used, target="<= 1.2x",
            passed=None if orig_used is None else ours_used <= 1.2 * orig_used, extra=extra),
        Row(SUITE, "server tree RSS idle after the worker's idle exit", ours_after_exit, "MiB",
            reference + ", idle", orig_idle, target="<= 2x",
            passed=None if orig_idle is None else ours_after_exit <= 2 * orig_idle, extra=extra),
    ]


def _start_ticks(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])


def _worker_start_offset(root: int) -> float | None:
    """Seconds between the start of `root` and of its child (the gateway worker), to the
    kernel's 10 ms clock tick; None without a child."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == root:
                ticks = _start_ticks(int(stat.parent.name)) - _start_ticks(root)
                return round(ticks / os.sysconf("SC_CLK_TCK"), 2)
    return None


def first_completion(starts: int) -> list[Row]:
    """Seconds from the tools/list reply to the first completion's reply, over fresh starts of a
    first session: no gateway worker runs on the home (the one the last start shared is stopped
    first), so each start's worker imports litellm beside the server's start."""
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    from ask_another.simulator import Simulator

    samples, server_cpu, worker_cpu, listed, spawned = [], [], [], [], []
    with Simulator.process(latency=0.0) as urls, tempfile.TemporaryDirectory() as tmp:
        for n in range(starts + 1):  # the first fills the bytecode cache
            began = time.perf_counter()
            session = _ours_session(Path(tmp), urls.openai_base)
            try:
                session.open()
                at_list = _cpu_seconds(session.process.pid)
                start = time.perf_counter()
                session.call("completion", {"model": "sim", "prompt": "first"})
                if n:
                    samples.append(time.perf_counter() - start)
                    listed.append(start - began)
                    spawned.append(_worker_start_offset(session.process.pid))
                    server_cpu.append(at_list)
                    worker_cpu.append(_tree_cpu_of(session.process.pid)
                                      - _cpu_seconds(session.process.pid))
            finally:
                session.close()
                stop_shared_workers(Path(tmp))
    median = statistics.median(samples)
    extra: dict[str, object] = {
        "starts": starts, "samples_s": [round(x, 3) for x in samples],
        "min_s": round(min(samples), 3), "max_s": round(max(samples), 3),
        # On a quiet two-core machine the worker's start-up runs beside the server's, so the
        # wait is about the worker's CPU to its first answer minus the server's CPU to tools/list.
        # The wait is the worker's start (after the server's) plus its CPU to the first answer,
        # less the server's time to its tools/list reply.
        "tools_list_reply_s": [round(x, 3) for x in listed],
        "worker_started_after_server_s": spawned,
        "server_cpu_at_tools_list_s": [round(x, 3) for x in server_cpu],
        "worker_cpu_at_first_answer_s": [round(x, 3) for x in worker_cpu],
        # Of which litellm's import alone, in a process of its own (median of 3).
        "litellm_import_alone_cpu_s": round(statistics.median(
            _litellm_import()[1] for _ in range(3)), 3),
    }
    return [Row(SUITE, "first completion after tools/list, no worker running yet", median, "s",
                target="< 1.0 s", passed=max(samples) < 1.0, extra=extra)]


def _sessions_rss_mb(sessions: list[_Session], home: Path, *, pss: bool = False) -> float:
    """RSS (or PSS) in MiB of the process trees of `sessions` and of the shared worker of `home`
    (the child of the server that started it, while that one runs), each process counted once."""
    roots = {s.process.pid for s in sessions} | set(shared_worker_pids(home))
    return _over_trees(roots, _pss_mb if pss else _rss_mb)


def shared_worker(sessions: int, completions: int, starts: int) -> list[Row]:
    """`sessions` servers on one home with a worker each (`ASK_ANOTHER_GATEWAY_SHARED=0`) and
    as a client starts them (the default: one shared worker), side by side: the RSS of all their
    trees (and the shared worker) after `completions` completions each; and the first completion
    after tools/list of a new session while the others run, over `starts` starts each."""
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    from ask_another.simulator import Simulator

    rss: dict[str, float] = {}
    first: dict[str, list[float]] = {"0": [], "1": []}
    with Simulator.process(latency=0.0) as urls:
        for shared in ("0", "1"):
            # A short home: the shared worker's socket path is at most 104-108 bytes.
            with tempfile.TemporaryDirectory(prefix="aa-") as tmp:
                home = Path(tmp)
                extra = {"ASK_ANOTHER_GATEWAY_IDLE": "120"}
                if shared == "0":
                    extra["ASK_ANOTHER_GATEWAY_SHARED"] = "0"
                running = [_ours_session(home, urls.openai_base, **extra)
                           for _ in range(sessions)]
                try:
                    for session in running:
                        session.open()
                    for i in range(completions):
                        for session in running:
                            session.call("completion", {"model": "sim", "prompt": f"q {i}"})
                    rss[shared] = _sessions_rss_mb(running, home)
                    for n in range(starts + 1):  # the first fills the bytecode cache
                        late = _ours_session(home, urls.openai_base, **extra)
                        try:
                            late.open()
                            start = time.perf_counter()
                            late.call("completion", {"model": "sim", "prompt": "first"})
                            if n:
                                first[shared].append(time.perf_counter() - start)
                        finally:
                            late.close()
                finally:
                    for session in running:
                        session.close()
                    stop_shared_workers(home)
    extra_info: dict[str, object] = {
        "sessions": sessions, "completions_each": completions, "starts": starts,
        "tree_rss_off_mib": round(rss["0"], 1), "tree_rss_on_mib": round(rss["1"], 1),
        "first_completion_off_s": [round(x, 3) for x in first["0"]],
        "first_completion_on_s": [round(x, 3) for x in first["1"]],
    }
    off_first, on_first = statistics.median(first["0"]), statistics.median(first["1"])
    return [
        Row(SUITE, f"RSS of {sessions} sessions on one home (one shared worker)", rss["1"],
            "MiB", "a worker per session (SHARED=0)", rss["0"], extra=extra_info),
        Row(SUITE, "first completion after tools/list, another session running", on_first,
            "s", "a worker per session (SHARED=0)", off_first, extra=extra_info),
    ]


def people_commands(runs: int) -> list[Row]:
    """`ask-another models` and `--help`, median wall time of `runs`, with the bytecode cache."""
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        env = _env(Path(tmp), MODEL_GPT4="openai/gpt-4o;key",
                   MODEL_SIM="openai/m1;key;http://127.0.0.1:9/v1")
        for args, target in ((["models"], 1.0), (["--help"], 0.5)):
            times = []
            for n in range(runs + 1):
                start = time.perf_counter()
                subprocess.run([*SERVER, *args], cwd=REPO, env=env, check=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                if n:
                    times.append(time.perf_counter() - start)
            median = statistics.median(times)
            rows.append(Row(SUITE, f"ask-another {' '.join(args)}", median, "s",
                            target=f"< {target:g} s", passed=median < target,
                            extra={"runs": runs, "samples_s": [round(t, 3) for t in times]}))
    return [*rows, _ask(runs)]


def _ask(runs: int) -> Row:
    """`ask-another ask` against the simulator, start to exit: while the home's shared worker
    runs (another session's, or the last `ask`'s), against a private worker each time."""
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    from ask_another.simulator import Simulator

    times: dict[str, list[float]] = {"shared": [], "private": []}
    with Simulator.process(latency=0.0) as urls, \
            tempfile.TemporaryDirectory(prefix="aa-") as tmp:
        home = Path(tmp)
        try:
            for kind, extra in (("shared", {}), ("private", {"ASK_ANOTHER_GATEWAY_SHARED": "0"})):
                env = _env(home, MODEL_SIM=f"openai/m1;key;{urls.openai_base}", **extra)
                for n in range(runs + 1):  # the first starts the shared worker
                    start = time.perf_counter()
                    subprocess.run([*SERVER, "ask", "sim", "Is 1 prime?"], cwd=REPO, env=env,
                                   check=True, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
                    if n:
                        times[kind].append(time.perf_counter() - start)
        finally:
            stop_shared_workers(home)
    return Row(SUITE, "ask-another ask, the home's worker running", statistics.median(
        times["shared"]), "s", "a worker of its own (SHARED=0)",
        statistics.median(times["private"]),
        extra={"runs": runs, "shared_s": [round(t, 3) for t in times["shared"]],
               "private_s": [round(t, 3) for t in times["private"]]})


def run(quick: bool) -> list[Row]:
    # Quick mode still pays for several litellm imports (each server start's worker, the
    # original's, the raw reference's).
    if quick:
        return (cold_start(runs=1) + people_commands(runs=1) + first_completion(starts=1)
                + memory(completions=5) + shared_worker(sessions=2, completions=2, starts=1)
                + fanout(calls=10, latency=0.05))
    return (cold_start(runs=10) + people_commands(runs=5) + first_completion(starts=10)
            + memory(completions=100) + shared_worker(sessions=4, completions=100, starts=5)
            + fanout(calls=500, latency=0.2, thread_too=True))


if __name__ == "__main__":
    from bench.report import print_table

    print_table(run("--quick" in sys.argv))
