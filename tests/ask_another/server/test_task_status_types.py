"""notifications/tasks/status as both Python SDK generations read it.

The 2025-11-25 `Task` requires ``ttl`` (``number | null``); mcp 2.x drops a None field when it
serialises a notification, so with the default ASK_ANOTHER_TASK_TTL (unset: null) every status
notification went out without it, and a client on the Python SDK 1.x (mcp 1.30, fastmcp 3)
refused each one (about 38 a run) and fell back to polling. Here a real stdio server's status
notifications, both kinds (the session's watch and a blocked tasks/result's stream, through
working, input_required and completed), are validated against mcp 2.3's types in this process
and mcp 1.x's in a throwaway environment (tests/support/throwaway_env.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
import trio
from loopback_pages import Page, PageServer
from raw_stdio import allowing, raw_stdio, raw_until
from stdio_server import REPO
from throwaway_env import throwaway_python

from ask_another.simulator import Reply, Simulator, ToolCall, ToolCalls

pytestmark = pytest.mark.slow  # builds an environment, starts a server process

SDK1 = "mcp==1.30.0"
GEMINI = "gemini/deep-research-pro-preview-12-2025"
FAKE_KEY = "sk-test-STATUS-TYPES-8a1f"
ARTICLE = ("<html><body><article><h1>Tides</h1><p>" + "The moon pulls the sea. " * 40
           + "</p></article></body></html>").encode()


@pytest.fixture(scope="module")
def sdk1_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return throwaway_python(tmp_path_factory, "mcp1", SDK1)


async def test_status_notifications_pass_both_sdk_generations(
        sdk1_python: Path, sim: Simulator, tmp_path: Path, nursery: trio.Nursery):
    pages = await PageServer().start(nursery)
    url = pages.add("/tides", Page(ARTICLE))
    sim.script_interaction(GEMINI.split("/", 1)[1], statuses=["in_progress"] * 4 + ["completed"])
    sim.script("m1", [ToolCalls([ToolCall("read_article", {"url": url}, id="call-t")]),
                      Reply("The report.")])
    env = {"ASK_ANOTHER_HOME": str(tmp_path / "home"), "ASK_ANOTHER_POLL_SECONDS": "0.05",
           "ASK_ANOTHER_CONFIRM_USD": "1000", "ASK_ANOTHER_PERMISSIONS": "read=ask",
           "ASK_ANOTHER_ALLOW_HOSTS": "127.0.0.1",  # ASK_ANOTHER_TASK_TTL unset: ttl null
           "MODEL_GDR": f"{GEMINI};{FAKE_KEY};{sim.url}",
           "MODEL_SIM": f"openai/m1;{FAKE_KEY};{sim.url}/v1"}
    asked: list[dict[str, Any]] = []
    with (tmp_path / "stderr.log").open("w") as stderr:
        async with raw_stdio(env, stderr, capabilities={"elicitation": {}},
                             on_request=allowing(asked)) as rpc:
            research = (await rpc.request("tools/call", {
                "name": "start_research", "task": {},
                "arguments": {"model": "gdr", "query": "tides"}}))["task"]["taskId"]
            assert (await raw_until(rpc, research, "completed"))["ttl"] is None
            agent = (await rpc.request("tools/call", {
                "name": "start_research", "task": {},
                "arguments": {"model": "sim", "query": "tides?", "method": "agent"}}
                                       ))["task"]["taskId"]
            await raw_until(rpc, agent, "input_required")
            await rpc.request("tasks/result", {"taskId": agent})  # asks, then the report
            with trio.fail_after(30):  # the watch's own notification of the end
                await rpc.notified("notifications/tasks/status", taskId=research,
                                   status="completed")
                await rpc.notified("notifications/tasks/status", taskId=agent,
                                   status="completed")
    statuses = [n for n in rpc.notifications if n["method"] == "notifications/tasks/status"]
    assert {n["params"]["status"] for n in statuses} >= {"input_required", "completed"}
    assert len(asked) == 1
    for notification in statuses:  # mcp 2.3, in this process
        assert "ttl" in notification["params"], notification
        types.TaskStatusNotification.model_validate(
            {k: v for k, v in notification.items() if k != "jsonrpc"}, by_name=False)
    lines = tmp_path / "notifications.jsonl"
    lines.write_text("".join(json.dumps(n) + "\n" for n in rpc.notifications))
    ran = await trio.run_process(
        [str(sdk1_python), str(REPO / "tests" / "clients" / "sdk1_notifications.py"),
         str(lines)], capture_stdout=True, capture_stderr=True, check=False)
    assert ran.returncode == 0, ran.stderr.decode()[-4000:]
    seen = json.loads(ran.stdout.decode().strip().splitlines()[-1])
    assert seen["refused"] == [], seen["refused"]
    assert seen["parsed"].count("TaskStatusNotification") == len(statuses)
