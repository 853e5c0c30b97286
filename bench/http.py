"""Benchmark of the shared service: `serve --http` nodes under load from another process.

Everything is real and on loopback: the simulated provider in its own process
(`Simulator.process`, a fixed latency per request), PostgreSQL started from the machine's binaries
by the helper the tests use (tests/support/postgres_server.py; without PostgreSQL the PostgreSQL
rows are skipped and the run says so), `python -m ask_another serve --http` nodes as subprocesses
(each with its gateway worker), and the load generated here, in this process: N concurrent MCP
clients (`mcp.Client` over Streamable HTTP, 2026-07-28 era, one bearer token, the rate limit off)
each calling `completion` K times in a row, all released at once after every client has
connected.

Measured in the same run, with the same clients and the same simulator:
- the references (bench/reference_servers.py): the floor, a bare MCP SDK server on the same
  hypercorn/trio worker making the chat call with httpx, and the peer, a bare SDK server on
  uvicorn calling `litellm.acompletion` in-process; each round runs the same load on the floor,
  the peer and one node of ours (SQLite) in turn, in a rotating order, three rounds, the three
  servers started once: ours / reference per round (CPU per call of the whole process tree,
  p50, throughput, and our server process alone against the floor's), quoted as the median
  ratio with its range, and the load average at each run. A reference that cannot keep up has
  its failed calls counted, not fatal; litellm's "connection pool saturated" warnings in our
  nodes' logs are counted too;
- through one node on the SQLite store (the reference: what a single node always was; its
  round with the median p50 from the interleaved rounds above), through
  one node on PostgreSQL, and through two nodes on one PostgreSQL (clients split between them,
  as a load balancer would): p50 and p99 of a call's latency and the throughput (calls per
  second from the release to the last answer);
- the floor: the same N clients sending the same requests straight to the simulator with httpx
  (no MCP, no ask-another): what the provider's latency and this process's client side cost;
- on the two nodes' database, PostgreSQL's own statement log (`log_statement = all` for that
  database): statements and transactions per completion, heartbeats included;
- check_research with 1,000 Gemini jobs spread over the two nodes (started through MCP, half on
  each, held in_progress by the simulator and polled rarely): p50 / p99 of `check_research(job_id)`
  from 20 concurrent clients on random nodes, split by whether the asked node owns the job (its
  actor answers) or the other one does (a read of the job's row), and of the jobs table;
- then 20 of node 0's jobs cancelled through node 1, one at a time: the call's latency, and how
  long the owner took to take each request (from the store's `research_requests` rows; the
  target is the issue's "within a second").

Ratios are ours / reference: latency against the one-node SQLite run and against the floor,
throughput likewise. The extras record the CPU each side used during each load: this process
(the clients), the nodes with their gateway workers (also per call), and PostgreSQL. On 2
shared cores the nodes, the simulator, PostgreSQL and this load generator all compete for the
CPU: the figures are for comparing settings side by side, not an absolute capacity.
"""

from __future__ import annotations

import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio

from bench.report import Row

SUITE = "http"
REPO = Path(__file__).resolve().parents[1]
SUPPORT = REPO / "tests" / "support"
GEMINI = "gemini/deep-research-pro-preview-12-2025"
KEY = "bench-key"


def _support() -> Any:
    """The tests' helpers for server processes and PostgreSQL (tests/support is no package)."""
    if str(SUPPORT) not in sys.path:
        sys.path.insert(0, str(SUPPORT))
    import http_server
    import postgres_server

    return http_server, postgres_server


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _node_env(home: Path, tokens: Path, sim_url: str, openai_base: str,
              database_url: str | None) -> dict[str, str]:
    env = {
        "ASK_ANOTHER_HOME": str(home),
        "ASK_ANOTHER_TOKENS_FILE": str(tokens),
        "ASK_ANOTHER_RATE_PER_MINUTE": "0",  # one token makes all the load
        "ASK_ANOTHER_MAX_JOBS_PER_USER": "0",
        "ASK_ANOTHER_CONFIRM_USD": "1000000000",  # simulated jobs: no spend confirmation
        "ASK_ANOTHER_POLL_SECONDS": "60",  # the check_research jobs wait, polled rarely
        "MODEL_SIM": f"openai/m1;{KEY};{openai_base}",
        "MODEL_GDR": f"{GEMINI};{KEY};{sim_url}",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    }
    if database_url is not None:
        env["ASK_ANOTHER_DATABASE_URL"] = database_url
    return env


