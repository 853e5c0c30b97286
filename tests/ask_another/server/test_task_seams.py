"""The MCP Tasks adapter (server/tasks/): the state table, and the provisional SDK parts it
stands on, checked so an SDK upgrade that moves one fails here by name rather than as a task
that quietly stops being served."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest
import trio
from deadlines import generous
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp.types import ElicitResult
from tasks_client import TaskHandle, TasksClient, create_task, request

from ask_another.config import Config
from ask_another.interaction.types import PermissionRequest, Question
from ask_another.server import build_server
from ask_another.server.tasks import legacy, open_questions, seam_problems, task_fields, task_status
from ask_another.simulator import Simulator
from ask_another.store.jobs import JobRecord

GEMINI = "gemini/deep-research-pro-preview-12-2025"

WAITING = Question(kind="permission", tool_call_id="call-a", expires_at=1_796_083_200.0,
                   request=PermissionRequest(tool_call_id="call-a", tool="read_article",
                                             server="ask-another", class_="read",
                                             arguments={"url": "http://x/"}))


def job(status: str, waiting_for: list[Question] | None = None, **detail: Any) -> JobRecord:
    now = time.time()
    return JobRecord(id="r-0123456789", model="m", query="q", status=status,  # type: ignore[arg-type]
                     created_at=now - 5, started_at=now - 4, step="reading 3 sources",
                     ended_at=now if status in ("completed", "failed", "cancelled") else None,
                     error="the provider said no" if status == "failed" else None,
                     detail=detail, waiting_for=waiting_for or [])


def test_the_sdk_seams_hold():
    assert seam_problems() == [], "provisional MCP SDK seams moved: " + "; ".join(seam_problems())


@pytest.mark.parametrize(("status", "waiting", "legacy", "modern"), [
    ("pending", [], "working", "working"),
    ("in_progress", [], "working", "working"),
    ("in_progress", [WAITING], "input_required", "input_required"),
    ("completed", [], "completed", "completed"),
    # 2025-11-25 counts an isError tool result as failed; 2026-07-28 keeps failed for JSON-RPC
    # errors, so the job's failure is a completed task with an isError result there.
    ("failed", [], "failed", "completed"),
    ("cancelled", [], "cancelled", "cancelled"),
])
def test_job_states_map_onto_task_states(status: str, waiting: list[Question], legacy: str,
                                         modern: str):
    record = job(status, waiting)
    assert task_status(record, modern=False) == legacy
    assert task_status(record, modern=True) == modern


@pytest.mark.parametrize("modern", [True, False])
def test_a_tasks_ttl_counts_from_the_jobs_end_never_while_it_works(
        make_config: Callable[..., Config], modern: bool):
    """A client may delete a task once its ttl (counted from createdAt) has passed: a working
    task states none, so a long job is never dropped while it runs; an ended one states its run
    plus ASK_ANOTHER_TASK_TTL (before, a 60 s ttl let a client drop a job still running)."""
    config = make_config(ASK_ANOTHER_TASK_TTL="60")
    field = "ttlMs" if modern else "ttl"
    for status in ("pending", "in_progress"):
        assert task_fields(job(status), config, modern=modern)[field] is None
    ended = job("completed")
    assert ended.ended_at is not None
    assert task_fields(ended, config, modern=modern)[field] == round(
        (ended.ended_at - ended.created_at + 60) * 1000)


def test_a_task_says_the_live_step_and_what_it_waits_for(make_config: Callable[..., Config]):
    config = make_config(ASK_ANOTHER_TASK_TTL="60", ASK_ANOTHER_TASK_POLL_SECONDS="0.5")
    running = task_fields(job("in_progress"), config, modern=True)
    assert running["statusMessage"] == "reading 3 sources"
    assert running["ttlMs"] is None and running["pollIntervalMs"] == 500
    legacy = task_fields(job("in_progress"), make_config(), modern=False)
    assert legacy["ttl"] is None and legacy["pollInterval"] == 5000  # unlimited: jobs are kept
    waiting = job("in_progress", waiting_for=[WAITING])
    assert "read_article" in task_fields(waiting, config, modern=True)["statusMessage"]
    (asked,) = open_questions(waiting)
    assert asked.key == "permission:call-a"
    assert asked.schema["properties"]["decision"]["enum"] == ["allow", "deny"]
    assert open_questions(job("completed", waiting_for=[WAITING])) == []


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_the_wiring_reaches_the_wire_in_memory(make_config: Callable[..., Config],
                                                     mode: str):
    # The middleware (2025-11-25) and the extension (2026-07-28) are what the SDK calls: if an
    # upgrade stops calling either, this fails before any real-server test does.
    server = build_server(make_config(), prewarm_after=None)
    async with Client(server, mode=mode, extensions=[TasksClient()]) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        if mode == "legacy":
            caps = client.server_capabilities.tasks
            assert caps is not None and caps.requests is not None, "Server.middleware seam"
            assert tools["start_research"].execution is not None
            assert tools["start_research"].execution.task_support == "optional"
        else:
            assert "io.modelcontextprotocol/tasks" in (client.server_capabilities.extensions
                                                      or {}), "Extension seam"
            assert tools["start_research"].execution is None
            handle = await create_task(client, "start_research",
                                       {"model": "sim", "query": "q", "method": "nonsense"})
            # Refused before a task exists: the tool's own one-line error.
            assert not isinstance(handle, TaskHandle) and handle.is_error
            assert "unknown research method 'nonsense'" in handle.content[0].text  # type: ignore[union-attr]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_spend_to_confirm_is_input_required_and_answered(
        make_config: Callable[..., Config], sim: Simulator, mode: str):
    # A job whose estimate is above ASK_ANOTHER_CONFIRM_USD waits for a person before it
    # spends anything: its task is input_required until the confirmation is answered.
    config = make_config(MODEL_GDR=f"{GEMINI};sk-test-k;{sim.url}",
                         ASK_ANOTHER_CONFIRM_USD="0.0001", ASK_ANOTHER_POLL_SECONDS="0.05")
    sim.script_interaction(GEMINI.split("/", 1)[1], statuses=["in_progress", "completed"])
    arguments = {"model": "gdr", "query": "tides"}
    server = build_server(config, prewarm_after=None)
    answered: list[str] = []

    async def on_elicit(_ctx: Any, params: Any) -> ElicitResult:
        answered.append(params.message)
        return ElicitResult(action="accept", content={"decision": "allow"})

    async with Client(server, mode=mode, extensions=[TasksClient()],
                      elicitation_callback=on_elicit) as client:
        if mode == "legacy":
            created = await client.session._dispatcher.send_raw_request(  # a task, unparsed
                "tools/call", {"name": "start_research", "arguments": arguments, "task": {}},
                {})
            task_id = created["task"]["taskId"]
            waiting = await _until(client, task_id, "input_required")
            result = await request(client, "tasks/result", {"taskId": task_id})
            body = json.loads(result["content"][0]["text"])
            assert body["status"] == "completed"
            assert len(answered) == 1 and "confirm-spend" in answered[0]  # its tool call
        else:
            handle = await create_task(client, "start_research", arguments)
            assert isinstance(handle, TaskHandle)
            task_id = handle.task_id
            waiting = await _until(client, task_id, "input_required")
            (key,) = waiting["inputRequests"]
            assert key.endswith(":confirm-spend")
            assert not sim.interactions  # nothing spent before the answer
            await request(client, "tasks/update", {"taskId": task_id, "inputResponses": {
                key: {"action": "accept", "content": {"decision": "allow"}}}})
            done = await _until(client, task_id, "completed")
            body = json.loads(done["result"]["content"][0]["text"])
            assert body["status"] == "completed"
        assert "confirm" in waiting["statusMessage"] and "deny" in waiting["statusMessage"]
        assert len(sim.interactions) == 1
        # The answer is audited as the task's (it was not: only the console's and the MCP
        # tools' were).
        checked = await client.call_tool("check_research", {"job_id": body["job_id"]})
        answers = json.loads(checked.content[0].text)["answers"]  # type: ignore[union-attr]
        assert [(a["face"], a["tool_call_id"], a["tool"], a["answer"]) for a in answers] == [
            ("task", "confirm-spend", "confirm_spend", "allow")]


async def _until(client: Client, task_id: str, status: str) -> dict[str, Any]:
    with trio.fail_after(generous(30)):  # the job's first call waits for litellm's import
        while True:
            task = await request(client, "tasks/get", {"taskId": task_id})
            if task["status"] == status:
                return task
            await trio.sleep(0.02)


async def test_tasks_list_is_paged_with_a_cursor(make_config: Callable[..., Config], sim: Simulator,
                                                monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(legacy, "LIST_PAGE", 2)
    config = make_config(MODEL_GDR=f"{GEMINI};sk-test-k;{sim.url}",
                         ASK_ANOTHER_POLL_SECONDS="0.05")
    async with Client(build_server(config, prewarm_after=None), mode="legacy") as client:
        made = []
        for n in range(5):
            created = await client.session._dispatcher.send_raw_request(
                "tools/call", {"name": "start_research", "task": {},
                               "arguments": {"model": "gdr", "query": f"q{n}"}}, {})
            made.append(created["task"]["taskId"])
        seen: list[str] = []
        cursor = None
        for _ in range(5):
            page = await request(client, "tasks/list", {"cursor": cursor} if cursor else {})
            assert len(page["tasks"]) <= 2
            seen += [t["taskId"] for t in page["tasks"]]
            cursor = page.get("nextCursor")
            if cursor is None:
                break
        assert seen == made[::-1]  # newest first, each once
        with pytest.raises(MCPError) as refused:
            await request(client, "tasks/list", {"cursor": "not-ours"})
        assert refused.value.error.code == -32602
