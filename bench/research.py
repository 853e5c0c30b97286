"""Benchmark of research jobs: many concurrent jobs against the simulator, in one runtime.

The simulated provider runs in a child process (`Simulator.process`) with a fixed latency per
HTTP request, so its own work does not share our process. Each job is a Gemini deep-research
interaction on the simulator's default script (created in_progress, in_progress at the first
poll, completed at the second): three HTTP requests and two poll sleeps (``poll``, then
``1.5 × poll``), so the ideal wall time of a job, and of N jobs run perfectly in parallel, is
``3 × latency + 2.5 × poll``.

Measured, with N jobs started at once through `ResearchJobs` (the API the MCP tools use):
- wall time from the first start to the last result, against that ideal;
- peak RSS of the process while the jobs run, minus the RSS just before (litellm already
  imported and warmed by a few jobs), per job;
- check_research latency while they run: a checker task formats `check_research(job_id)` for a
  random started job every 5 ms (an actor `Status` call while it runs, a store read once it
  has finished; reported separately), and the full jobs table every 50 ms
  (a store query); p50 and p99 of each;
- that every job completed with its own report (the report quotes its own question);
- a burst (3,000, then 10,000; 100 and 300 in quick mode): that many starts at once from one
  named user with the per-user limit raised, each a Gemini job held in_progress: every call
  starts (or meets the limit's own error; none fails otherwise, such as with a full mailbox),
  check_research(job) p99 while they are being started, and the memory per running job of this
  process and its gateway worker;
- the checkpoints' cost (issue 36): a sequential job's wall time and store statements with its
  steps stored and every call's ledger intent written before the call, against the same job
  with both switched off (what a job cost before them: the ledger row written after each call
  only), in interleaved rounds on one runtime and one SQLite home; the statements are counted
  by SQLite's trace on the store's writer connection, per stored step;
- the heartbeat, on throughout with a short lease (`LEASE_SECONDS`: a renewal every 0.5 s, a
  look for requests every 0.5 s, a sweep every 0.75 s, far more often than the 15 s default):
  renewal statements run (one per beat, whatever the number of jobs), the most leases one of
  them extended, and the slowest.
"""

from __future__ import annotations

import logging
import os
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import structlog
import trio

from bench.report import Row

SUITE = "research"
LEASE_SECONDS = 1.5
GEMINI = "gemini/deep-research-pro-preview-12-2025"
WARM_JOBS = 20  # started before a burst is measured (litellm's interactions code warm)