@asynccontextmanager
async def _nodes(count: int, root: Path, urls: Any, database_url: str | None
                 ) -> AsyncIterator[tuple[list[str], str, list[int]]]:
    """`count` nodes on one store, started at once (each worker imports litellm: seconds);
    yields their URLs, the token and their process ids; the nodes are killed afterwards."""
    support, _ = _support()
    from ask_another.server.auth import TokensFile

    await trio.Path(root).mkdir(parents=True, exist_ok=True)
    tokens = root / "tokens.json"
    token = TokensFile(tokens).add("bench")
    found: list[str] = [""] * count
    pids: list[int] = [0] * count
    ready = [trio.Event() for _ in range(count)]
    done = trio.Event()

    async def node(n: int) -> None:
        env = _node_env(root / f"node{n}", tokens, urls.url, urls.openai_base, database_url)
        async with support.http_server(env, root / f"node{n}.log") as server:
            found[n], pids[n] = server.url, server.process.pid
            ready[n].set()
            await done.wait()

    async with trio.open_nursery() as nursery:
        for n in range(count):
            nursery.start_soon(node, n)
        for event in ready:
            await event.wait()
        try:
            yield found, token, pids
        finally:
            done.set()


async def _client_load(urls: list[str], token: str, clients: int, calls: int,
                       call: Callable[[Any, int], Awaitable[None]],
                       open_client: Callable[[str, str], Any],
                       at_release: Callable[[], None] = lambda: None
                       ) -> tuple[list[float], float]:
    """`clients` concurrent clients (client i on urls[i % len]), each making `calls` calls in a
    row once all have connected (and made one call each, not timed); the latencies and the wall
    time from the release. `at_release` is called just before it."""
    latencies: list[float] = []
    failures: list[str] = []
    connected = 0
    all_connected = trio.Event()
    go = trio.Event()

    async def one(i: int) -> None:
        counted = False

        def count() -> None:
            nonlocal connected, counted
            if not counted:
                counted = True
                connected += 1
                if connected == clients:
                    all_connected.set()

        try:
            await one_client(i, count)
        except Exception as exc:  # a server that drops the connection (the peer under load)
            failures.append(f"client {i}: {type(exc).__name__}: {exc}"[:200])
            count()  # never keeps the others waiting for it

    async def one_client(i: int, count: Callable[[], None]) -> None:
        async with open_client(urls[i % len(urls)], token) as client:
            await call(client, -1 - i)  # connected and warm: its first request is not timed
            count()
            await go.wait()
            for k in range(calls):
                start = time.perf_counter()
                try:
                    await call(client, i * calls + k)
                except Exception as exc:  # a reference that cannot keep up: counted, not fatal
                    failures.append(f"{type(exc).__name__}: {exc}"[:200])
                    continue
                latencies.append(time.perf_counter() - start)

    async with trio.open_nursery() as nursery:
        for i in range(clients):
            nursery.start_soon(one, i)
        with trio.fail_after(600):
            await all_connected.wait()
        at_release()
        started = time.perf_counter()
        go.set()
    wall = time.perf_counter() - started
    if failures and not latencies:
        raise RuntimeError(f"every call failed: {failures[0]}")
    _FAILURES.extend(failures)
    return latencies, wall


_FAILURES: list[str] = []  # calls that failed in the last load (read by `_node_load`)


def _mcp_client(url: str, token: str) -> Any:
    support, _ = _support()
    return support.http_client_for(url, token, "auto")


async def _completion(client: Any, i: int) -> None:
    result = await client.call_tool("completion", {"model": "sim", "prompt": f"question {i}"})
    if result.is_error:
        raise RuntimeError(f"completion failed: {result.content}")


