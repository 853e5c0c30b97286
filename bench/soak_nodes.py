"""The kill soak on PostgreSQL with `serve --http` nodes (issue 36; issue 42's three-node kill
run): the soak of bench/soak.py, but the jobs run on N team nodes sharing one database, and the
process killed with SIGKILL is a node that owns a running job.

`uv run python -m bench.soak --store postgres --nodes 3 --jobs 100 --min-kills 30` (or the
`soak` suite, which runs it after the SQLite form) starts a PostgreSQL server from Debian's
binaries (the tests' helper, tests/support/postgres_server.py), a token, and N
`python -m ask_another serve --http` nodes on their own homes, ports and provider keys, all on
the one database (lease `LEASE`; litellm in each node, `ASK_ANOTHER_GATEWAY_PROCESS=0`, so a
kill leaves no worker behind). The driver starts the jobs as a client would: `start_research`
(sequential, agent) and a task-augmented `consensus` over Streamable HTTP with the token, each
on a random ready node, one every PACE seconds; a start whose node died under it is looked up
in the store by its query before it is asked again elsewhere, so no job is started twice.

Meanwhile each node is SIGKILLed 0.3-1.5 s (quick: 0-0.3 s) after its process made its first
provider call (the simulator tells the nodes apart by their keys), when it then owns an
unfinished job none of which was killed in its last attempt before storing a step (else a
little later), and started again at once; the other nodes take its jobs over once their leases
expire and resume them from their last step. (A job stopped three times running before it
stores a step is given up on by design: killing it so would test that rule, not the soak.)
The quick form stops after one kill. Then the same jobs run once more on a fresh database and
one node, no kills, for the reference reports. The figures are bench/soak.py's `figures` (the
same names and the same ledger reconciliation), plus the nodes' starts and the job starts a
kill cut off.
"""

from __future__ import annotations

import random
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

REPO = Path(__file__).resolve().parents[1]
SUPPORT = REPO / "tests" / "support"
LEASE = {True: 3.0, False: 15.0}
"""Seconds of a node's lease (quick or not; 15 is the default): a killed node's jobs pause this
long at most (plus the claim's poll), and a node whose renewal has not returned for 60 % of it
is fenced: its jobs stop and another node takes them over, an attempt without progress each
time. On two cores at load 12-15, 3 s leases fenced a node every few seconds (44 of 100 jobs
given up on after three such attempts), 8 s leases still every minute or so (renewals 5-8 s
late)."""


def _support() -> Any:
    """The tests' helpers for PostgreSQL, server processes and MCP Tasks (tests/support is no
    package)."""
    if str(SUPPORT) not in sys.path:
        sys.path.insert(0, str(SUPPORT))
    import http_server
    import postgres_server
    import tasks_client

    return http_server, postgres_server, tasks_client


def node_env(openai_base: str, n: int, home: Path, tokens: Path, database_url: str,
             quick: bool) -> dict[str, str]:
    return {
        "ASK_ANOTHER_HOME": str(home),
        "ASK_ANOTHER_DATABASE_URL": database_url,
        "ASK_ANOTHER_TOKENS_FILE": str(tokens),
        "ASK_ANOTHER_LEASE_SECONDS": str(LEASE[quick]),
        "ASK_ANOTHER_POLL_SECONDS": "0.05",
        "ASK_ANOTHER_RATE_PER_MINUTE": "0",  # one token makes all the load
        "ASK_ANOTHER_MAX_JOBS_PER_USER": "0",
        "ASK_ANOTHER_CONFIRM_USD": "1000",  # simulated jobs run without a spend confirmation
        "ASK_ANOTHER_GATEWAY_PROCESS": "0",  # litellm in the node: a kill leaves no worker
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "MODEL_SIM": f"openai/m1;sk-soak-node{n}-1;{openai_base}",
        "MODEL_SIM2": f"openai/m2;sk-soak-node{n}-2;{openai_base}",
    }


