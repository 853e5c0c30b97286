"""The kill soak (issue 36): research jobs of every method keep going while the process running
them is killed with SIGKILL again and again, and none of their completed steps is run, or paid
for, twice.

`uv run python -m bench soak` starts a runner process (`python -m bench.soak --runner N PACE
BURST`:
a runtime on the home, which takes over the jobs of the runner killed before it once their
lease runs out, and starts those of the N jobs the store does not hold yet, BURST at once,
then one every PACE seconds) and kills it with SIGKILL a random 0.5-2.5 s after it is ready,
starting the next at once, until every job has ended.
The jobs are a mix of the local pipeline (sequential), the agent (a tool round, then its answer)
and consensus jobs of two models, against the simulator (in this process, so every request it
received is counted; each completion carries its ledger id, which names the job, the attempt and
the step). Then the same jobs run once more, undisturbed, on a fresh home, for the reference
reports. It reports (`figures`):

- jobs, completed, kills, steps resumed (stored steps a later attempt skipped);
- calls (completions the provider received for the jobs), doubles (a call id the provider
  received twice, or two rows for one call), calls re-run after their step was stored (must be
  0), reports equal to the undisturbed job's (timings and random ids aside);
- the ledger, reconciled row by row with the calls by their ids, in three named kinds: answered
  rows (each a call the provider received: `answered_rows_not_called` must be 0), calls cut off
  (received, and the process killed before their answer was recorded: unanswered) and intents
  never sent (written, and the process killed before the request left: unanswered, no call).
  So calls = answered rows + calls cut off, and ledger rows = calls + intents never sent.

`python -m bench.soak --store sqlite|postgres [--nodes N] [--jobs N] [--min-kills N]` runs one
soak and prints its figures as JSON (exit 1 when they miss the promise); `--store postgres` is
bench/soak_nodes.py: N `serve --http` nodes on one PostgreSQL database, the nodes killed.
The `soak` suite runs both: the long form 100 jobs and at least 30 kills each; `--quick`, 3
jobs and one kill each.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench.report import Row

REPO = Path(__file__).resolve().parents[1]
METHODS = ("sequential", "agent", "consensus")
BURST = 2
"""Jobs a runner starts at once before it paces the rest (the long form's)."""


def env_for(openai_base: str, home: Path) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("MODEL_", "ASK_ANOTHER_"))}
    return {**clean, "ASK_ANOTHER_HOME": str(home), "ASK_ANOTHER_POLL_SECONDS": "0.05",
            "ASK_ANOTHER_CONFIRM_USD": "1000", "ASK_ANOTHER_LEASE_SECONDS": "1.5",
            "ASK_ANOTHER_GATEWAY_PROCESS": "0",  # litellm in the runner: a kill leaves no worker
            "MODEL_SIM": f"openai/m1;sk-soak-1;{openai_base}",
            "MODEL_SIM2": f"openai/m2;sk-soak-2;{openai_base}"}


def query_of(i: int) -> tuple[str, str]:
    method = METHODS[i % len(METHODS)]
    if method == "agent":
        return method, (f"Soak job {i}: what does the page say? [[sim:tool=read_article "
                        '{"url": "http://127.0.0.1:9/page"}]]')
    return method, f"Soak job {i}: how do tidal power plants store energy"


# ----- the runner (a process of its own, killed and started again) ----------------------------


async def runner(count: int, pace: float, burst: int) -> None:
    """Open a runtime on the home (taking over the jobs of the runner killed before it), say
    `ready`, and start the jobs the store does not hold yet, one every `pace` seconds (so the
    jobs overlap the kills rather than all ending between two)."""
    import trio

    from ask_another.runtime import open_runtime

    async with open_runtime(prewarm_after=0) as rt:
        # litellm loaded before the first kill can come: a runner killed while it loads would
        # make no progress at all (a warm-up call, which is no job's).
        await rt.complete("sim", "warm up")
        sys.stdout.write("ready\n")
        sys.stdout.flush()
        first = len(await rt.jobs.list(limit=count + 1))
        for i in range(first, count):
            method, query = query_of(i)
            if method == "consensus":
                await rt.jobs.start_consensus(["sim", "sim2"], query)
            else:
                await rt.jobs.start("sim", query, method=method, depth="shallow")
            if i - first >= burst - 1:  # a few at once, then one at a time
                await trio.sleep(pace)
        await trio.sleep_forever()