@asynccontextmanager
async def _raw_client(url: str, token: str) -> AsyncIterator[Any]:
    import httpx

    async with httpx.AsyncClient(base_url=url, timeout=60) as http:
        yield http


async def _raw_completion(http: Any, i: int) -> None:
    response = await http.post("/chat/completions", headers={"Authorization": f"Bearer {KEY}"},
                               json={"model": "m1", "messages": [
                                   {"role": "user", "content": f"question {i}"}]})
    response.raise_for_status()


def _load_row(name: str, latencies: list[float], wall: float) -> dict[str, Any]:
    return {"name": name, "calls": len(latencies), "wall_s": round(wall, 3),
            "p50_ms": 1000 * _pct(latencies, 0.5), "p99_ms": 1000 * _pct(latencies, 0.99),
            "throughput": len(latencies) / wall}


async def _check_research(urls: list[str], token: str, jobs: int, checks: int,
                          database_url: str, cancel_count: int) -> dict[str, Any]:
    """Start `jobs` Gemini jobs spread over the nodes, then time check_research on them."""
    started: list[tuple[str, int]] = []  # (job id, node index)
    starters = 20

    async def start_some(n: int) -> None:
        node = n % len(urls)
        async with _mcp_client(urls[node], token) as client:
            for i in range(n, jobs, starters):
                result = await client.call_tool("start_research", {
                    "model": "gdr", "query": f"[[sim:polls=100000]] job {i}", "timeout": 0})
                text = "".join(getattr(c, "text", "") for c in result.content)
                words = (w.strip(".,:;()") for w in text.replace('"', " ").split())
                job_id = next((w for w in words if w.startswith("r-") and len(w) == 12), None)
                if result.is_error or job_id is None:
                    raise RuntimeError(f"start_research failed: {text}")
                started.append((job_id, node))

    begin = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for n in range(starters):
            nursery.start_soon(start_some, n)
    start_seconds = time.perf_counter() - begin

    own: list[float] = []
    other: list[float] = []
    table: list[float] = []
    rng = random.Random(18)
    checkers = 20

    async def check_some(n: int) -> None:
        node = n % len(urls)
        async with _mcp_client(urls[node], token) as client:
            for k in range(checks // checkers):
                job_id, owner_node = rng.choice(started)
                begin = time.perf_counter()
                result = await client.call_tool("check_research", {"job_id": job_id})
                elapsed = time.perf_counter() - begin
                text = "".join(getattr(c, "text", "") for c in result.content)
                if result.is_error or job_id not in text:
                    raise RuntimeError(f"check_research {job_id}: {text[:300]}")
                (own if owner_node == node else other).append(elapsed)
                if k % 10 == 0:
                    begin = time.perf_counter()
                    result = await client.call_tool("check_research", {})
                    table.append(time.perf_counter() - begin)
                    if result.is_error:
                        raise RuntimeError("check_research (the table) failed")

    async with trio.open_nursery() as nursery:
        for n in range(checkers):
            nursery.start_soon(check_some, n)
    both = own + other
    cancels = await _cross_node_cancels(urls, token, started, database_url, cancel_count)
    return {"jobs": len(started), "checks": len(both), "start_s": round(start_seconds, 2),
            "p50_ms": 1000 * _pct(both, 0.5), "p99_ms": 1000 * _pct(both, 0.99),
            "own_p50_ms": 1000 * _pct(own, 0.5), "own_p99_ms": 1000 * _pct(own, 0.99),
            "other_p50_ms": 1000 * _pct(other, 0.5), "other_p99_ms": 1000 * _pct(other, 0.99),
            "table_p50_ms": 1000 * _pct(table, 0.5), "table_p99_ms": 1000 * _pct(table, 0.99),
            "table_calls": len(table)} | cancels


async def _cross_node_cancels(urls: list[str], token: str, started: list[tuple[str, int]],
                              database_url: str, count: int) -> dict[str, Any]:
    """Cancel `count` of node 0's jobs through node 1, one after another: how long the call
    takes, and how long the owner took to take the request (`taken_at - created_at` of its
    row: both nodes run on this machine, so their clocks agree)."""
    import psycopg

    calls: list[float] = []
    async with _mcp_client(urls[1], token) as client:
        for job_id in [job for job, node in started if node == 0][:count]:
            begin = time.perf_counter()
            result = await client.call_tool("cancel_research", {"job_id": job_id})
            calls.append(time.perf_counter() - begin)
            text = "".join(getattr(c, "text", "") for c in result.content)
            if result.is_error or "was cancelled" not in text:
                raise RuntimeError(f"cancel_research {job_id} through node 1: {text[:300]}")

    def taken() -> list[float]:
        with psycopg.connect(database_url, autocommit=True) as conn:
            return [float(r[0]) for r in conn.execute(
                "SELECT taken_at - created_at FROM research_requests WHERE kind = 'cancel'")]

    delivery = await trio.to_thread.run_sync(taken)
    return {"cross_node_cancels": len(calls),
            "cancel_call_p50_ms": 1000 * _pct(calls, 0.5),
            "cancel_call_max_ms": 1000 * max(calls, default=float("nan")),
            "cancel_taken_p50_ms": 1000 * _pct(delivery, 0.5),
            "cancel_taken_max_ms": 1000 * max(delivery, default=float("nan"))}


def _cpu_now() -> float:
    return sum(os.times()[:2])


async def _node_load(name: str, urls: list[str], token: str, pids: list[int],
                     pg_pid: int | None, clients: int, calls: int) -> dict[str, Any]:
    """The MCP load through these nodes, with the CPU each side used meanwhile: this process
    (the clients), the nodes with their gateway workers, and PostgreSQL's server processes."""
    from bench.server import _cpu_seconds, _tree_cpu_of

    def others() -> tuple[float, float, float]:
        return (sum(_tree_cpu_of(pid) for pid in pids), sum(_cpu_seconds(pid) for pid in pids),
                _tree_cpu_of(pg_pid) if pg_pid is not None else 0.0)

    before: list[float] = []

    def released() -> None:
        before.extend((_cpu_now(), *others()))

    _FAILURES.clear()
    latencies, wall = await _client_load(urls, token, clients, calls, _completion, _mcp_client,
                                         released)
    nodes_after, servers_after, pg_after = others()
    cpu, nodes_cpu, servers_cpu, pg_cpu = before
    return _load_row(name, latencies, wall) | {
        "failed_calls": len(_FAILURES), "first_failure": _FAILURES[0] if _FAILURES else None,
        "client_cpu_s": round(_cpu_now() - cpu, 2),
        "nodes_cpu_s": round(nodes_after - nodes_cpu, 2),
        "nodes_cpu_ms_per_call": round(1000 * (nodes_after - nodes_cpu) / len(latencies), 3),
        "server_cpu_ms_per_call": round(1000 * (servers_after - servers_cpu) / len(latencies),
                                        3),
        "postgres_cpu_s": round(pg_after - pg_cpu, 2)}


def _log_statements(database_url: str) -> None:
    """Have PostgreSQL log every statement run on this database (its sessions from now on)."""
    import psycopg

    with psycopg.connect(database_url, autocommit=True) as conn:
        name = conn.execute("SELECT current_database()").fetchone()
        assert name is not None
        conn.execute(f'ALTER DATABASE "{name[0]}" SET log_statement = \'all\'')


def _statements(log: Path, offset: int, calls: int) -> dict[str, Any]:
    """The statements and transactions PostgreSQL logged since `offset`, per completion of the
    `calls` made since (the nodes' heartbeats and request polls included: a few per second per
    node)."""
    import re

    text = log.read_bytes()[offset:].decode(errors="replace")
    statements = re.findall(r"LOG:  (?:statement|execute [^:]*): (\S+)", text)
    return {"pg_statements_per_call": round(len(statements) / calls, 2),
            "pg_transactions_per_call": round(statements.count("BEGIN") / calls, 2),
            "pg_usage_inserts_per_call": round(text.count("INSERT INTO usage") / calls, 2)}


@asynccontextmanager
async def _reference(kind: str, urls: Any, root: Path) -> AsyncIterator[tuple[str, int]]:
    """A reference server (bench/reference_servers.py) on the simulator: its URL and pid."""
    support, _ = _support()
    log = root / f"{kind}.log"
    with log.open("w") as err:
        process = await trio.lowlevel.open_process(
            [sys.executable, "-m", "bench.reference_servers", kind, urls.openai_base, KEY],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, cwd=REPO,
            env=support.process_env({"LITELLM_LOCAL_MODEL_COST_MAP": "True"}))
    try:
        found = await support.wait_for_line(log, support.LISTENING, process)
        yield found.group(1), process.pid
    finally:
        if process.returncode is None:
            process.kill()
        with trio.CancelScope(shield=True):
            await process.wait()


FLOOR = "floor: bare SDK + httpx"
PEER = "peer: bare SDK + litellm on asyncio"
OURS = "ours: 1 node, SQLite"


async def _interleaved(urls: Any, root: Path, clients: int, calls: int, rounds: int
                       ) -> dict[str, list[dict[str, Any]]]:
    """The same load on the floor, the peer and one node of ours, `rounds` times, interleaved
    (each round in another order), all three servers started once beforehand: each round's
    ratios compare loads run minutes apart at most, under the same load from others."""
    runs: dict[str, list[dict[str, Any]]] = {FLOOR: [], PEER: [], OURS: []}
    async with _reference("floor", urls, root) as floor, \
            _reference("peer", urls, root) as peer, \
            _nodes(1, root / "ours", urls, None) as (ours_urls, token, pids):
        targets = {FLOOR: ([floor[0]], "", [floor[1]]), PEER: ([peer[0]], "", [peer[1]]),
                   OURS: (ours_urls, token, pids)}
        names = list(targets)
        for r in range(rounds):
            for name in names[r % 3:] + names[:r % 3]:
                target_urls, target_token, target_pids = targets[name]
                run = await _node_load(name, target_urls, target_token, target_pids, None,
                                       clients, calls)
                runs[name].append(run | {"round": r, "loadavg": _loadavg()})
    return runs


def _loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def _saturation_warnings(root: Path) -> int:
    """litellm's "connection pool saturated" warnings in every node's log of this run."""
    return sum(log.read_text(errors="replace").count("connection pool saturated")
               for log in root.rglob("node*.log"))


Measured = tuple[list[dict[str, Any]], dict[str, Any] | None, str | None]


async def _measure(clients: int, calls: int, latency: float, jobs: int, checks: int,
                   one_pg_node: bool, rounds: int,
                   interleaved: dict[str, list[dict[str, Any]]]) -> Measured:
    from ask_another.simulator import Simulator

    _, pg = _support()
    loads: list[dict[str, Any]] = []
    research: dict[str, Any] | None = None
    with Simulator.process(latency=latency) as sim, tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        released: list[float] = []
        latencies, wall = await _client_load([sim.openai_base], "", clients, calls,
                                             _raw_completion, _raw_client,
                                             lambda: released.append(_cpu_now()))
        loads.append(_load_row("raw httpx to the simulator", latencies, wall)
                     | {"client_cpu_s": round(_cpu_now() - released[0], 2)})

        interleaved.update(await _interleaved(sim, root, clients, calls, rounds))
        # The one-node rows below: our round with the median p50.
        ours = sorted(interleaved[OURS], key=lambda run: run["p50_ms"])[len(interleaved[OURS]) // 2]
        loads.append(ours | {"name": "1 node, SQLite"})

        bindir = pg.find_bindir()
        if bindir is None:
            interleaved["saturation_warnings"] = [{"count": _saturation_warnings(root)}]
            return loads, None, ("PostgreSQL is not installed (apt-get install postgresql): "
                                 "the PostgreSQL rows are skipped")
        server = pg.PostgresServer.start(bindir)
        try:
            assert server.process is not None
            pg_pid = server.process.pid
            if one_pg_node:
                async with _nodes(1, root / "pg1", sim, server.new_database()) as (
                        urls, token, pids):
                    loads.append(await _node_load("1 node, PostgreSQL", urls, token, pids,
                                                  pg_pid, clients, calls))
            database_url = server.new_database()
            _log_statements(database_url)
            async with _nodes(2, root / "pg2", sim, database_url) as (urls, token, pids):
                offset = server.log_path.stat().st_size
                load = await _node_load("2 nodes, one PostgreSQL", urls, token, pids, pg_pid,
                                        clients, calls)
                # Every completion since the offset: the timed ones and each client's first.
                loads.append(load | _statements(server.log_path, offset,
                                                load["calls"] + clients))
                research = await _check_research(urls, token, jobs, checks, database_url,
                                                 cancel_count=5 if clients < 50 else 20)
        finally:
            server.stop()
        interleaved["saturation_warnings"] = [{"count": _saturation_warnings(root)}]
    return loads, research, None


async def run(quick: bool) -> list[Row]:
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    if quick:
        clients, calls, latency, jobs, checks = 10, 2, 0.05, 40, 40
    else:
        clients, calls, latency, jobs, checks = 200, 10, 0.2, 1000, 2000
    rounds = 3
    interleaved: dict[str, list[dict[str, Any]]] = {}
    # Quick mode (CI) starts three nodes instead of four: it checks that every part runs.
    loads, research, skipped = await _measure(clients, calls, latency, jobs, checks,
                                              one_pg_node=not quick, rounds=rounds,
                                              interleaved=interleaved)
    if skipped:
        print(f"bench http: {skipped}", file=sys.stderr)
    by_name = {load["name"]: load for load in loads}
    floor = by_name["raw httpx to the simulator"]
    sqlite = by_name["1 node, SQLite"]
    extra: dict[str, object] = {"clients": clients, "calls_per_client": calls,
                                "latency_s": latency, "runs": loads,
                                "postgres": "skipped: " + skipped if skipped else "yes"}
    rows: list[Row] = []
    for load in loads:
        name = load["name"]
        if load is floor:
            rows.append(Row(SUITE, f"{clients} clients: p50, {name}", load["p50_ms"], "ms",
                            f"ideal (one {latency * 1000:.0f} ms latency)", latency * 1000,
                            extra=extra))
            continue
        for metric, reference in (("p50", floor), ("p99", floor)):
            rows.append(Row(SUITE, f"{clients} MCP clients: {metric}, {name}",
                            load[f"{metric}_ms"], "ms", "raw httpx to the simulator",
                            reference[f"{metric}_ms"], extra=extra))
        if load is not sqlite:
            rows.append(Row(SUITE, f"{clients} MCP clients: p99, {name} vs SQLite",
                            load["p99_ms"], "ms", "1 node, SQLite", sqlite["p99_ms"],
                            extra=extra))
        rows.append(Row(SUITE, f"{clients} MCP clients: throughput, {name}",
                        load["throughput"], "calls/s",
                        "1 node, SQLite" if load is not sqlite else "raw httpx to the simulator",
                        (sqlite if load is not sqlite else floor)["throughput"],
                        better="higher", extra=extra))
    rows += _reference_rows(interleaved, clients)
    two = by_name.get("2 nodes, one PostgreSQL")
    if two is not None and "pg_statements_per_call" in two:
        rows.append(Row(SUITE, f"{clients} MCP clients, 2 nodes on one PostgreSQL: statements "
                        "per completion", two["pg_statements_per_call"], "statements",
                        target="<= 5 (one transaction)", passed=two["pg_transactions_per_call"]
                        <= 1.1, extra={k: v for k, v in two.items() if k.startswith("pg_")}))
    if research is not None:
        extra_r: dict[str, object] = dict(research)
        rows.append(Row(SUITE, f"check_research p99, {research['jobs']} jobs on 2 nodes",
                        research["p99_ms"], "ms", "the asked node owns the job (its actor)",
                        research["own_p99_ms"], extra=extra_r))
        rows.append(Row(SUITE, "check_research p99, job owned by the other node",
                        research["other_p99_ms"], "ms", "the asked node owns the job",
                        research["own_p99_ms"], extra=extra_r))
        rows.append(Row(SUITE, f"check_research table p99, {research['jobs']} jobs",
                        research["table_p99_ms"], "ms", extra=extra_r))
        rows.append(Row(SUITE, "cancel_research through the other node: call p50",
                        research["cancel_call_p50_ms"], "ms",
                        "the owner taking the request (p50)", research["cancel_taken_p50_ms"],
                        extra=extra_r))
        rows.append(Row(SUITE, "cancel across nodes: owner took the request, max",
                        research["cancel_taken_max_ms"], "ms", target="< 1,000 ms",
                        passed=research["cancel_taken_max_ms"] < 1000, extra=extra_r))
    return rows


# (metric, what it is, ours against: (reference, target ratio)...), "higher" metrics inverted
_TARGETS: list[tuple[str, str, str, list[tuple[str, float]]]] = [
    ("nodes_cpu_ms_per_call", "CPU per call (server + worker)", "lower",
     [(FLOOR, 1.5), (PEER, 1.0)]),
    ("p50_ms", "p50", "lower", [(FLOOR, 1.3), (PEER, 1.0)]),
    ("throughput", "throughput", "higher", [(FLOOR, 0.75), (PEER, 1.0)]),
]


def _reference_rows(runs: dict[str, list[dict[str, Any]]], clients: int) -> list[Row]:
    """Ours against the floor and the peer: per-round ratios (same round, so the same load from
    others), their median and range; the target is met when the median is."""
    rows: list[Row] = []
    ours = runs[OURS]
    extra_all: dict[str, object] = {"rounds": len(ours), "runs": {
        name: runs[name] for name in (FLOOR, PEER, OURS)}}
    for metric, what, better, against in _TARGETS:
        for reference, target in against:
            ratios = [o[metric] / r[metric] for o, r in zip(ours, runs[reference], strict=True)
                      if r[metric]]
            ratio = statistics.median(ratios)
            met = ratio <= target if better == "lower" else ratio >= target
            rows.append(Row(
                SUITE, f"{clients} clients, {what}: ours vs {reference.split(':')[0]}",
                statistics.median(o[metric] for o in ours),
                "ms" if metric != "throughput" else "calls/s", reference,
                statistics.median(r[metric] for r in runs[reference]), better=better,
                target=f"{'<=' if better == 'lower' else '>='} {target:g}x", passed=met,
                extra={"ratio_median": round(ratio, 3),
                       "ratio_range": [round(min(ratios), 3), round(max(ratios), 3)],
                       "ratios": [round(x, 3) for x in ratios],
                       "loadavg": [o["loadavg"] for o in ours]} | extra_all))
    # Our server process alone (the worker left out) against the bare server's one process.
    ratios = [o["server_cpu_ms_per_call"] / f["nodes_cpu_ms_per_call"]
              for o, f in zip(ours, runs[FLOOR], strict=True) if f["nodes_cpu_ms_per_call"]]
    ratio = statistics.median(ratios)
    rows.append(Row(
        SUITE, f"{clients} clients, server process CPU per call: ours vs floor",
        statistics.median(o["server_cpu_ms_per_call"] for o in ours), "ms", FLOOR,
        statistics.median(f["nodes_cpu_ms_per_call"] for f in runs[FLOOR]), target="<= 1.2x",
        passed=ratio <= 1.2, extra={"ratio_median": round(ratio, 3),
                                    "ratio_range": [round(min(ratios), 3),
                                                    round(max(ratios), 3)]}))
    failed = {name: sum(run["failed_calls"] for run in runs[name]) for name in (FLOOR, PEER, OURS)}
    rows.append(Row(SUITE, f"{clients} clients: failed calls, ours", failed[OURS], "calls",
                    target="= 0", passed=failed[OURS] == 0, extra={"failed": failed}))
    warnings = runs["saturation_warnings"][0]["count"] if "saturation_warnings" in runs else 0
    rows.append(Row(SUITE, "litellm 'connection pool saturated' warnings (all our nodes)",
                    warnings, "lines", target="= 0", passed=warnings == 0))
    return rows


if __name__ == "__main__":
    from bench.report import print_table

    rows = trio.run(run, "--quick" in sys.argv)
    print_table(rows)
    print(json.dumps([r.extra.get("runs") for r in rows[:1]], indent=2, default=str))
