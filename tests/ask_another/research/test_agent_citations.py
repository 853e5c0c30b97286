"""An agent job's sources: the articles its turn read become citations (titled from the search
that found them), and its usage counts every model call and search."""

from __future__ import annotations

from pathlib import Path

from ask_another.config import Config
from ask_another.runtime import open_runtime
from ask_another.simulator import Reply, Simulator, ToolCall, ToolCalls

QUESTION = "How are tides predicted"


async def test_an_agent_job_cites_what_it_read(sim: Simulator, tmp_path: Path) -> None:
    page = f"{sim.url}/sources/search/how-are-tides-predicted/2"
    sim.script("m1", [
        ToolCalls([ToolCall("search_web", {"query": QUESTION})]),
        ToolCalls([ToolCall("read_article", {"url": page}),
                   ToolCall("read_article", {"url": "http://127.0.0.1:9/nothing-here"})]),
        Reply("Tides are predicted from harmonic constituents."),
    ])
    config = Config.from_env({
        "ASK_ANOTHER_HOME": str(tmp_path), "ASK_ANOTHER_GATEWAY_PROCESS": "0",
        "MODEL_SIM": f"openai/m1;k;{sim.openai_base}", "SEARCH_SIM": f"tavily;k;{sim.url}",
        "ASK_ANOTHER_ALLOW_HOSTS": "127.0.0.1",
        "ASK_ANOTHER_PERMISSIONS": "read=allow,internal=allow,after_internal=allow",
    })
    async with open_runtime(config, prewarm_after=0) as runtime:
        job = await runtime.jobs.start("sim", QUESTION, "agent")
        final = await runtime.jobs.wait(job.id, 60)
    assert final.status == "completed", final.error
    # The page read is cited with the title its search result had; the failed read is not.
    assert final.citations == [{"url": page, "title": f"Simulated source 2 on {QUESTION}"}]
    usage = final.detail["usage"]
    assert (usage["provider_calls"], usage["searches"]) == (4, 1)
    assert usage["cost_usd"] == 0.008 and usage["unpriced_calls"] == 3
