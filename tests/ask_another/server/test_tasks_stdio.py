"""MCP Tasks over research jobs through a real `python -m ask_another` on stdio, in both eras:
2025-11-25 with a raw JSON-RPC client (the SDK's Python client refuses a task as a tools/call
result), 2026-07-28 with an `mcp.Client` declaring the tasks extension (tests/support/
tasks_client.py). The provider is the loopback simulator; a local page server stands in for an
article whose read needs a person's permission (ASK_ANOTHER_PERMISSIONS=read=ask).

Each test starts real server processes (seconds each), so each runs a session of scenarios.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio
from loopback_pages import Page, PageServer
from mcp.shared.exceptions import MCPError
from raw_stdio import RpcError, allowing, raw_stdio, raw_until
from stdio_server import stdio_client_for
from tasks_client import (
    TASKS_EXTENSION,
    TaskHandle,
    TasksClient,
    create_task,
    request,
    tasks_get,
    until,
)
from tool_results import call

from ask_another.console_link import publish_console
from ask_another.simulator import Reply, Simulator, ToolCall, ToolCalls

pytestmark = pytest.mark.slow  # starts real server processes

GEMINI = "gemini/deep-research-pro-preview-12-2025"
GEMINI_AGENT = GEMINI.split("/", 1)[1]
FAKE_KEY = "sk-test-TASKS-5e4d3c"
ARTICLE = ("<html><body><article><h1>Tides</h1><p>" + "The moon pulls the sea. " * 40
           + "</p></article></body></html>").encode()


def server_env(sim: Simulator, home: Path) -> dict[str, str]:
    return {"ASK_ANOTHER_HOME": str(home), "ASK_ANOTHER_POLL_SECONDS": "0.05",
            "ASK_ANOTHER_CONFIRM_USD": "1000", "ASK_ANOTHER_LEASE_SECONDS": "3",
            "ASK_ANOTHER_PERMISSIONS": "read=ask", "ASK_ANOTHER_ALLOW_HOSTS": "127.0.0.1",
            "ASK_ANOTHER_TASK_TTL": "3600", "ASK_ANOTHER_TASK_POLL_SECONDS": "2",
            "MODEL_GDR": f"{GEMINI};{FAKE_KEY};{sim.url}",
            "MODEL_SIM": f"openai/m1;{FAKE_KEY};{sim.url}/v1"}


def read_then_report(url: str, report: str) -> list[Any]:
    return [ToolCalls([ToolCall("read_article", {"url": url}, id="call-a")]), Reply(report)]


async def provider_has(sim: Simulator, query: str) -> None:
    """Until the job polls its interaction at the simulated provider: it knows the
    interaction's id then, so a cancel reaches it."""
    with trio.fail_after(30):
        while True:
            if [i for i in sim.interactions.values() if i.input_text == query and i.polls]:
                return
            await trio.sleep(0.05)


