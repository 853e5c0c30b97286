"""The MCP Tasks adapter (server/tasks.py): the state table, and the provisional SDK parts it
stands on, checked so an SDK upgrade that moves one fails here by name rather than as a task
that quietly stops being served."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from mcp import Client
from tasks_client import TaskHandle, TasksClient, create_task

from ask_another.config import Config
from ask_another.server import build_server
from ask_another.server.tasks import open_questions, seam_problems, task_fields, task_status
from ask_another.store.jobs import JobRecord

WAITING = {"kind": "permission", "tool_call_id": "call-a", "tool": "read_article",
           "server": "ask-another", "class": "read", "arguments": {"url": "http://x/"},
           "expires_at": "2026-12-01 00:00:00 UTC"}


def job(status: str, **detail: Any) -> JobRecord:
    now = time.time()
    return JobRecord(id="r-0123456789", model="m", query="q", status=status,  # type: ignore[arg-type]
                     created_at=now - 5, started_at=now - 4, step="reading 3 sources",
                     ended_at=now if status in ("completed", "failed", "cancelled") else None,
                     error="the provider said no" if status == "failed" else None,
                     detail=detail)


def test_the_sdk_seams_hold():
    assert seam_problems() == [], "provisional MCP SDK seams moved: " + "; ".join(seam_problems())


@pytest.mark.parametrize(("status", "detail", "legacy", "modern"), [
    ("pending", {}, "working", "working"),
    ("in_progress", {}, "working", "working"),
    ("in_progress", {"waiting_for": [WAITING]}, "input_required", "input_required"),
    ("completed", {}, "completed", "completed"),
    # 2025-11-25 counts an isError tool result as failed; 2026-07-28 keeps failed for JSON-RPC
    # errors, so the job's failure is a completed task with an isError result there.
    ("failed", {}, "failed", "completed"),
    ("cancelled", {}, "cancelled", "cancelled"),
])
def test_job_states_map_onto_task_states(status: str, detail: dict[str, Any], legacy: str,
                                         modern: str):
    record = job(status, **detail)
    assert task_status(record, modern=False) == legacy
    assert task_status(record, modern=True) == modern


def test_a_task_says_the_live_step_and_what_it_waits_for(make_config: Callable[..., Config]):
    config = make_config(ASK_ANOTHER_TASK_TTL="60", ASK_ANOTHER_TASK_POLL_SECONDS="0.5")
    running = task_fields(job("in_progress"), config, modern=True)
    assert running["statusMessage"] == "reading 3 sources"
    assert running["ttlMs"] == 60_000 and running["pollIntervalMs"] == 500
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