def _rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        pages = int(statm.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 1e6


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _measure(url: str, home: Path, jobs_n: int, latency: float, poll: float
                   ) -> dict[str, object]:
    from ask_another.config import Config
    from ask_another.research import job_name
    from ask_another.research.supervisor import JOB_OWNER, GetStatistics
    from ask_another.runtime import open_runtime
    from ask_another.server.tools.research import job_text, jobs_table

    config = Config.from_env({
        "ASK_ANOTHER_HOME": str(home),
        "ASK_ANOTHER_POLL_SECONDS": str(poll),
        "ASK_ANOTHER_LOG_LEVEL": "ERROR",
        "ASK_ANOTHER_CONFIRM_USD": "1000000",  # simulated jobs: no spend confirmation
        "ASK_ANOTHER_LEASE_SECONDS": str(LEASE_SECONDS),
        "MODEL_GDR": f"{GEMINI};bench-key;{url}",
    })
    async with open_runtime(config, prewarm_after=0) as runtime:
        jobs = runtime.jobs
        # Warm up: litellm imported, its HTTP client and our code paths exercised once.
        warm = [await jobs.start("gdr", f"warm-up {n}") for n in range(5)]
        for record in warm:
            await jobs.wait(record.id, 60)
        baseline = _rss_mb()
        peak = baseline
        started: list[str] = []
        finals: dict[int, object] = {}
        single: list[float] = []
        single_stored: list[float] = []
        table: list[float] = []
        running = True

        async def sample_memory() -> None:
            nonlocal peak
            while running:
                peak = max(peak, _rss_mb())
                await trio.sleep(0.02)

        async def check_single() -> None:
            while running:
                if started:
                    job_id = random.choice(started)
                    alive = runtime.registry.whereis(job_name(job_id)) is not None
                    t0 = time.perf_counter()
                    job_text(await jobs.get(job_id))
                    (single if alive else single_stored).append(time.perf_counter() - t0)
                await trio.sleep(0.005)

        async def check_table() -> None:
            while running:
                t0 = time.perf_counter()
                jobs_table(await jobs.list())
                table.append(time.perf_counter() - t0)
                await trio.sleep(0.05)

        async def one(n: int) -> None:
            record = await jobs.start("gdr", f"benchmark question {n}")
            started.append(record.id)
            finals[n] = await jobs.wait(record.id, 600)

        async with trio.open_nursery() as watchers:
            watchers.start_soon(sample_memory)
            watchers.start_soon(check_single)
            watchers.start_soon(check_table)
            began = time.perf_counter()
            async with trio.open_nursery() as nursery:
                for n in range(jobs_n):
                    nursery.start_soon(one, n)
            wall = time.perf_counter() - began
            running = False
        owner = runtime.registry.whereis(JOB_OWNER)
        assert owner is not None
        beats = await owner.call(GetStatistics())
        own = sum(1 for n, f in finals.items()
                  if getattr(f, "status", None) == "completed"
                  and f"benchmark question {n}" in (getattr(f, "report", "") or ""))
    return {
        "wall": wall,
        "ideal": 3 * latency + 2.5 * poll,
        "memory_per_job_kb": (peak - baseline) * 1000 / jobs_n,
        "baseline_mb": baseline,
        "peak_mb": peak,
        "single": single,
        "single_stored": single_stored,
        "table": table,
        "own_results": own,
        "renewals": beats.renewals,
        "renewed_max": beats.renewed_max,
        "renew_ms_max": beats.renew_seconds_max * 1000,
        "heartbeat_failures": beats.failures,
    }


def _tree_rss_kb(pid: int) -> float:
    """RSS of `pid` and its descendants (the gateway's worker process) but the simulator, which
    this process started too, in KiB."""
    from bench.server import _over_trees

    def rss(each: int) -> float:
        with open(f"/proc/{each}/cmdline", "rb") as cmdline:
            if b"ask_another.simulator" in cmdline.read():
                return 0.0
        with open(f"/proc/{each}/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1024

    return _over_trees({pid}, rss)


async def _burst(url: str, home: Path, size: int) -> dict[str, object]:
    """`size` start_research calls at once from one named user (the per-user limit raised so
    that they fit), each a Gemini job the simulator keeps in_progress: how many started, were
    refused by the limit, or failed otherwise; check_research(job) latency sampled during the
    ramp (from the first start to a second after the last); the memory per running job of this
    process and its worker (their RSS a second after the ramp against before it, after
    `WARM_JOBS` warm-up jobs)."""
    from ask_another.config import Config
    from ask_another.errors import LimitReached
    from ask_another.runtime import open_runtime
    from ask_another.server.tools.research import job_text
    from ask_another.users import User

    config = Config.from_env({
        "ASK_ANOTHER_HOME": str(home),
        "ASK_ANOTHER_POLL_SECONDS": "600",  # held in_progress, polled once at most
        "ASK_ANOTHER_LOG_LEVEL": "ERROR",
        "ASK_ANOTHER_CONFIRM_USD": "1000000000",
        "ASK_ANOTHER_MAX_JOBS_PER_USER": str(size + WARM_JOBS),  # raised: the burst fits
        "MODEL_GDR": f"{GEMINI};bench-key;{url}",
    })
    started: list[str] = []
    refused = 0
    failures: list[str] = []
    checks: list[float] = []
    async with open_runtime(config, prewarm_after=0) as runtime:
        jobs = runtime.jobs_for(User("burst", admin=False))
        # Warm: litellm's interactions code imported and run in the worker, our paths once.
        warm = [await jobs.start("gdr", f"[[sim:polls=100000]] warm-up {n}")
                for n in range(WARM_JOBS)]
        with trio.fail_after(120):
            for record in warm:
                while (await jobs.get(record.id)).provider_handle is None:  # noqa: ASYNC110
                    await trio.sleep(0.05)  # a poll of the job's state, nothing to wait on
        baseline, baseline_server = _tree_rss_kb(os.getpid()), _rss_mb() * 1e6 / 1024
        ramping = True

        async def start(n: int) -> None:
            nonlocal refused
            try:
                started.append((await jobs.start("gdr", f"[[sim:polls=100000]] burst {n}")).id)
            except LimitReached:
                refused += 1
            except Exception as exc:  # what the row counts
                failures.append(f"{type(exc).__name__}: {exc}"[:300])

        async def check() -> None:
            while ramping:
                if started:
                    job_id = random.choice(started)
                    t0 = time.perf_counter()
                    job_text(await jobs.get(job_id))
                    checks.append(time.perf_counter() - t0)
                await trio.sleep(0.005)

        began = time.perf_counter()
        async with trio.open_nursery() as watchers:
            watchers.start_soon(check)
            async with trio.open_nursery() as nursery:
                for n in range(size):
                    nursery.start_soon(start, n)
            ramp = time.perf_counter() - began
            await trio.sleep(1.0)  # the last jobs' first provider calls answered
            ramping = False
        peak, peak_server = _tree_rss_kb(os.getpid()), _rss_mb() * 1e6 / 1024
    return {"size": size, "started": len(started), "refused": refused,
            "failures": failures, "ramp_s": ramp, "checks": checks,
            "memory_per_job_kib": (peak - baseline) / max(1, len(started)),
            "server_per_job_kib": (peak_server - baseline_server) / max(1, len(started)),
            "baseline_mib": baseline / 1024, "peak_mib": peak / 1024}


def _burst_rows(result: dict[str, object]) -> list[Row]:
    size = int(result["size"])  # type: ignore[call-overload]
    started, refused = int(result["started"]), int(result["refused"])  # type: ignore[call-overload]
    failures: list[str] = result["failures"]  # type: ignore[assignment]
    checks = [c * 1000 for c in result["checks"]]  # type: ignore[attr-defined]
    per_job = float(result["memory_per_job_kib"])  # type: ignore[arg-type]
    p99 = _pct(checks, 0.99)
    extra: dict[str, object] = {"ramp_s": round(float(result["ramp_s"]), 2),  # type: ignore[arg-type]
                                "refused_by_limit": refused, "other_failures": len(failures),
                                "first_failure": failures[0] if failures else None}
    return [
        Row(SUITE, f"burst of {size:,} starts: started or refused by the limit", started + refused,
            "calls", better="higher", target=f"= {size:,}, none failing otherwise",
            passed=not failures and started + refused == size, extra=extra),
        Row(SUITE, f"burst of {size:,}: check_research(job) p99 during the ramp", p99, "ms",
            target="< 50 ms", passed=p99 < 50,
            extra=extra | {"samples": len(checks), "p50_ms": _pct(checks, 0.5),
                           "max_ms": max(checks, default=0)}),
        Row(SUITE, f"burst of {size:,}: memory per running job (server and worker)", per_job,
            "KiB", target="< 50 KiB", passed=per_job < 50,
            extra=extra | {"baseline_mib": result["baseline_mib"],
                           "after_ramp_mib": result["peak_mib"],
                           "server_process_kib_per_job": result["server_per_job_kib"]}),
    ]


async def _checkpoints(openai_base: str, home: Path, rounds: int) -> dict[str, object]:
    """Interleaved rounds of one sequential job with and without its checkpoints (see the
    module docstring); their wall times, statements and stored steps."""
    from ask_another.config import Config
    from ask_another.runtime import open_runtime
    from ask_another.spend import ledger
    from ask_another.store.jobs import JobStore

    config = Config.from_env({"ASK_ANOTHER_HOME": str(home), "ASK_ANOTHER_CONFIRM_USD": "1000",
                              "ASK_ANOTHER_GATEWAY_PROCESS": "0",
                              "MODEL_SIM": f"openai/m1;sk-bench;{openai_base}"})
    saved, intent = JobStore.save_step, ledger.record_intent

    async def nothing(*_args: object, **_kwargs: object) -> None:
        return None

    walls: dict[str, list[float]] = {"with": [], "without": []}
    statements: dict[str, list[int]] = {"with": [], "without": []}
    steps: list[int] = []
    async with open_runtime(config, prewarm_after=0) as rt:
        db = await rt.database()
        seen: list[str] = []
        db._connection.set_trace_callback(seen.append)  # type: ignore[attr-defined]
        await rt.jobs.wait((await rt.jobs.start("sim", "warm up", method="sequential")).id, 60)
        for n in range(rounds):
            for kind in ("with", "without") if n % 2 == 0 else ("without", "with"):
                if kind == "without":
                    JobStore.save_step = nothing  # type: ignore[method-assign]
                    ledger.record_intent = nothing  # type: ignore[assignment]
                try:
                    seen.clear()
                    began = time.perf_counter()
                    record = await rt.jobs.start("sim", f"checkpoints {n} {kind}",
                                                 method="sequential")
                    done = await rt.jobs.wait(record.id, 300)
                    walls[kind].append(time.perf_counter() - began)
                    statements[kind].append(sum(1 for s in seen if not s.startswith(
                        ("BEGIN", "COMMIT", "SAVEPOINT", "RELEASE"))))
                    assert done.status == "completed", done
                    if kind == "with":
                        steps.append(len(await JobStore(db).steps(record.id)))
                finally:
                    JobStore.save_step = saved  # type: ignore[method-assign]
                    ledger.record_intent = intent
    return {"walls": walls, "statements": statements, "steps": steps}


def _checkpoint_rows(result: dict[str, object], rounds: int) -> list[Row]:
    walls: Any = result["walls"]
    statements: Any = result["statements"]
    steps = statistics.median(result["steps"])  # type: ignore[arg-type]
    ratios = [a / b for a, b in zip(walls["with"], walls["without"], strict=True)]
    with_wall, without_wall = statistics.median(walls["with"]), statistics.median(
        walls["without"])
    extra = {"rounds": rounds, "ratio_median": statistics.median(ratios),
             "steps_per_job": steps, "load": os.getloadavg()[0]}
    per_step = (statistics.median(statements["with"])
                - statistics.median(statements["without"])) / steps
    return [
        Row(SUITE, "sequential job: wall time with its checkpoints", with_wall, "s",
            "the same job without them", without_wall, target="<= 1.05x",
            passed=statistics.median(ratios) <= 1.05, extra=extra),
        Row(SUITE, "sequential job: store statements per stored step", per_step, "statements",
            extra={**extra, "statements_with": statistics.median(statements["with"]),
                   "statements_without": statistics.median(statements["without"])}),
    ]


def run(quick: bool) -> list[Row]:
    from ask_another.simulator import Simulator

    logging.getLogger().setLevel(logging.ERROR)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR))
    jobs_n, latency, poll = (50, 0.05, 0.05) if quick else (1000, 0.5, 0.5)
    bursts = (100, 300) if quick else (3000, 10000)
    with Simulator.process(latency=latency) as urls, \
            tempfile.TemporaryDirectory(prefix="bench-research-") as tmp:
        result = trio.run(_measure, urls.gemini_base, Path(tmp), jobs_n, latency, poll)
        burst_rows = [row for size in bursts for row in _burst_rows(
            trio.run(_burst, urls.gemini_base, Path(tmp) / f"burst-{size}", size))]
        rounds = 2 if quick else 12
        checkpoint_rows = _checkpoint_rows(trio.run(
            _checkpoints, urls.openai_base, Path(tmp) / "checkpoints", rounds), rounds)
    single = [s * 1000 for s in result["single"]]  # type: ignore[attr-defined]
    table = [s * 1000 for s in result["table"]]  # type: ignore[attr-defined]
    stored = [s * 1000 for s in result["single_stored"]]  # type: ignore[attr-defined]
    wall, ideal = float(result["wall"]), float(result["ideal"])  # type: ignore[arg-type]
    per_job = float(result["memory_per_job_kb"])  # type: ignore[arg-type]
    own = int(result["own_results"])  # type: ignore[call-overload]
    extra = {"jobs": jobs_n, "latency_s": latency, "poll_s": poll}
    p99 = _pct(single, 0.99)
    return [
        Row(SUITE, f"{jobs_n} jobs: own result", own, "jobs", better="higher",
            target=f"= {jobs_n}", passed=own == jobs_n, extra=extra),
        Row(SUITE, f"{jobs_n} jobs: wall time", wall, "s", "ideal (parallel)", ideal,
            extra={**extra, "ratio_to_ideal": wall / ideal}),
        Row(SUITE, "memory per running job", per_job, "KB", target="< 100 KB",
            passed=per_job < 100,
            extra={**extra, "baseline_mb": result["baseline_mb"], "peak_mb": result["peak_mb"]}),
        Row(SUITE, "check_research(job) p50", _pct(single, 0.5), "ms",
            extra={**extra, "samples": len(single)}),
        Row(SUITE, "check_research(job) p99", p99, "ms", target="< 50 ms", passed=p99 < 50,
            extra={**extra, "samples": len(single), "max_ms": max(single, default=0)}),
        Row(SUITE, "check_research(finished job) p99", _pct(stored, 0.99), "ms",
            extra={**extra, "samples": len(stored), "p50_ms": _pct(stored, 0.5)}),
        Row(SUITE, "check_research() table p50", _pct(table, 0.5), "ms",
            extra={**extra, "samples": len(table)}),
        Row(SUITE, "check_research() table p99", _pct(table, 0.99), "ms",
            extra={**extra, "samples": len(table), "mean_ms": statistics.fmean(table or [0])}),
        Row(SUITE, "heartbeat: most leases renewed by one statement",
            float(result["renewed_max"]),  # type: ignore[arg-type]
            "jobs", better="higher",
            extra={**extra, "lease_s": LEASE_SECONDS, "renewals": result["renewals"],
                   "slowest_renewal_ms": result["renew_ms_max"],
                   "failed_beats": result["heartbeat_failures"]}),
        *burst_rows,
        *checkpoint_rows,
    ]

