"""An answer given with the MCP tool answer_permission is audited (store/answers.py) and shown
by check_research: who answered what, where and when (in the completed job's JSON as
`answers`, so clients that parse it still can)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable

import trio
from deadlines import generous
from mcp import Client
from tool_results import call

from ask_another.config import Config
from ask_another.server import build_server
from ask_another.simulator import Reply, Simulator, ToolCall, ToolCalls


async def test_check_research_shows_who_answered_a_permission_and_how(
    sim: Simulator, make_config: Callable[..., Config]
):
    config = make_config(ASK_ANOTHER_PERMISSIONS="read=ask", ASK_ANOTHER_CONFIRM_USD="1000")
    sim.script("m1", [ToolCalls([ToolCall("read_article", {"url": "http://127.0.0.1:9/x"},
                                          id="call-1")]), Reply("done without it")])
    async with Client(build_server(config)) as client:
        error, text = await call(client, "start_research", model="sim", query="q",
                                 method="agent", timeout=0)
        found = re.search(r"\br-[0-9a-f]{10}\b", text)
        assert not error and found, text
        job = found.group(0)
        with trio.fail_after(generous(30)):
            while "call-1" not in text:  # the job's first model call
                await trio.sleep(0.05)
                _, text = await call(client, "check_research", job_id=job)
        assert "Answers given" not in text
        error, said = await call(client, "answer_permission", job_id=job,
                                 tool_call_id="call-1", decision="deny")
        assert not error and "denied" in said, said
        with trio.fail_after(generous(30)):
            while "completed" not in text:
                await trio.sleep(0.05)
                _, text = await call(client, "check_research", job_id=job)
    (answer,) = json.loads(text)["answers"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", answer["at"]), answer
    assert {k: answer[k] for k in ("who", "face", "tool_call_id", "tool", "answer")} == {
        "who": "the local user", "face": "mcp", "tool_call_id": "call-1",
        "tool": "read_article", "answer": "deny"}