@dataclass
class Node:
    """One `serve --http` node, started again after each kill (a new process, owner and port;
    the same home and provider key, by which the simulator tells whose calls it receives)."""

    n: int
    env: dict[str, str]
    logs: Path
    url: str | None = None  # while it is ready
    pid: int | None = None
    process: trio.Process | None = None
    starts: int = 0
    calls_before: int = 0  # the simulator's requests when this process became ready
    kill_at: float | None = None  # once it has made a call (its litellm loaded)
    up: trio.Event = field(default_factory=trio.Event)  # ready once

    @property
    def keys(self) -> str:
        """How this node's provider keys begin."""
        return f"sk-soak-node{self.n}-"

    async def run(self, sim: Any, failed_starts: list[int]) -> None:
        """Keep this node running: start it, and start it again whenever it dies."""
        support, _, _ = _support()
        while True:
            self.starts += 1
            log = self.logs / f"node{self.n}.{self.starts}.log"
            with log.open("w") as err:
                process = await trio.lowlevel.open_process(
                    support.server_command(), stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL, stderr=err,
                    env=support.process_env(self.env), cwd=REPO)
            self.process = process
            try:
                try:
                    found = await support.wait_for_line(log, support.LISTENING, process, 120)
                except AssertionError:
                    failed_starts[0] += 1  # under heavy load a start can fail: again
                    if failed_starts[0] > 5:
                        raise RuntimeError(f"node {self.n} did not start 5 times:\n"
                                           f"{log.read_text()[-3000:]}") from None
                    continue
                self.url, self.pid = found.group(1), process.pid
                self.calls_before, self.kill_at = len(sim.requests), None
                self.up.set()
                await process.wait()
            finally:
                self.url = self.pid = self.process = None
                if process.returncode is None:
                    process.kill()
                    with trio.CancelScope(shield=True):
                        await process.wait()


