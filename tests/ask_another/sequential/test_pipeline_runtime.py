"""The pipeline inside a real runtime (store, gateway, litellm) against the loopback simulator:
`run_pipeline` with a job's context, and research jobs with method "sequential"."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio
from pipeline_script import FAILURE, MODEL, REPAIR_MARK, SLOW, query_of, responder

from ask_another.config import Config
from ask_another.research import JobContext
from ask_another.research.methods.sequential import QUERY_ATTEMPTS, run_pipeline
from ask_another.runtime import Runtime, open_runtime
from ask_another.simulator import Simulator

KEY = "sk-test-PIPELINE-0a1b2c"


def pipeline_env(sim: Simulator, home: Path) -> dict[str, str]:
    return {
        "ASK_ANOTHER_HOME": str(home),
        "ASK_ANOTHER_POLL_SECONDS": "0.05",
        "ASK_ANOTHER_ALLOW_HOSTS": "127.0.0.1",  # read_article may read the simulator's pages
        # The pages stand in for the public web: a model may read them unasked.
        "ASK_ANOTHER_PERMISSIONS": "internal=allow,after_internal=allow",
        "MODEL_SIM": f"openai/{MODEL};{KEY};{sim.openai_base}",
        # litellm in a thread of this process, as the other in-process tests: the default, a
        # shared worker process, cost each test seconds of CPU for an import this process has.
        "ASK_ANOTHER_GATEWAY_PROCESS": "0",
    }


@pytest.fixture
async def runtime(sim: Simulator, tmp_path: Path) -> AsyncIterator[Runtime]:
    sim.script(MODEL, responder(sim.url))
    async with open_runtime(Config.from_env(pipeline_env(sim, tmp_path / "home")),
                            prewarm_after=0) as rt:
        yield rt


async def context(runtime: Runtime, query: str, steps: list[tuple[str, dict[str, Any]]]
                  ) -> JobContext:
    async def save_handle(_handle: str) -> None:
        raise AssertionError("the pipeline has no provider handle to save")

    return JobContext(
        job_id="r-test", entry=runtime.config.resolve("sim"), query=query,
        config=runtime.config, gateway=await runtime.gateway(), attempt=1,
        started_at=time.time(), handle=None,
        report=lambda step, detail=None, **more: steps.append((step, {**(detail or {}),
                                                                      **more})),
        save_handle=save_handle, services=runtime.services)


async def test_pipeline_plans_runs_phases_repairs_and_compiles(runtime: Runtime,
                                                               sim: Simulator):
    steps: list[tuple[str, dict[str, Any]]] = []
    result = await run_pipeline(await context(runtime, "photonic computing", steps))

    report = result.report
    assert report.startswith("# Research Report: photonic computing")
    for heading in ("## Overview", "## Current State", "## Types and Categories",
                    "## Future Outlook", "## Methodology", "### References", "### Warnings"):
        assert heading in report, heading
    assert "## Comparison" not in report  # the failed query is skipped ...
    warning = next(w for w in result.detail["warnings"] if "q3" in w)
    # ... with a warning naming it and the provider's error, after its retries.
    assert "Query q3 failed and was skipped in the report" in warning
    assert FAILURE in warning and f"after {QUERY_ATTEMPTS} attempts" in warning
    assert warning in report
    stats = result.detail["statistics"]
    assert (stats["queries_executed"], stats["queries_succeeded"], stats["queries_failed"],
            stats["total_sources"]) == (5, 4, 1, 5)
    assert "5 queries executed, 4 succeeded, 1 failed; 5 sources" in report
    # Sources of different queries (each numbered S1 by its model) stay distinct.
    assert {c.url for c in result.citations} == {f"{sim.url}/sources/photonic-intro",
                                     "https://example.org/market", "https://example.org/paper",
                                     "https://example.org/taxonomy",
                                     "https://example.org/outlook"}
    assert "Early products ship [2]; labs scale up [3]." in report

    requests = sim.requests_for(MODEL)
    by_kind: dict[str, list[Any]] = {}
    for request in requests:
        by_kind.setdefault(query_of(request)[1], []).append(request)
    # definition: the tool call round, then the answer; the article was really read.
    assert len(by_kind["definition"]) == 2
    assert any(m.get("role") == "tool" and "success\": true" in str(m.get("content"))
               for m in by_kind["definition"][1].messages)
    assert len(by_kind["comparison"]) == QUERY_ATTEMPTS
    # types: an invalid answer, then the repair prompt naming the problem, then a valid one.
    repairs = [r for r in by_kind["types"] if REPAIR_MARK in r.last_user_text]
    assert len(by_kind["types"]) == 2 and len(repairs) == 1
    assert "no JSON object" in repairs[0].last_user_text
    # The last phase sees the findings of the queries it depends on.
    outlook = by_kind["future_outlook"][0].messages[1]["content"]
    assert "Early products ship [S1]" in outlook

    # Progress: the plan, each phase, and each query's state.
    texts = [step for step, _ in steps]
    assert texts[0] == "asking openai/m1 for a standard research plan"
    assert texts[1] == "planned 5 queries in 3 phases (the template planner)"
    assert any(t.startswith("phase 2/3:") and "q4 repairing the answer" in t for t in texts)
    assert any("q1 Read an article in progress" in t for t in texts)
    assert any("q3 attempt 2" in t for t in texts)
    assert texts[-1] == "writing the executive summary"
    final = [detail for _, detail in steps if "phase" in detail][-1]
    assert final["phase"] == 3 and final["queries"]["q3"] == "failed"
    assert final["queries"]["q1"] == "done (1 sources)"


@pytest.mark.slow  # seconds of real provider latency
async def test_sequential_job_completes_and_cancel_stops_its_queries(runtime: Runtime,
                                                                     sim: Simulator):
    jobs = runtime.jobs
    record = await jobs.start("sim", "photonic computing", method="sequential")
    final = await jobs.wait(record.id, timeout=60)
    assert final.status == "completed", final.error
    assert final.report is not None and "### Warnings" in final.report
    assert final.detail["statistics"]["queries_succeeded"] == 4

    gateway = await runtime.gateway()
    slow = await jobs.start("sim", "slow phase two of photonic computing", method="sequential")
    def phase_two() -> int:
        return sum(1 for r in sim.requests_for(MODEL) if "slow phase two" in query_of(r)[2]
                   and query_of(r)[1] in ("current_state", "comparison", "types"))

    with trio.fail_after(20):
        # The three queries of phase 2 are waiting on the simulator (another thread's state):
        # received there, and in flight at the gateway.
        while phase_two() < 3 or gateway.statistics().in_flight < 3:  # noqa: ASYNC110
            await trio.sleep(0.02)
    outcome = await jobs.cancel(slow.id)
    assert outcome.cancelled and outcome.record.status == "cancelled"
    with trio.fail_after(2):  # well before the simulator's SLOW answers would arrive
        while gateway.statistics().in_flight:  # noqa: ASYNC110 - the gateway thread's count
            await trio.sleep(0.02)
    # A request written to its socket just before the cancel may reach the simulator a moment
    # later on a loaded machine; count from here, once nothing is in flight any more.
    await trio.sleep(0.3)
    before = len(sim.requests_for(MODEL))
    await trio.sleep(SLOW + 0.5)
    # Nothing ran on: no tool call round, no phase 3.
    assert len(sim.requests_for(MODEL)) == before
    assert (await jobs.get(slow.id)).status == "cancelled"
