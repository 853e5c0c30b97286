"""Sequential research over the real thing: `python -m ask_another` on stdio, an `mcp.Client`,
the loopback simulator scripted per query (pipeline_script.py). One server process runs the
whole session (its start costs seconds, for litellm's import): the two contract tools, a
pipeline job end to end, and the cancel of a running pipeline job."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import trio
from pipeline_script import FAILURE, MODEL, REPAIR_MARK, SLOW, query_of, responder
from stdio_server import stdio_client_for
from tool_results import call, text_of

from ask_another.simulator import Simulator

pytestmark = pytest.mark.slow  # starts real server processes

KEY = "sk-test-SEQUENTIAL-5e6f7a"
MVT_RESULTS = json.loads((Path(__file__).parent / "mvt_raw_results.json").read_text())


async def test_sequential_session_over_stdio(sim: Simulator, tmp_path: Path):
    sim.script(MODEL, responder(sim.url))
    env = {
        "ASK_ANOTHER_HOME": str(tmp_path / "home"),
        "ASK_ANOTHER_POLL_SECONDS": "0.05",
        "ASK_ANOTHER_ALLOW_HOSTS": "127.0.0.1",
        # The pages stand in for the public web: a model may read them unasked.
        "ASK_ANOTHER_PERMISSIONS": "internal=allow,after_internal=allow",
        "MODEL_SIM": f"openai/{MODEL};{KEY};{sim.openai_base}",
    }
    with (tmp_path / "stderr.log").open("w") as stderr:
        async with stdio_client_for(env, stderr) as client:
            # 1. The contract tools: a plan, the minimum viable data compiled, a field error.
            result = await client.call_tool("sequential_research_plan", {
                "topic": "optical matrix multiplication", "depth": "shallow",
                "focus_areas": ["photonic tensor cores"]})
            assert not result.is_error, text_of(result)
            plan = json.loads(text_of(result))
            assert result.structured_content == plan
            assert plan["execution_order"] == [["q1"], ["q2", "q3", "q4"]]
            result = await client.call_tool("sequential_research_compile",
                                            {"plan": plan, "raw_results": MVT_RESULTS})
            report = json.loads(text_of(result))
            assert report["statistics"]["total_sources"] == 6
            assert report["statistics"]["queries_succeeded"] == 3
            error, text = await call(client, "sequential_research_compile", plan=plan,
                                     raw_results=[], citation_style="harvard")
            assert error and "citation_style" in text

            # 2. A pipeline job end to end: "auto" picks the pipeline for a non-research model.
            progress: list[str] = []

            async def on_progress(_done: float, _total: float | None, message: str | None
                                  ) -> None:
                progress.append(message or "")

            result = await client.call_tool(
                "start_research", {"model": "sim", "query": "photonic computing",
                                   "timeout": 60}, progress_callback=on_progress)
            assert not result.is_error, text_of(result)
            body = json.loads(text_of(result))
            assert body["status"] == "completed"
            job_report = body["report"]
            assert job_report.startswith("# Research Report: photonic computing")
            assert "## Types and Categories" in job_report and "## Comparison" not in job_report
            assert "### Warnings" in job_report
            assert "Query q3 failed and was skipped in the report" in job_report
            assert FAILURE in job_report
            assert "5 queries executed, 4 succeeded, 1 failed; 5 sources" in job_report
            urls = [c["url"] for c in body["citations"]]
            assert f"{sim.url}/sources/photonic-intro" in urls
            assert len(urls) == 5
            assert {"url": f"{sim.url}/sources/photonic-intro", "title": "Photonic intro",
                    "query": "What is photonic computing"} in body["citations"]
            kinds = [query_of(r)[1] for r in sim.requests_for(MODEL)]
            assert kinds.count("comparison") == 2  # the failing query, retried once
            repairs = [r for r in sim.requests_for(MODEL) if REPAIR_MARK in r.last_user_text]
            assert [query_of(r)[1] for r in repairs] == ["types"]
            assert any("phase 2/3" in m and "q4" in m for m in progress), progress

            # 3. Cancelling a running pipeline job stops its queries.
            error, text = await call(client, "start_research", model="sim", query="q",
                                     method="magic")
            assert error and "unknown research method 'magic'" in text and "sequential" in text
            error, text = await call(client, "start_research", model="sim",
                                     query="slow phase two of photonic computing", timeout=0,
                                     method="sequential")
            assert not error, text
            found = re.search(r"r-[0-9a-f]{10}", text)
            assert found is not None, text
            job_id = found.group(0)

            def phase_two_requests() -> int:
                return sum(1 for r in sim.requests_for(MODEL)
                           if "slow phase two" in query_of(r)[2]
                           and query_of(r)[1] in ("current_state", "comparison", "types"))

            with trio.fail_after(20):
                while phase_two_requests() < 3:  # noqa: ASYNC110 - the simulator's thread
                    await trio.sleep(0.05)
            error, text = await call(client, "check_research", job_id=job_id)
            assert "phase 2/3" in text, text
            before = len(sim.requests_for(MODEL))
            error, text = await call(client, "cancel_research", job_id=job_id)
            assert not error and "was cancelled" in text, text
            await trio.sleep(SLOW + 0.5)
            # The slow answers (tool calls) were never taken up: no second round, no phase 3.
            assert len(sim.requests_for(MODEL)) == before
            error, text = await call(client, "check_research", job_id=job_id)
            assert "is cancelled" in text
