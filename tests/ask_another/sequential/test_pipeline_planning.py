"""The pipeline's model-made plan, web search through litellm, usage and citations, on a real
runtime against the simulator's default pipeline script (its plan, its search, its answers)."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio

from ask_another.config import Config
from ask_another.research import JobContext
from ask_another.research.methods import ResearchFailed
from ask_another.research.methods.sequential import run_pipeline
from ask_another.runtime import Runtime, open_runtime
from ask_another.simulator import Fail, Reply, Simulator

KEY = "sk-test-PLANNING-9f8e7d"
SEARCH_KEY = "tvly-test-SEARCH-5c4b3a"
COMPARE = "Compare SQLite and PostgreSQL for an embedded analytics product"
PLAN_MARK = "You are the planner of a research pipeline"


def env(sim: Simulator, home: Path, **extra: str) -> dict[str, str]:
    return {"ASK_ANOTHER_HOME": str(home), "ASK_ANOTHER_POLL_SECONDS": "0.05",
            "ASK_ANOTHER_GATEWAY_PROCESS": "0",
            "MODEL_SIM": f"openai/m1;{KEY};{sim.openai_base}", **extra}


@pytest.fixture
async def runtime(sim: Simulator, tmp_path: Path) -> AsyncIterator[Runtime]:
    config = Config.from_env(env(sim, tmp_path / "home",
                                 SEARCH_TAVILY=f"tavily;{SEARCH_KEY};{sim.url}"))
    async with open_runtime(config, prewarm_after=0) as rt:
        yield rt


async def context(runtime: Runtime, query: str, depth: str = "standard",
                  steps: list[tuple[str, dict[str, Any]]] | None = None) -> JobContext:
    async def save_handle(_handle: str) -> None:
        raise AssertionError("the pipeline has no provider handle to save")

    seen = steps if steps is not None else []
    return JobContext(
        job_id="r-plan", entry=runtime.config.resolve("sim"), query=query,
        config=runtime.config, gateway=await runtime.gateway(), attempt=1,
        started_at=time.time(), handle=None, depth=depth,
        report=lambda step, detail=None, **more: seen.append((step, {**(detail or {}),
                                                                     **more})),
        save_handle=save_handle, services=runtime.services)


def plan_requests(sim: Simulator) -> list[Any]:
    return [r for r in sim.requests_for("m1")
            if r.messages and str(r.messages[0].get("content", "")).startswith(PLAN_MARK)]


async def test_model_plan_for_a_comparison_has_no_template_artefacts(runtime: Runtime,
                                                                     sim: Simulator):
    steps: list[tuple[str, dict[str, Any]]] = []
    result = await run_pipeline(await context(runtime, COMPARE, steps=steps))

    assert result.detail["plan_source"] == "model"
    queries = [r.messages[1]["content"] for r in sim.requests_for("m1")
               if "Query q" in str(r.messages[-1].get("content", ""))]
    texts = " ".join(queries)
    assert "What is Compare" not in texts and "Compare Compare" not in texts
    assert "What are the strengths and limits of SQLite for an embedded analytics product?" \
        in texts
    assert "The research plan was made by the model." in result.report
    # Sections are headed by the model's query texts, not by their types.
    assert "\n## What are the strengths and limits of PostgreSQL for an embedded analytics " \
        "product?\n" in result.report
    assert "## Overview" not in result.report
    assert ("## Executive Summary\n\n[simulated m1] The findings answer the question "
            f'"{COMPARE}" from 9 sources [1][2][3].') in result.report
    assert "The executive summary was written by the model from the findings." in result.report
    assert any("(the model)" in step for step, _ in steps)


async def test_search_results_become_titled_citations_with_their_query(runtime: Runtime,
                                                                       sim: Simulator):
    result = await run_pipeline(await context(runtime, COMPARE))

    searches = sim.requests_for("search")
    assert len(searches) == 3  # one search_web call per query, through litellm to "Tavily"
    assert all(r.method == "POST" and r.headers["authorization"] == f"Bearer {SEARCH_KEY}"
               for r in searches)
    assert result.citations
    for cited in result.citations:
        assert cited.url.startswith(f"{sim.url}/sources/search/")
        assert cited.title and cited.title.startswith("Simulated source ")
        assert cited.query and cited.query.endswith("?")
    assert {c.query for c in result.citations} >= {
        "How do SQLite and PostgreSQL differ for an embedded analytics product, and when is "
        "each the better choice?"}
    assert "### References" in result.report


async def test_usage_sums_every_provider_call(runtime: Runtime, sim: Simulator):
    steps: list[tuple[str, dict[str, Any]]] = []
    result = await run_pipeline(await context(runtime, COMPARE, steps=steps))

    usage = result.detail["usage"]
    completions = sim.requests_for("m1")
    searches = sim.requests_for("search")
    # 1 plan call, per query a search round and an answer round, 1 executive summary.
    assert (len(completions), len(searches)) == (8, 3)
    assert usage["provider_calls"] == len(completions) + len(searches)
    assert usage["searches"] == 3
    assert usage["prompt_tokens"] > 0 and usage["completion_tokens"] > 0
    # openai/m1 has no price in litellm's map; Tavily's is $0.008 a query.
    assert usage["unpriced_calls"] == 8
    assert usage["cost_usd"] == pytest.approx(3 * 0.008)
    so_far = [d["usage"]["provider_calls"] for _, d in steps if "usage" in d]
    assert so_far == sorted(so_far) and so_far[-1] <= usage["provider_calls"]


async def test_depth_deep_plans_more_queries(runtime: Runtime, sim: Simulator):
    result = await run_pipeline(await context(runtime, "photonic computing", depth="deep"))
    assert result.detail["statistics"]["queries_executed"] == 5
    assert "Depth: deep" in plan_requests(sim)[0].messages[1]["content"]


async def test_an_invalid_plan_is_repaired_once(runtime: Runtime, sim: Simulator):
    sim.script("m1", [Reply("Here is my plan: first look things up, then compare.")])
    result = await run_pipeline(await context(runtime, COMPARE))

    assert result.detail["plan_source"] == "model"
    first, second = plan_requests(sim)
    assert "Your plan does not fit the contract: the answer holds no JSON object" in str(
        second.messages[-1]["content"])
    assert len(first.messages) == 2 and len(second.messages) == 4


async def test_a_plan_still_invalid_after_the_repair_falls_back_to_the_template(
        runtime: Runtime, sim: Simulator):
    bad = {"queries": [{"query_id": "q1", "query_text": "only one", "query_type": "x",
                        "priority": "urgent"}], "result_schemas": []}
    sim.script("m1", [Reply("```json\n" + json.dumps(bad) + "\n```\nHope this helps!")] * 2)
    result = await run_pipeline(await context(runtime, "photonic computing"))

    assert result.detail["plan_source"] == "template"
    assert len(plan_requests(sim)) == 2
    report = result.report
    assert ("The research plan was made by the template planner, because the model's plan "
            "did not fit the plan contract, even after one repair: ") in report
    assert "queries[0].priority must be one of critical, high, medium, low" in report
    assert "## Overview" in report  # the template's definition query ran


async def test_errors_are_one_line_per_distinct_reason(runtime: Runtime, sim: Simulator):
    def respond(request: Any) -> Any:
        if str(request.messages[0].get("content", "")).startswith(PLAN_MARK):
            return None  # the default plan
        return Fail(500, "the query backend exploded")

    sim.script("m1", respond)
    with pytest.raises(ResearchFailed) as failed:
        await run_pipeline(await context(runtime, COMPARE))

    message = str(failed.value)
    assert message.count("the query backend exploded") == 1
    assert "q1, q2, q3: gave up after 2 attempts" in message
    assert "\n" not in message
    report = failed.value.report or ""
    # Once in the warnings and once in the methodology, instead of once per query in each.
    assert report.count("the query backend exploded") == 2
    assert report.count("the same reason as q1") == 4


async def test_check_research_shows_usage_so_far_and_in_total(runtime: Runtime, sim: Simulator):
    from ask_another.server.tools.research import job_text, result_json
    from ask_another.simulator import Slow

    held = trio.Event()

    def respond(request: Any) -> Any:
        if "Query q3" in str(request.messages[-1].get("content", "")) and not held.is_set():
            return Slow(1.5)  # the last query's search round waits: the job is running
        return None

    sim.script("m1", respond)
    jobs = runtime.jobs
    record = await jobs.start("sim", COMPARE, "sequential", depth="shallow")
    with trio.fail_after(20):
        while True:
            running = await jobs.get(record.id)
            if "q3 running" in (running.step or "") and running.detail.get("usage"):
                break
            await trio.sleep(0.05)
    text = job_text(running)
    assert "Usage so far: " in text and "provider calls (2 web searches)" in text
    held.set()
    final = await jobs.wait(record.id, 30)
    assert final.status == "completed"
    body = json.loads(result_json(final))
    assert body["usage"]["provider_calls"] == 11 and body["usage"]["searches"] == 3
    assert body["usage_text"].startswith("11 provider calls (3 web searches)")
    assert all({"url", "title", "query"} <= set(c) for c in body["citations"])
    stored = await jobs.get(record.id)  # from the store, after the actor is gone
    assert stored.detail["usage"] == body["usage"]


async def test_a_failed_job_keeps_its_usage(runtime: Runtime, sim: Simulator):
    from ask_another.server.tools.research import job_text

    def respond(request: Any) -> Any:
        if str(request.messages[0].get("content", "")).startswith(PLAN_MARK):
            return None
        return Fail(400, "refused")

    sim.script("m1", respond)
    record = await runtime.jobs.start("sim", COMPARE, "sequential", depth="shallow")
    final = await runtime.jobs.wait(record.id, 30)
    assert final.status == "failed"
    stored = await runtime.jobs.get(record.id)
    assert stored.detail["usage"]["provider_calls"] == 1  # the plan; refused calls cost nothing
    assert "Usage in total: 1 provider call, " in job_text(stored)


async def test_a_summary_citing_unknown_sources_is_repaired_then_kept(runtime: Runtime,
                                                                      sim: Simulator):
    editor = "You are the editor of a research pipeline"
    asked: list[Any] = []

    def respond(request: Any) -> Any:
        if not str(request.messages[0].get("content", "")).startswith(editor):
            return None
        asked.append(request)
        if len(asked) == 1:
            return Reply('{"executive_summary": "SQLite wins [1][42]."} and some trailing text')
        return Reply('```json\n{"executive_summary": "SQLite suits embedded use [1]."}\n```')

    sim.script("m1", respond)
    result = await run_pipeline(await context(runtime, COMPARE))
    assert "## Executive Summary\n\nSQLite suits embedded use [1]." in result.report
    assert ("Your summary does not fit: it cites [42], which the source list does not have (it "
            "has [1] to [9])") in asked[1].messages[-1]["content"]
    assert result.detail["summary_source"] == "model"


async def test_a_summary_that_never_fits_leaves_the_templates(runtime: Runtime, sim: Simulator):
    editor = "You are the editor of a research pipeline"

    def respond(request: Any) -> Any:
        if str(request.messages[0].get("content", "")).startswith(editor):
            return Reply("I would rather not.")
        return None

    sim.script("m1", respond)
    result = await run_pipeline(await context(runtime, COMPARE))
    assert "This report presents research findings on" in result.report
    assert ("The executive summary is the template's, because the model's summary did not fit, "
            "even after one repair: the answer holds no JSON object.") in result.report
    assert result.detail["summary_source"] == "template"


async def test_a_budget_ceiling_stops_the_pipeline_at_its_next_step(sim: Simulator,
                                                                    tmp_path: Path):
    # Tavily's $0.008 a search: the two searches of phase 1 cross $0.01, so phase 2 never runs.
    config = Config.from_env(env(sim, tmp_path / "home", SEARCH_TAVILY=f"tavily;k;{sim.url}",
                                 ASK_ANOTHER_BUDGET_DAY_USD="0.01"))
    async with open_runtime(config, prewarm_after=0) as rt:
        record = await rt.jobs.start("sim", COMPARE, "sequential")
        final = await rt.jobs.wait(record.id, 30)
    assert final.status == "failed"
    assert "budget ceiling ASK_ANOTHER_BUDGET_DAY_USD=$0.01" in (final.error or "")
    assert "The research stopped after 2 of 3 queries" in (final.error or "")
    assert final.report and "Methodology" in final.report  # what phase 1 found is kept
    asked = [r.messages[-1]["content"] for r in sim.requests_for("m1")]
    assert not any("Query q3" in str(text) for text in asked)