# ----- the driver -----------------------------------------------------------------------------


def _ended(home: Path) -> tuple[int, int]:
    path = home / "ask-another.sqlite3"
    if not path.exists():
        return 0, 0
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30) as conn:
        try:
            total, ended = conn.execute(
                "SELECT COUNT(*), SUM(CASE WHEN status IN ('completed', 'failed', 'cancelled') "
                "THEN 1 ELSE 0 END) FROM research_jobs").fetchone()
        except sqlite3.OperationalError:
            return 0, 0
    return int(total or 0), int(ended or 0)


def _start(env: dict[str, str], count: int, pace: float, burst: int, log: Any
           ) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "bench.soak", "--runner", str(count),
                             str(pace), str(burst)],
                            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=log, text=True)


def run_jobs(openai_base: str, home: Path, count: int, pace: float, burst: int, kill: bool,
             deadline: float, rng: random.Random) -> int:
    """Run the jobs on `home` to their end, killing the runner 0.5-2.5 s after it is ready
    when `kill`; returns the number of kills."""
    env = env_for(openai_base, home)
    kills = failed_starts = 0
    with (home.parent / f"{home.name}.log").open("w") as log:
        while True:
            process = _start(env, count, pace, burst, log)
            try:
                assert process.stdout is not None
                ready = process.stdout.readline()  # the runtime is open (and the jobs stored)
                if ready.strip() != "ready":
                    failed_starts += 1  # under heavy load a start can fail (a warm-up timeout)
                    if failed_starts > 5:
                        log.flush()
                        tail = Path(log.name).read_text()[-3000:]
                        raise RuntimeError(f"the runner did not start 5 times:\n{tail}")
                    continue
                failed_starts = 0
                until = time.monotonic() + (rng.uniform(0.5, 2.5) if kill else 1e9)
                while time.monotonic() < until:
                    total, ended = _ended(home)
                    if total == count and ended == count:
                        return kills
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"the jobs did not end in time ({ended}/{total})")
                    time.sleep(0.1)
                process.send_signal(signal.SIGKILL)
                kills += 1
            finally:
                if process.poll() is None:
                    process.send_signal(signal.SIGKILL)
                process.wait()


def normal(report: str) -> str:
    report = re.sub(r"\d+\.\d+ s\b", "T s", report)
    report = re.sub(r"\bc-[0-9a-f]{10}\b", "c-ID", report)
    report = re.sub(r"\br-[0-9a-f]{10}\b", "r-ID", report)
    return re.sub(r"\b(plan|report)-[a-z0-9]+-[a-z0-9]+\b", r"\1-ID", report)


def _parting(query: str, killed: str, undisturbed: str) -> dict[str, str]:
    """Where a killed job's report first differs from its undisturbed run's."""
    a, b = killed.splitlines(), undisturbed.splitlines()
    at = next((i for i, (x, y) in enumerate(zip(a, b, strict=False))
               if x != y), min(len(a), len(b)))
    return {"query": query, "killed": "\n".join(a[at:at + 3])[:400],
            "undisturbed": "\n".join(b[at:at + 3])[:400]}


def _read(home: Path) -> tuple[dict[str, dict[str, Any]], dict[str, int], list[dict[str, Any]]]:
    with sqlite3.connect(home / "ask-another.sqlite3") as conn:
        conn.row_factory = sqlite3.Row
        jobs = {r["id"]: dict(r) for r in conn.execute("SELECT * FROM research_jobs")}
        steps: dict[str, int] = {}
        for r in conn.execute("SELECT job_id, step, attempt FROM research_steps"):
            steps[f"{r['job_id']}:{r['step']}"] = int(r["attempt"])
        rows = [dict(r) for r in conn.execute("SELECT call_id, answered, job_id FROM usage")]
    return jobs, steps, rows


def job_calls(sim: Any) -> tuple[list[str], set[str]]:
    """The ledger call ids of the jobs' completions the simulator received (a call id twice is a
    call paid twice), and those whose client hung up before the answer came (a kill mid-call)."""
    def ids(requests: list[Any]) -> list[str]:
        return [r.headers["x-ask-another-call"] for r in requests
                if r.headers.get("x-ask-another-call", "").startswith("job:")]
    return ids(sim.requests), set(ids(sim.hangups))


