"""The usage ledger through the real stdio server for the research calls: an agent job's model
rounds and its web search (litellm's search API, priced per query), a sequential pipeline's
steps and searches, each a row naming the job, and a discuss call's completion; and running
agent and sequential jobs that cross a budget ceiling stop at their next step, keeping what
they found as the partial report."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest
import trio
from mcp import Client
from stdio_server import stdio_client_for
from tool_results import call

from ask_another.simulator import Reply, SimRequest, Simulator, Step, ToolCall, ToolCalls

pytestmark = pytest.mark.slow  # starts real server processes

KEY = "sk-test-LEDGER-4c3b2a1d"
QUESTION = "How are tides predicted"


def env(sim: Simulator, home: Path, **extra: str) -> dict[str, str]:
    return {"ASK_ANOTHER_HOME": str(home), "ASK_ANOTHER_POLL_SECONDS": "0.05",
            "MODEL_GPT4": f"openai/gpt-4o;{KEY};{sim.openai_base}",  # priced in litellm's map
            "SEARCH_SIM": f"tavily;{KEY};{sim.url}",  # litellm prices a Tavily search $0.008
            "ASK_ANOTHER_ALLOW_HOSTS": "127.0.0.1",  # the simulator's pages, for discuss
            **extra}


def ledger(home: Path, job: str) -> list[dict[str, Any]]:
    with sqlite3.connect(home / "ask-another.sqlite3") as conn:
        conn.row_factory = sqlite3.Row
        return [dict(r) for r in conn.execute("SELECT * FROM usage WHERE job_id = ? ORDER BY id",
                                              (job,))]


async def finished(client: Client, job: str) -> str:
    with trio.fail_after(60):
        while True:
            _error, text = await call(client, "check_research", job_id=job)
            if "is in progress" not in text and "is pending" not in text:
                return text
            await trio.sleep(0.05)


async def stopped_by_ceiling(sim: Simulator, tmp_path: Path, home: Path, ceiling: str,
                             extra_env: dict[str, str], **arguments: Any) -> tuple[str, str]:
    """Run a research job in the background (timeout 0) on a server whose daily ceiling is
    `ceiling` dollars, to its end; its id and its last answer, which says it failed at that
    ceiling."""
    with (tmp_path / "stderr.log").open("w") as stderr:
        async with stdio_client_for(env(sim, home, ASK_ANOTHER_BUDGET_DAY_USD=ceiling,
                                        **extra_env), stderr) as client:
            error, text = await call(client, "start_research", timeout=0, **arguments)
            assert not error, text
            job = text.split("Research job ", 1)[1].split(" ", 1)[0]
            text = await finished(client, job)
    assert "is failed" in text, text
    assert (f"would cross the budget ceiling ASK_ANOTHER_BUDGET_DAY_USD=${ceiling} per day"
            in text)
    return job, text


async def test_research_rows_agent_sequential_and_search(sim: Simulator, tmp_path: Path):
    home = tmp_path / "home"
    sim.script("gpt-4o", [ToolCalls([ToolCall("search_web", {"query": QUESTION})]),
                          Reply("Tides are predicted from harmonic constituents.")])
    with (tmp_path / "stderr.log").open("w") as stderr:
        async with stdio_client_for(env(sim, home), stderr) as client:
            error, text = await call(client, "start_research", model="gpt4", query=QUESTION,
                                     method="agent", timeout=60)
            assert not error, text
            body = json.loads(text)
            rows = ledger(home, body["job_id"])
            assert [(r["kind"], r["model"], r["tool"]) for r in rows] == [
                ("research", "openai/gpt-4o", "start_research"),
                ("search", "web search", "start_research"),
                ("research", "openai/gpt-4o", "start_research")]
            assert rows[0]["cost_usd"] > 0 and rows[0]["prompt_tokens"] > 0
            assert rows[1]["cost_usd"] == pytest.approx(0.008)
            assert body["usage"]["provider_calls"] == 3 and body["usage"]["searches"] == 1

            # The local pipeline: its plan, each query's rounds and searches, its summary.
            error, text = await call(client, "start_research", model="gpt4", query=QUESTION,
                                     method="sequential", depth="shallow", timeout=90)
            assert not error, text
            body = json.loads(text)
            rows = ledger(home, body["job_id"])
            usage = body["usage"]
            searches = [r for r in rows if r["kind"] == "search"]
            steps = [r for r in rows if r["kind"] == "research"]
            assert usage["searches"] >= 1 and len(searches) == usage["searches"]
            assert len(steps) == usage["provider_calls"] - usage["searches"] >= 3
            assert {r["model"] for r in steps} == {"openai/gpt-4o"}
            assert {r["tool"] for r in rows} == {"start_research"}
            assert sum(r["cost_usd"] for r in rows) == pytest.approx(usage["cost_usd"])

            # discuss: an article read, then one completion about it.
            page = f"{sim.url}/sources/search/how-are-tides-predicted/1"
            error, text = await call(client, "discuss", url=page, model="gpt4",
                                     prompt="Summarize it.")
            assert not error, text
            with sqlite3.connect(home / "ask-another.sqlite3") as conn:
                last = conn.execute("SELECT kind, model, tool, conversation_id, cost_usd FROM "
                                    "usage ORDER BY id DESC LIMIT 1").fetchone()
            assert last[:3] == ("completion", "openai/gpt-4o", "discuss")
            assert last[3] and last[3] in text and last[4] > 0

            error, report = await call(client, "usage", period="today")
            assert not error, report
            assert "  web search: $" in report and "  search: " not in report
            assert "  start_research: $" in report


async def test_an_agent_job_stops_at_its_next_round_past_a_ceiling(sim: Simulator,
                                                                   tmp_path: Path):
    home = tmp_path / "home"
    db = home / "ask-another.sqlite3"
    rounds: list[str] = []

    def agent(request: SimRequest) -> Step:
        rounds.append(request.last_user_text or "")
        if len(rounds) == 1:
            return ToolCalls([ToolCall("search_web", {"query": QUESTION})],
                             text="Finding one: the moon drives the tides.")
        if len(rounds) == 2:
            # While this round is in flight, another session on the same home spends past the
            # daily ceiling (written before the reply, so the job's next check sees it).
            with sqlite3.connect(db) as conn:
                conn.execute("INSERT INTO usage (at, kind, model, cost_usd, tool) VALUES "
                             "(?, 'completion', 'openai/gpt-4o', 5.0, 'completion')",
                             (time.time(),))
            return ToolCalls([ToolCall("search_web", {"query": "harmonic constituents"})],
                             text="Finding two: harmonic constituents.")
        return Reply("Never reached.")

    sim.script("gpt-4o", agent)
    job, text = await stopped_by_ceiling(sim, tmp_path, home, "1.00", {}, model="gpt4",
                                         query=QUESTION, method="agent")
    assert "spent this day: $5.0" in text and "resets at " in text
    assert "The agent stopped after 2 model calls" in text
    partial = text.split("Partial report:\n", 1)[1]
    assert "Finding one: the moon drives the tides." in partial
    assert "Finding two: harmonic constituents." in partial
    assert len(rounds) == 2  # no third round
    assert len(sim.requests_for("search")) == 1  # the second round's search never ran
    kinds = [r["kind"] for r in ledger(home, job)]
    assert kinds == ["research", "search", "research"]  # the calls made are in the ledger


async def test_a_sequential_job_stops_at_its_next_step_past_a_ceiling(sim: Simulator,
                                                                      tmp_path: Path):
    # An unpriced model (its estimate is unknown, so the job starts) and Tavily's $0.008 a
    # search: the two searches of phase 1 cross $0.01, so phase 2 never runs.
    home = tmp_path / "home"
    compare = "Compare SQLite and PostgreSQL for an embedded analytics product"
    job, text = await stopped_by_ceiling(
        sim, tmp_path, home, "0.01", {"MODEL_SIM": f"openai/m1;{KEY};{sim.openai_base}"},
        model="sim", query=compare, method="sequential")
    assert "spent this day: $0.02 + " in text and "calls of unknown price" in text
    assert "The research stopped after 2 of 3 queries" in text
    assert "Methodology" in text.split("Partial report:\n", 1)[1]  # what phase 1 found is kept
    assert not any("Query q3" in str(r.messages[-1]["content"]) for r in sim.requests_for("m1"))
    kinds = [r["kind"] for r in ledger(home, job)]
    assert kinds.count("search") == 2 and kinds.count("research") >= 3
