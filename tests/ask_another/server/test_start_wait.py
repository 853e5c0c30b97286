"""How long start_research waits when the call gives no `timeout`: `ASK_ANOTHER_START_WAIT`
for a client that hears progress, at most `QUIET_WAIT` (3 s) for one that does not (in memory,
where the SDK carries a progress callback rather than a token: both must count as asking)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import pytest
from mcp import Client
from tool_results import text_of

from ask_another.config import Config
from ask_another.server import build_server
from ask_another.server.tools.attached import QUIET_WAIT
from ask_another.simulator import Simulator

pytestmark = pytest.mark.slow  # a few seconds of real waiting on a simulated provider

GEMINI = "gemini/deep-research-pro-preview-12-2025"


async def test_the_default_wait_follows_whether_the_client_hears_progress(
        make_config: Callable[..., Config], sim: Simulator):
    agent = GEMINI.split("/", 1)[1]
    config = make_config(MODEL_GDR=f"{GEMINI};k;{sim.url}", ASK_ANOTHER_POLL_SECONDS="0.1",
                         ASK_ANOTHER_CONFIRM_USD="1000")
    heard: list[str] = []

    async def progress(_done: float, _total: float | None, message: str | None) -> None:
        heard.append(message or "")

    async with Client(build_server(config, prewarm_after=None)) as client:
        # Ten polls growing by half from 0.1 s: about 11 s of research.
        sim.script_interaction(agent, statuses=["in_progress"] * 10 + ["completed"])
        began = time.monotonic()
        quiet = await client.call_tool("start_research", {"model": "gdr", "query": "quiet"})
        waited = time.monotonic() - began
        assert "keeps running after this session ends" in text_of(quiet), text_of(quiet)
        assert waited < QUIET_WAIT + 2  # generous: the answer follows the 3 s wait
        sim.script_interaction(agent, statuses=["in_progress"] * 10 + ["completed"])
        heard_of = await client.call_tool("start_research", {"model": "gdr", "query": "loud"},
                                          progress_callback=progress)
        assert json.loads(text_of(heard_of))["status"] == "completed"  # waited it out
        assert heard