async def _query(database_url: str, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    import psycopg

    def go() -> list[tuple[Any, ...]]:
        with psycopg.connect(database_url, autocommit=True) as conn:
            return conn.execute(sql, params).fetchall()
    return await trio.to_thread.run_sync(go)


async def _ended(database_url: str) -> tuple[int, int]:
    ((total, ended),) = await _query(
        database_url, "SELECT COUNT(*), COALESCE(SUM(CASE WHEN status IN ('completed', "
        "'failed', 'cancelled') THEN 1 ELSE 0 END), 0) FROM research_jobs")
    return int(total), int(ended)


async def _start_job(i: int, nodes: list[Node], token: str, database_url: str,
                     rng: random.Random) -> int:
    """Start job `i` on a random ready node, as a client would; returns how many starts were
    cut off by a kill (each looked up in the store first: a job stored before the kill is not
    started again)."""
    from bench.soak import query_of

    support, _, tasks = _support()
    method, query = query_of(i)
    cut = 0
    while True:
        ready = [node.url for node in nodes if node.url is not None]
        if not ready:
            await trio.sleep(0.1)  # every node is starting again
            continue
        try:
            async with support.http_client_for(rng.choice(ready), token,
                                               extensions=[tasks.TasksClient()]) as client:
                arguments: dict[str, Any]
                if method == "consensus":
                    arguments = {"models": ["sim", "sim2"], "prompt": query}
                    await tasks.create_task(client, "consensus", arguments)
                else:
                    arguments = {"model": "sim", "query": query, "method": method,
                                 "depth": "shallow", "timeout": 0.0}
                    await tasks.create_task(client, "start_research", arguments)
            return cut
        except Exception:  # the node died under the call (the driver kills them)
            cut += 1
            if await _query(database_url, "SELECT id FROM research_jobs WHERE query = %s",
                            query):
                return cut


async def run_jobs(sim: Any, root: Path, database_url: str, count: int, node_count: int,
                   pace: float, max_kills: int, quick: bool, seconds: float, rng: random.Random
                   ) -> dict[str, int]:
    """Run the `count` jobs to their end on `node_count` nodes of one database, killing nodes
    (`max_kills` at most); returns the kills, restarts and start calls cut off."""
    from ask_another.server.auth import TokensFile

    await trio.Path(root).mkdir(parents=True)
    token = TokensFile(root / "tokens.json").add("soak")
    nodes = [Node(n, node_env(sim.openai_base, n, root / f"node{n}", root / "tokens.json",
                              database_url, quick), root) for n in range(node_count)]
    failed_starts = [0]
    counts = {"kills": 0, "starts_cut_off": 0}

    async def start_all() -> None:
        for node in nodes:  # every node up before the first job
            await node.up.wait()
        for i in range(count):
            counts["starts_cut_off"] += await _start_job(i, nodes, token, database_url, rng)
            await trio.sleep(pace)

    after = (0.0, 0.3) if quick else (0.3, 1.5)

    async def kill_nodes() -> None:
        """SIGKILL each node 0.3-1.5 s (quick: 0-0.3 s) after its process made its first
        call (so it has loaded litellm and makes progress: a job killed three times before any
        step is given up on, by design), if it owns an unfinished job then and none of its jobs
        was killed in its last attempt before storing a step (else later)."""
        for node in nodes:  # the tables made, the jobs about to start
            await node.up.wait()
        while True:
            await trio.sleep(0.1)
            now, requests = time.monotonic(), sim.requests
            for node in nodes:
                if node.pid is not None and node.kill_at is None and any(
                        (r.api_key or "").startswith(node.keys)
                        for r in requests[node.calls_before:]):
                    node.kill_at = now + rng.uniform(*after)
            due = [node for node in nodes if node.kill_at is not None and now >= node.kill_at]
            if not due:
                continue
            held: dict[str, list[int]] = {}  # owner: each unfinished job's attempts since
            for owner, since in await _query(  # its last stored step
                    database_url, "SELECT j.owner, j.attempts - COALESCE(MAX(s.attempt), 0) "
                    "FROM research_jobs j LEFT JOIN research_steps s ON s.job_id = j.id "
                    "WHERE j.status NOT IN ('completed', 'failed', 'cancelled') AND j.owner "
                    "IS NOT NULL GROUP BY j.id, j.owner, j.attempts"):
                held.setdefault(owner, []).append(int(since))
            for node in due:
                process, pid = node.process, node.pid
                jobs = [n for owner, ns in held.items() if f":{pid}:" in owner for n in ns]
                if not jobs or max(jobs) > 1:  # none, or one killed in its last attempt too
                    node.kill_at = now + rng.uniform(*after)
                elif process is not None and process.returncode is None:
                    process.kill()
                    node.kill_at = None
                    counts["kills"] += 1
                    if counts["kills"] >= max_kills:
                        return

    with trio.fail_after(seconds):
        async with trio.open_nursery() as nursery:
            for node in nodes:
                nursery.start_soon(node.run, sim, failed_starts)
            nursery.start_soon(start_all)
            if max_kills:
                nursery.start_soon(kill_nodes)
            while True:
                await trio.sleep(0.2)
                try:
                    total, ended = await _ended(database_url)
                except Exception:  # the first node has not made the tables yet
                    continue
                if total == count and ended == count:
                    break
            nursery.cancel_scope.cancel()
    counts["node_starts"] = sum(node.starts for node in nodes)
    return counts


async def _read(database_url: str) -> tuple[dict[str, dict[str, Any]], dict[str, int],
                                            list[dict[str, Any]]]:
    columns = ("id", "query", "status", "report", "error", "attempts")
    jobs = {row[0]: dict(zip(columns, row, strict=True)) for row in await _query(
        database_url, f"SELECT {', '.join(columns)} FROM research_jobs")}
    steps = {f"{job}:{step}": int(attempt) for job, step, attempt in await _query(
        database_url, "SELECT job_id, step, attempt FROM research_steps")}
    rows = [{"call_id": call_id, "answered": answered, "job_id": job} for call_id, answered, job
            in await _query(database_url, "SELECT call_id, answered, job_id FROM usage")]
    return jobs, steps, rows


def soak(count: int, node_count: int, min_kills: int, quick: bool, *, pace: float | None = None,
         seed: int = 42) -> dict[str, Any] | None:
    """Run the soak on PostgreSQL (see the module docstring); its figures, or None where
    PostgreSQL is not installed."""
    from ask_another.simulator import Simulator
    from bench.soak import figures, held, job_calls

    _, pg, _ = _support()
    bindir = pg.find_bindir()
    if bindir is None:
        return None
    rng = random.Random(seed)
    started = time.monotonic()
    if pace is None:
        pace = 0.2 if quick else 1.6  # 100 jobs over 160 s: 30 kills and more under load
    server = pg.PostgresServer.start(bindir)
    tmp = Path(tempfile.mkdtemp(prefix="ask-another-soak-pg-"))
    try:
        with Simulator.running(latency=0.1 if quick else 0.6) as sim:
            killed_db, quiet_db = server.new_database(), server.new_database()
            kills, seconds = (1, 300) if quick else (10**6, 1800)
            counts = trio.run(run_jobs, sim, tmp / "killed", killed_db, count, node_count,
                              pace, kills, quick, seconds, rng)
            seen, hangups = job_calls(sim)
            sim.clear()
            sim.latency = 0.05  # undisturbed: only the reports and the calls count
            # One node is enough for the reports, and starts faster than three.
            trio.run(run_jobs, sim, tmp / "undisturbed", quiet_db, count, 1, 0.0, 0, quick,
                     600, rng)
            quiet_seen, _ = job_calls(sim)
            killed = trio.run(_read, killed_db)
            quiet_jobs, _, _ = trio.run(_read, quiet_db)
    finally:
        server.stop()
    result = figures(count, counts["kills"], min_kills, killed, quiet_jobs, seen, hangups,
                     quiet_seen, started)
    result = {"store": "postgres", "nodes": node_count, "node_starts": counts["node_starts"],
              "starts_cut_off": counts["starts_cut_off"], **result}
    if held(result):
        shutil.rmtree(tmp, ignore_errors=True)
    else:  # the nodes' logs tell why
        result["logs"] = str(tmp)
    return result
