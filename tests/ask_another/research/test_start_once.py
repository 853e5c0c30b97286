"""One start_research resolves its model once and estimates its cost once: the estimate made at
the start is the one the ceilings are checked against, the one stored with the job, the one its
spend confirmation asks and the one the answer states (it was resolved 4 times and estimated 3
times). Counted around the real functions, which still do the work."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from mcp import Client
from mcp.types import ElicitResult

import ask_another.spend.before as before
from ask_another.config import Config
from ask_another.server import build_server
from ask_another.simulator import Simulator

GEMINI = "gemini/deep-research-pro-preview-12-2025"


async def test_one_start_research_resolves_once_and_estimates_once(
        make_config: Callable[..., Config], sim: Simulator, monkeypatch: pytest.MonkeyPatch):
    # A ceiling (checked against the estimate) and a confirmation threshold (which asks it):
    # every place that used to resolve or estimate again is on this path.
    config = make_config(MODEL_GDR=f"{GEMINI};sk-test-k;{sim.url}",
                         ASK_ANOTHER_CONFIRM_USD="0.0001", ASK_ANOTHER_BUDGET_DAY_USD="1000",
                         ASK_ANOTHER_POLL_SECONDS="0.05")
    sim.script_interaction(GEMINI.split("/", 1)[1], statuses=["in_progress", "completed"])
    counts = {"resolve": 0, "estimate": 0}
    resolve, estimate = Config.resolve, before.research_estimate

    def counted_resolve(self: Config, name: str) -> Any:
        counts["resolve"] += 1
        return resolve(self, name)

    def counted_estimate(*args: Any, **kwargs: Any) -> Any:
        counts["estimate"] += 1
        return estimate(*args, **kwargs)

    monkeypatch.setattr(Config, "resolve", counted_resolve)
    monkeypatch.setattr(before, "research_estimate", counted_estimate)
    asked: list[str] = []

    async def on_elicit(_ctx: Any, params: Any) -> ElicitResult:
        asked.append(params.message)
        return ElicitResult(action="accept", content={"decision": "allow"})

    server = build_server(config, prewarm_after=None)
    async with Client(server, elicitation_callback=on_elicit) as client:
        result = await client.call_tool("start_research",
                                        {"model": "gdr", "query": "tides", "timeout": 30})
        body = json.loads(result.content[0].text)  # type: ignore[union-attr]
    assert body["status"] == "completed"
    assert len(asked) == 1 and body["estimated_cost"] in asked[0]  # the same estimate
    assert counts == {"resolve": 1, "estimate": 1}