async def test_2025_tasks_over_stdio(sim: Simulator, tmp_path: Path, nursery: trio.Nursery):
    pages = await PageServer().start(nursery)
    asked: list[dict[str, Any]] = []

    env = server_env(sim, tmp_path / "home")
    with (tmp_path / "stderr.log").open("w") as stderr:
        async with raw_stdio(env, stderr, capabilities={"elicitation": {}},
                             on_request=allowing(asked)) as rpc:

            async def check_research(job_id: str) -> str:
                result = await rpc.request("tools/call", {"name": "check_research",
                                                          "arguments": {"job_id": job_id}})
                return str(result["content"][0]["text"])

            # What VS Code needs to see before it sends a task: the capability and the tool.
            assert rpc.initialize_result["capabilities"]["tasks"] == {
                "list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
            tools = {t["name"]: t for t in (await rpc.request("tools/list"))["tools"]}
            assert tools["start_research"]["execution"] == {"taskSupport": "optional"}
            assert "execution" not in tools["check_research"]

            # 1. A task-augmented call is answered with the task at once; polled to completed,
            #    its result is the report check_research shows.
            sim.script_interaction(GEMINI_AGENT, statuses=["in_progress"] * 4 + ["completed"])
            created = await rpc.request("tools/call", {
                "name": "start_research", "arguments": {"model": "gdr", "query": "tides"},
                "task": {"ttl": 60000}})
            task = created["task"]
            assert task["status"] == "working" and task["taskId"].startswith("r-")
            # Working: no ttl (it counts from the job's end).
            assert task["ttl"] is None and task["pollInterval"] == 2000
            assert task["createdAt"].endswith("Z") and "content" not in created
            job_id = task["taskId"]
            assert rpc.initialize_result["capabilities"]["resources"]["subscribe"] is True
            await rpc.request("resources/subscribe", {"uri": f"research://{job_id}"})
            done = await raw_until(rpc, job_id, "completed", "failed")
            assert done["status"] == "completed", done
            # The session that created the task was told its status, unasked (the store is
            # read every second).
            with trio.fail_after(10):
                await rpc.notified("notifications/tasks/status", taskId=job_id,
                                   status="completed")
            result = await rpc.request("tasks/result", {"taskId": job_id})
            assert result["_meta"]["io.modelcontextprotocol/related-task"] == {"taskId": job_id}
            assert result["isError"] is False
            assert result["content"][0]["text"] == await check_research(job_id)
            assert json.loads(result["content"][0]["text"])["report"].startswith(
                "# [simulated deep-research")
            # Its resource's update was pushed (the store is read every second).
            with trio.fail_after(10):
                await rpc.notified("notifications/resources/updated",
                                   uri=f"research://{job_id}")
            with pytest.raises(RpcError) as unknown_job:
                await rpc.request("resources/subscribe", {"uri": "research://r-0000000000"})
            assert unknown_job.value.code == -32602
            listed = (await rpc.request("tasks/list"))["tasks"]
            assert [t["status"] for t in listed if t["taskId"] == job_id] == ["completed"]

            # 2. Without `task`, start_research answers as it always did: the report itself.
            plain = await rpc.request("tools/call", {
                "name": "start_research", "arguments": {"model": "gdr", "query": "plain"}})
            assert "task" not in plain and plain["isError"] is False
            assert json.loads(plain["content"][0]["text"])["status"] == "completed"

            # 3. A read that needs approval: input_required, then asked through tasks/result
            #    (an elicitation tied to the task), answered, and the report comes back.
            url = pages.add("/tides", Page(ARTICLE))
            sim.script("m1", read_then_report(url, "The report: the moon pulls the sea."))
            created = await rpc.request("tools/call", {
                "name": "start_research", "task": {},
                "arguments": {"model": "sim", "query": "tides?", "method": "agent"}})
            agent_job = created["task"]["taskId"]
            waiting = await raw_until(rpc, agent_job, "input_required", "completed", "failed")
            assert waiting["status"] == "input_required", waiting
            assert "read_article" in waiting["statusMessage"]
            assert not [r for r in pages.requests if r.target == "/tides"]  # not read yet
            rpc.notifications.clear()
            result = await rpc.request("tasks/result", {"taskId": agent_job})
            assert json.loads(result["content"][0]["text"])["report"] == \
                "The report: the moon pulls the sea."
            assert len(asked) == 1 and asked[0]["method"] == "elicitation/create"
            assert asked[0]["_meta"]["io.modelcontextprotocol/related-task"] == {
                "taskId": agent_job}
            assert "read_article" in asked[0]["message"] and "call-a" in asked[0]["message"]
            assert [r.target for r in pages.requests] == ["/tides"]
            statuses = [n["params"]["status"] for n in rpc.notifications
                        if n["method"] == "notifications/tasks/status"]
            assert statuses[0] == "input_required" and statuses[-1] == "completed", statuses

            # 4. tasks/cancel reaches the provider; a second cancel is refused, as the spec says.
            sim.script_interaction(GEMINI_AGENT, statuses=["in_progress"])
            created = await rpc.request("tools/call", {
                "name": "start_research", "task": {},
                "arguments": {"model": "gdr", "query": "forever"}})
            forever = created["task"]["taskId"]
            await provider_has(sim, "forever")
            cancelled = await rpc.request("tasks/cancel", {"taskId": forever})
            assert cancelled["status"] == "cancelled" and cancelled["taskId"] == forever
            remote = [i for i in sim.interactions.values() if i.input_text == "forever"]
            assert remote[0].cancel_called and remote[0].status == "cancelled"
            with pytest.raises(RpcError) as again:
                await rpc.request("tasks/cancel", {"taskId": forever})
            assert again.value.code == -32602 and "already ended (cancelled)" in again.value.message
            result = await rpc.request("tasks/result", {"taskId": forever})
            assert "was cancelled" in result["content"][0]["text"]

            # 5. An unknown id, a tool that is no task: one line each, the session goes on.
            with pytest.raises(RpcError) as unknown:
                await rpc.request("tasks/get", {"taskId": "r-0000000000"})
            assert unknown.value.code == -32602 and "No research job has the id" in \
                unknown.value.message
            with pytest.raises(RpcError) as no_task:
                await rpc.request("tools/call", {"name": "list_models", "arguments": {},
                                                 "task": {}})
            assert no_task.value.code == -32601 and "does not run as a task" in \
                no_task.value.message
    assert FAKE_KEY not in (tmp_path / "stderr.log").read_text()


async def test_2026_tasks_over_stdio_survive_a_restart(sim: Simulator, tmp_path: Path,
                                                      nursery: trio.Nursery):
    pages = await PageServer().start(nursery)
    env = server_env(sim, tmp_path / "home")
    with (tmp_path / "stderr.log").open("w") as stderr:
        async with stdio_client_for(env, stderr, extensions=[TasksClient()]) as client:
            assert client.protocol_version == "2026-07-28"
            assert TASKS_EXTENSION in (client.server_capabilities.extensions or {})

            # 1. The task at once, polled to completed with the report inline.
            sim.script_interaction(GEMINI_AGENT, statuses=["in_progress"] * 4 + ["completed"])
            handle = await create_task(client, "start_research", {"model": "gdr",
                                                                  "query": "tides"})
            assert isinstance(handle, TaskHandle) and handle.status == "working"
            extra = handle.model_extra or {}
            assert extra["ttlMs"] is None and extra["pollIntervalMs"] == 2000
            job_id = handle.task_id
            heard: list[Any] = []
            async with client.listen(resource_subscriptions=[f"research://{job_id}"]) as sub:
                done = await until(client, job_id, "completed")
                with trio.fail_after(10):  # the update, pushed on the listen stream
                    async for event in sub:
                        heard.append(event)
                        if getattr(event, "uri", None) == f"research://{job_id}":
                            break
            assert done["resultType"] == "complete" and done["result"]["isError"] is False
            error, shown = await call(client, "check_research", job_id=job_id)
            assert not error and done["result"]["content"][0]["text"] == shown

            # 2. Input required: the form in inputRequests, answered by tasks/update. An
            # `ask-another console` runs on the home (this process stands in for it: the
            # file it writes while it runs), so the form links the request's page there.
            url = pages.add("/tides", Page(ARTICLE))
            sim.script("m1", read_then_report(url, "The report: the moon pulls the sea."))
            with publish_console(tmp_path / "home", "http://127.0.0.1:9/console"):
                handle = await create_task(client, "start_research", {
                    "model": "sim", "query": "tides?", "method": "agent"})
                assert isinstance(handle, TaskHandle)
                agent_job = handle.task_id
                waiting = await until(client, agent_job, "input_required", "completed")
            assert waiting["status"] == "input_required", waiting
            (key, asked), = waiting["inputRequests"].items()
            assert key == "permission:call-a" and asked["method"] == "elicitation/create"
            form = asked["params"]
            assert form["mode"] == "form" and "read_article" in form["message"]
            assert form["message"].endswith("Or answer it at http://127.0.0.1:9/console"
                                            f"/approvals/{agent_job}/call-a"), form["message"]
            assert form["requestedSchema"]["properties"]["decision"]["enum"] == ["allow", "deny"]
            assert not [r for r in pages.requests if r.target == "/tides"]
            ack = await request(client, "tasks/update", {"taskId": agent_job, "inputResponses": {
                key: {"action": "accept", "content": {"decision": "allow"}},
                "permission:never-asked": {"action": "accept", "content": {}}}})
            assert ack["resultType"] == "complete"
            done = await until(client, agent_job, "completed")
            assert json.loads(done["result"]["content"][0]["text"])["report"] == \
                "The report: the moon pulls the sea."
            assert [r.target for r in pages.requests] == ["/tides"]

            # 3. tasks/cancel reaches the provider.
            sim.script_interaction(GEMINI_AGENT, statuses=["in_progress"])
            handle = await create_task(client, "start_research", {"model": "gdr",
                                                                  "query": "forever"})
            assert isinstance(handle, TaskHandle)
            await provider_has(sim, "forever")
            assert (await request(client, "tasks/cancel", {"taskId": handle.task_id}))[
                "resultType"] == "complete"
            assert (await tasks_get(client, handle.task_id))["status"] == "cancelled"
            remote = [i for i in sim.interactions.values() if i.input_text == "forever"]
            assert remote[0].cancel_called

        # 4. Another server process on the same home (a restart) reads the same task; a client
        #    that does not declare the extension gets today's result, and no task methods.
        async with stdio_client_for(env, stderr, extensions=[TasksClient()]) as client:
            again = await tasks_get(client, job_id)
            assert again["status"] == "completed"
            assert again["result"]["content"][0]["text"] == shown
        async with stdio_client_for(env, stderr) as plain:
            # (A timeout of its own: without progress the default wait is 3 s, QUIET_WAIT.)
            result = await plain.call_tool("start_research", {"model": "gdr", "query": "plain",
                                                              "timeout": 60})
            assert not result.is_error
            assert json.loads(result.content[0].text)["status"] == "completed"  # type: ignore[union-attr]
            with pytest.raises(MCPError) as refused:
                await tasks_get(plain, job_id)
            assert refused.value.error.code == -32021
    assert FAKE_KEY not in (tmp_path / "stderr.log").read_text()