def figures(count: int, kills: int, min_kills: int,
            killed: tuple[dict[str, dict[str, Any]], dict[str, int], list[dict[str, Any]]],
            quiet_jobs: dict[str, dict[str, Any]], seen: list[str], hung_up: set[str],
            quiet_seen: list[str], started: float) -> dict[str, Any]:
    """The soak's figures from the killed run's store (`killed`: jobs, steps, ledger rows), the
    undisturbed run's jobs and the calls the provider saw in each (`job_calls`).

    The ledger reconciles in three kinds of row, each named: `answered_rows` (the call left and
    its answer was recorded: each one a call the provider saw, `answered_rows_not_called` none),
    `calls_cut_off` (the call left and the process was killed before its answer was recorded;
    of those, `calls_hung_up` the provider saw hang up before it answered; unanswered, billed or
    not as the provider decides) and `intents_never_sent` (the row was
    written and the process killed before the request left: unanswered, no call). So
    `calls == answered_rows + calls_cut_off` and `ledger_rows == calls + intents_never_sent`."""
    jobs, steps, rows = killed
    quiet_reports = {j["query"]: normal(j["report"] or "") for j in quiet_jobs.values()}
    equal = sum(1 for j in jobs.values() if j["status"] == "completed"
                and normal(j["report"] or "") == quiet_reports.get(j["query"]))
    job_rows = [r for r in rows if (r["call_id"] or "").startswith("job:")]
    row_ids = Counter(r["call_id"] for r in job_rows)
    seen_ids = Counter(seen)
    rerun = 0
    for call_id in seen:  # job:<job>:<attempt>:<step>:<n>, the step may hold colons
        parts = call_id.split(":")
        stored = steps.get(f"{parts[1]}:{':'.join(parts[3:-1])}")
        if stored is not None and int(parts[2]) > stored:
            rerun += 1
    resumed = 0
    for key, attempt in steps.items():
        job = key.split(":", 1)[0]
        if jobs[job]["attempts"] > attempt:
            resumed += 1
    answered = [r for r in job_rows if r["answered"]]
    cut_off = [r for r in job_rows if not r["answered"] and r["call_id"] in seen_ids]
    return {
        "jobs": count, "completed": sum(1 for j in jobs.values() if j["status"] == "completed"),
        "kills": kills, "steps_resumed": resumed, "calls": len(seen),
        "ledger_rows": len(job_rows),
        "answered_rows": len(answered),
        "answered_rows_not_called": sum(1 for r in answered if r["call_id"] not in seen_ids),
        "calls_cut_off": len(cut_off),
        "calls_hung_up": sum(1 for r in cut_off if r["call_id"] in hung_up),
        "intents_never_sent": sum(1 for r in job_rows if r["call_id"] not in seen_ids),
        "doubles": sum(n - 1 for n in seen_ids.values() if n > 1)
        + sum(n - 1 for n in row_ids.values() if n > 1),
        "calls_without_row": len(set(seen_ids) - set(row_ids)),
        "completed_steps_rerun": rerun,
        "reports_equal": equal,
        # What differed, so a failure says why: the first lines where the two reports part.
        "unequal": [_parting(j["query"], normal(j["report"] or ""),
                             quiet_reports.get(j["query"], ""))
                    for j in jobs.values() if j["status"] == "completed"
                    and normal(j["report"] or "") != quiet_reports.get(j["query"])],
        "failed": dict(Counter(str(j["error"])[:120] for j in jobs.values()
                               if j["status"] != "completed")),
        "undisturbed_calls": len(quiet_seen),
        "wall_s": round(time.monotonic() - started, 1),
        "min_kills": min_kills,
        "load": os.getloadavg()[0],
    }


