"""Spending through the real stdio server: a ledger row for every kind of call, estimates in
the answers, the usage report, and the budget ceilings refusing calls and stopping a running
job at its next step."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio
from mcp import Client
from stdio_server import stdio_client_for
from tool_results import call

from ask_another.simulator import Simulator

pytestmark = pytest.mark.slow  # starts real server processes

KEY = "sk-test-SPEND-5b4a3c2d1e"
UNPRICED_AGENT = "gemini/deep-research-sim-unpriced"


def env(sim: Simulator, home: Path, **extra: str) -> dict[str, str]:
    return {
        "ASK_ANOTHER_HOME": str(home),
        "ASK_ANOTHER_POLL_SECONDS": "0.05",
        "MODEL_GPT4": f"openai/gpt-4o;{KEY};{sim.openai_base}",  # priced in litellm's map
        "MODEL_SIM": f"openai/m1;{KEY};{sim.openai_base}",  # no price: unknown
        "MODEL_PPLX": f"perplexity/sonar-deep-research;{KEY};{sim.openai_base}",
        "MODEL_GDR": f"{UNPRICED_AGENT};{KEY};{sim.url}",
        **extra,
    }


def ledger(home: Path) -> list[sqlite3.Row]:
    with sqlite3.connect(home / "ask-another.sqlite3") as conn:
        conn.row_factory = sqlite3.Row
        return conn.execute("SELECT * FROM usage ORDER BY id").fetchall()


async def wait_for(condition: Callable[[], bool], seconds: float = 30.0) -> None:
    with trio.fail_after(seconds):
        while not condition():  # noqa: ASYNC110 - polls a SQLite file another process writes
            await trio.sleep(0.05)


async def researched(client: Client, model: str, query: str) -> dict[str, Any]:
    """Start a research job, the call waiting up to 60 s for it; its answer's body."""
    error, text = await call(client, "start_research", model=model, query=query, timeout=60)
    assert not error, text
    body: dict[str, Any] = json.loads(text)
    return body


async def test_ledger_estimates_and_ceilings(sim: Simulator, tmp_path: Path):
    home = tmp_path / "home"
    with (tmp_path / "stderr.log").open("w") as stderr:
        async with stdio_client_for(env(sim, home), stderr) as client:
            # A completion with a priced model and one with an unpriced model.
            error, text = await call(client, "completion", model="gpt4", prompt="Priced?")
            assert not error, text
            error, text = await call(client, "completion", model="sim", prompt="Unpriced?")
            assert not error and "cost unknown" in text, text
            # A consensus with a synthesis: the estimate is stated, unknown where unknown.
            error, text = await call(client, "consensus", models=["gpt4", "sim"],
                                     prompt="Agree?", synthesize="gpt4")
            assert not error, text
            assert "Estimated before it started: about $" in text
            assert "+ unknown for openai/m1" in text
            conversation = text.rsplit("conversation_id: ", 1)[1].strip()
            # A deep-research job (one long completion): its estimate is in the answer.
            body = await researched(client, "pplx", "Deep?")
            assert body["estimated_cost"].startswith("about $")
            research_job = body["job_id"]
            # A Gemini interaction job with an unpriced agent: unknown, never $0.
            body = await researched(client, "gdr", "Agent?")
            assert body["estimated_cost"].startswith("unknown")
            gemini_job = body["job_id"]

            rows = ledger(home)
            kinds = [(r["kind"], r["model"], r["tool"]) for r in rows]
            assert kinds[:2] == [("completion", "openai/gpt-4o", "completion"),
                                 ("completion", "openai/m1", "completion")]
            # The panel's two calls in the order they ended, then the synthesis.
            assert sorted(kinds[2:4]) == [("consensus", "openai/gpt-4o", "consensus"),
                                          ("consensus", "openai/m1", "consensus")]
            assert kinds[4:] == [("synthesis", "openai/gpt-4o", "consensus"),
                                 ("research", "perplexity/sonar-deep-research", "start_research"),
                                 ("research", UNPRICED_AGENT, "start_research")]
            assert rows[0]["cost_usd"] > 0 and rows[0]["prompt_tokens"] > 0
            assert rows[1]["cost_usd"] is None and rows[1]["completion_tokens"] > 0
            assert {r["conversation_id"] for r in rows[2:5]} == {conversation}
            assert rows[0]["conversation_id"] and rows[0]["conversation_id"] != conversation
            assert rows[5]["job_id"] == research_job and rows[6]["job_id"] == gemini_job
            assert rows[6]["cost_usd"] is None
            assert all(r["at"] <= time.time() for r in rows)

            # The usage report: by day, model and tool; the unpriced model is "unknown".
            error, report = await call(client, "usage", period="today")
            assert not error, report
            assert report.startswith("Usage for today (UTC): $")
            assert "calls of unknown price over 7 provider calls" in report
            assert "  openai/m1: cost unknown · 2 calls" in report
            assert "By day:" in report and "By tool:" in report
            assert "  consensus: $" in report and "  start_research: $" in report
            error, report = await call(client, "usage", period="fortnight")
            assert error and "unknown period 'fortnight'" in report

        spent = sum(r["cost_usd"] or 0.0 for r in ledger(home))
        # Ceilings: the same home, a daily ceiling just above what was spent.
        ceiling = f"{spent + 0.000001:.6f}"
        async with stdio_client_for(env(sim, home, ASK_ANOTHER_BUDGET_DAY_USD=ceiling,
                                        ASK_ANOTHER_POLL_SECONDS="0.2"), stderr) as client:
            before = len(sim.requests)
            for tool, arguments in [
                ("consensus", {"models": ["gpt4", "sim"], "prompt": "Again?"}),
                ("completion", {"model": "gpt4", "prompt": "Again?"}),
                ("start_research", {"model": "pplx", "query": "Again?"}),
            ]:
                error, text = await call(client, tool, **arguments)
                assert error, text
                assert "would cross the budget ceiling ASK_ANOTHER_BUDGET_DAY_USD=$" in text
                assert "spent this day" in text and "resets at " in text and "UTC" in text
                if tool == "consensus":  # the unpriced model's part is unknown, not $0
                    assert "this consensus is estimated at about $0.0" in text, text
                    assert "+ unknown for openai/m1" in text
            assert len(sim.requests) == before  # nothing was asked of any provider

            # A running job stops at its next step once the ceiling is reached (here by spend
            # another session on the same home recorded meanwhile).
            error, text = await call(client, "start_research", model="gdr",
                                     query="Long one [[sim:polls=200]]", timeout=0.5)
            assert not error and "keeps running after this session ends" in text, text
            assert "Estimated cost before it started: unknown" in text
            job = text.split("Research job ", 1)[1].split(" ", 1)[0]
            with sqlite3.connect(home / "ask-another.sqlite3") as conn:
                conn.execute("INSERT INTO usage (at, kind, model, cost_usd, tool) VALUES "
                             "(?, 'completion', 'openai/gpt-4o', 5.0, 'completion')",
                             (time.time(),))
            with trio.fail_after(30):
                while True:
                    error, text = await call(client, "check_research", job_id=job)
                    if "is in progress" not in text and "is pending" not in text:
                        break
                    await trio.sleep(0.1)
            assert "failed" in text and "ASK_ANOTHER_BUDGET_DAY_USD" in text, text
            interaction = next(i for i in sim.interactions.values()
                               if "Long one" in i.input_text)
            assert interaction.cancel_called
