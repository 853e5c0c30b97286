"""Research-quality benchmark: 10 scripted questions through the local pipeline on the simulator.

Each question is one research job (method sequential, through `ResearchJobs`, the API the MCP
tools use) with an ordinary model on the simulator's default pipeline script and a Tavily-format
search engine on the simulator (a child process with a fixed latency per request). Jobs run one
at a time, so each wall time is the job's own. Per job it reports:

- provider calls (every completion and search the job made, from the job's usage);
- sources found (distinct sources over all queries) and cited sources (the report's citations);
- wall time from start to result, and the cost in USD (searches at litellm's Tavily price; the
  simulated model has no price, counted as unpriced calls);
- whether the model made the plan (a template fallback shows up here).

A change to the pipeline (prompts, planning, repair, search use) shows its effect on these
numbers; the simulator's answers are deterministic, so differences are the pipeline's.
"""

from __future__ import annotations

import logging
import statistics
import tempfile
import time
from pathlib import Path

import structlog
import trio

from bench.report import Row

SUITE = "research_quality"
QUESTIONS: tuple[tuple[str, str], ...] = (
    ("Compare SQLite and PostgreSQL for an embedded analytics product", "standard"),
    ("Compare Rust and Go for writing network services", "standard"),
    ("What limits the efficiency of perovskite solar cells?", "standard"),
    ("How do large language models cite their sources?", "shallow"),
    ("Compare trio and asyncio for structured concurrency in Python", "shallow"),
    ("What are the risks of running database migrations during deploys?", "standard"),
    ("How did the Erlang OTP supervision model come about?", "deep"),
    ("Compare heat pumps with gas boilers for a cold-climate house", "deep"),
    ("What evidence is there that code review reduces defects?", "standard"),
    ("Which factors decide the battery life of an e-bike?", "shallow"),
)


async def _measure(openai_base: str, url: str, home: Path) -> list[dict[str, object]]:
    from ask_another.config import Config
    from ask_another.runtime import open_runtime

    config = Config.from_env({
        "ASK_ANOTHER_HOME": str(home), "ASK_ANOTHER_POLL_SECONDS": "0.05",
        "ASK_ANOTHER_LOG_LEVEL": "ERROR", "ASK_ANOTHER_GATEWAY_PROCESS": "0",
        "MODEL_SIM": f"openai/sim-chat;bench-key;{openai_base}",
        "SEARCH_SIM": f"tavily;bench-key;{url}",
    })
    out: list[dict[str, object]] = []
    async with open_runtime(config, prewarm_after=0) as runtime:
        jobs = runtime.jobs
        warm = await jobs.start("sim", "warm-up question", "sequential", depth="shallow")
        await jobs.wait(warm.id, 120)
        for question, depth in QUESTIONS:
            began = time.perf_counter()
            record = await jobs.start("sim", question, "sequential", depth=depth)
            final = await jobs.wait(record.id, 300)
            wall = time.perf_counter() - began
            usage = final.detail.get("usage") or {}
            out.append({
                "question": question, "depth": depth, "status": final.status, "wall": wall,
                "provider_calls": usage.get("provider_calls", 0),
                "searches": usage.get("searches", 0),
                "cost_usd": usage.get("cost_usd"),
                "unpriced_calls": usage.get("unpriced_calls", 0),
                "sources_found": final.detail.get("sources_found", 0),
                "cited": len(final.citations),
                "plan_source": final.detail.get("plan_source"),
                "queries": (final.detail.get("statistics") or {}).get("queries_executed", 0),
            })
    return out


def run(quick: bool) -> list[Row]:
    from ask_another.simulator import Simulator

    logging.getLogger().setLevel(logging.ERROR)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR))
    latency = 0.01 if quick else 0.05
    with Simulator.process(latency=latency) as urls, \
            tempfile.TemporaryDirectory(prefix="bench-quality-") as tmp:
        jobs = trio.run(_measure, urls.openai_base, urls.url, Path(tmp))
    rows: list[Row] = []
    for n, job in enumerate(jobs, 1):
        extra = {k: v for k, v in job.items() if k != "wall"}
        extra["latency_s"] = latency
        cost = f"${float(job['cost_usd']):.3f}" if job["cost_usd"] is not None else "$?"  # type: ignore[arg-type]
        name = (f"q{n:02d} {job['depth']}: {job['provider_calls']} calls, {job['cited']}/"
                f"{job['sources_found']} sources cited, {cost}; wall")
        rows.append(Row(SUITE, name, float(job["wall"]),  # type: ignore[arg-type]
                        "s", target="completed, model plan, cited",
                        passed=job["status"] == "completed" and job["plan_source"] == "model"
                        and int(job["cited"]) > 0,  # type: ignore[call-overload]
                        extra=extra))

    def mean(key: str) -> float:
        return statistics.fmean(float(j[key] or 0) for j in jobs)  # type: ignore[arg-type]

    total_cost = sum(float(j["cost_usd"] or 0) for j in jobs)  # type: ignore[arg-type]
    rows += [
        Row(SUITE, "provider calls per job (mean)", mean("provider_calls"), "calls"),
        Row(SUITE, "sources found per job (mean)", mean("sources_found"), "sources",
            better="higher"),
        Row(SUITE, "cited sources per job (mean)", mean("cited"), "sources", better="higher"),
        Row(SUITE, "wall time per job (mean)", mean("wall"), "s"),
        Row(SUITE, "cost per job (mean, priced calls)", total_cost / len(jobs), "USD",
            extra={"unpriced_calls_per_job": mean("unpriced_calls")}),
    ]
    return rows