def soak(count: int, min_kills: int, quick: bool, *, pace: float | None = None,
         burst: int = BURST, seed: int = 36) -> dict[str, Any]:
    """Run the soak on SQLite (see the module docstring); returns its figures."""
    from ask_another.simulator import Simulator

    rng = random.Random(seed)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="ask-another-soak-") as tmp, \
            Simulator.running(latency=0.1 if quick else 0.6) as sim:
        home = Path(tmp) / "killed"
        deadline = time.monotonic() + (300 if quick else 1800)
        if pace is None:
            pace = 0.2 if quick else 1.0
        kills = run_jobs(sim.openai_base, home, count, pace, burst, True, deadline, rng)
        seen, hung_up = job_calls(sim)
        sim.clear()
        quiet_home = Path(tmp) / "undisturbed"
        sim.latency = 0.05  # undisturbed: only the reports and the calls count
        run_jobs(sim.openai_base, quiet_home, count, 0.0, count, False, time.monotonic() + 600,
                 rng)
        quiet_seen, _ = job_calls(sim)
        killed = _read(home)
        quiet_jobs, _, _ = _read(quiet_home)
    return {"store": "sqlite", **figures(count, kills, min_kills, killed, quiet_jobs, seen,
                                         hung_up, quiet_seen, started)}


def held(figures: dict[str, Any]) -> bool:
    """Whether a soak's figures show what it promises: every job completed once with the
    undisturbed report, enough kills, no call paid twice or re-run after its step was stored,
    and a ledger in which every call has its row and every answered row a call."""
    return bool(figures["completed"] == figures["reports_equal"] == figures["jobs"]
            and figures["kills"] >= figures["min_kills"]
            and figures["doubles"] == 0 and figures["completed_steps_rerun"] == 0
            and figures["calls_without_row"] == 0 and figures["answered_rows_not_called"] == 0
            and figures["calls"] == figures["answered_rows"] + figures["calls_cut_off"]
            and figures["ledger_rows"] == figures["calls"] + figures["intents_never_sent"])


def rows_of(figures: dict[str, Any]) -> list[Row]:
    store = figures["store"]
    if store == "postgres":
        store = f"postgres, {figures['nodes']} nodes"
    ok = held(figures)
    return [
        Row("soak", f"{store}: {figures['jobs']} jobs, {figures['kills']} SIGKILLs: jobs ended "
            "equal to undisturbed", figures["reports_equal"], "jobs", reference="jobs started",
            reference_value=figures["jobs"], better="higher",
            target="all, none re-run or doubled", passed=ok, extra=figures),
        Row("soak", f"{store}: answered ledger rows per provider call answered",
            figures["answered_rows"], "rows", reference="calls the provider saw, less those cut "
            "off by a kill", reference_value=figures["calls"] - figures["calls_cut_off"],
            target=f"equal; apart: {figures['calls_cut_off']} cut off, "
            f"{figures['intents_never_sent']} intents never sent",
            passed=ok, extra={}),
    ]


def run(quick: bool) -> list[Row]:
    from bench import soak_nodes

    count, min_kills = (3, 1) if quick else (100, 30)
    rows = rows_of(soak(count, min_kills, quick))
    on_postgres = soak_nodes.soak(count, 3, min_kills, quick)
    if on_postgres is not None:  # None: PostgreSQL is not installed
        rows += rows_of(on_postgres)
    return rows


def main(argv: list[str]) -> None:
    """One soak, its figures as JSON on stdout (the short form's test reads them)."""
    parser = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--store", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--nodes", type=int, default=3,
                        help="serve --http nodes on PostgreSQL (default 3)")
    parser.add_argument("--jobs", type=int, default=12)
    parser.add_argument("--min-kills", type=int, default=6)
    parser.add_argument("--pace", type=float, default=None,
                        help="seconds between job starts (default 1.5 on SQLite, 1.6 on nodes)")
    parser.add_argument("--burst", type=int, default=1,
                        help="jobs a SQLite runner starts at once before it paces the rest")
    parser.add_argument("--quick", action="store_true", help="the quick form's latencies")
    args = parser.parse_args(argv)
    if args.store == "sqlite":
        result: dict[str, Any] | None = soak(
            args.jobs, args.min_kills, args.quick,
            pace=1.5 if args.pace is None else args.pace, burst=args.burst)
    else:
        from bench import soak_nodes

        result = soak_nodes.soak(args.jobs, args.nodes, args.min_kills, args.quick,
                                 pace=args.pace)
        if result is None:
            parser.exit(2, "PostgreSQL is not installed (apt-get install postgresql)\n")
    assert result is not None
    print(json.dumps(result, indent=1))
    if not held(result):
        parser.exit(1, "the soak's figures miss its promise (see above)\n")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--runner"]:
        import trio

        trio.run(runner, int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]))
    else:
        main(sys.argv[1:])
