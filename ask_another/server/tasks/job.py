"""A research job as a task, in the field names of each era: its status (the state table of
the package docstring and docs/server.md), its `Task`, its status notification and its result."""

from __future__ import annotations

import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Final

import mcp_types as types
from pydantic import SerializerFunctionWrapHandler, model_serializer

from ask_another.config import Config
from ask_another.errors import AskAnotherError
from ask_another.interaction.types import Question
from ask_another.research.methods import CONSENSUS_METHOD
from ask_another.server.tools.attached import waiting_text
from ask_another.server.tools.research import result_json
from ask_another.server.wording import tool_text
from ask_another.store.jobs import JobRecord

__all__ = [
    "RELATED_TASK",
    "TASKS_EXTENSION",
    "TASK_TOOLS",
    "status_notification",
    "task_fields",
    "task_status",
    "tool_result",
    "waiting_ids",
    "waiting_questions",
]


TASKS_EXTENSION: Final = "io.modelcontextprotocol/tasks"
RELATED_TASK: Final = "io.modelcontextprotocol/related-task"
TASK_TOOLS: Final = frozenset({"start_research", "consensus"})
"""The tools a client may run as a task: each one's task is the job it starts (a consensus's
is a job of method "consensus", research/methods/consensus.py)."""


def _iso(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def waiting_questions(record: JobRecord) -> list[Question]:
    return [] if record.finished else list(record.waiting_for)


def waiting_ids(record: JobRecord) -> tuple[str, ...]:
    """The tool calls whose questions `record` waits on: what tells one waiting from another."""
    return tuple(q.tool_call_id for q in waiting_questions(record))


def task_status(record: JobRecord, *, modern: bool) -> str:
    """The task status of a job (the table in the module docstring)."""
    if record.status == "completed" or (record.status == "failed" and modern):
        return "completed"
    if record.status in ("failed", "cancelled"):
        return record.status
    return "input_required" if waiting_questions(record) else "working"


def _status_message(record: JobRecord) -> str:
    waiting = waiting_questions(record)
    if waiting:
        return f"Waiting for {waiting_text(record.id, waiting)}."
    if record.status == "completed":
        return f"Completed in {record.elapsed(time.time()):.0f} s."
    if record.status == "failed":
        return f"Failed: {record.error or 'unknown error'}"
    if record.status == "cancelled":
        return "Cancelled; nothing more will happen."
    return record.step or ("Queued." if record.status == "pending" else "Starting.")


def task_fields(record: JobRecord, config: Config, *, modern: bool) -> dict[str, Any]:
    """The `Task` of a job, in the field names of its era (``ttl`` / ``ttlMs``, ...)."""
    updated = max(t for t in (record.created_at, record.started_at, record.ended_at)
                  if t is not None)
    # The spec counts a ttl from createdAt; ours counts from the job's end, so a working task
    # states none (it is never deleted while working: a client that dropped a task at its ttl
    # lost research still running) and an ended one its run plus ASK_ANOTHER_TASK_TTL.
    ttl = None if config.task_ttl is None or record.ended_at is None else round(
        (record.ended_at - record.created_at + config.task_ttl) * 1000)
    poll = round(config.task_poll * 1000)
    return {"taskId": record.id, "status": task_status(record, modern=modern),
            "statusMessage": _status_message(record), "createdAt": _iso(record.created_at),
            "lastUpdatedAt": _iso(updated),
            ("ttlMs" if modern else "ttl"): ttl, ("pollIntervalMs" if modern else "pollInterval"):
            poll}


class _StatusParams(types.TaskStatusNotificationParams):
    """The params of a notifications/tasks/status, keeping ``ttl`` when it is null: the SDK
    serialises a notification without its None fields, and the 2025-11-25 `Task` requires
    ``ttl`` (``number | null``), so every client on the Python SDK 1.x refused each one."""

    @model_serializer(mode="wrap")
    def _with_ttl(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        data.setdefault("ttl", self.ttl)
        return data


class _StatusNotification(types.TaskStatusNotification):
    params: _StatusParams


def status_notification(task: Mapping[str, Any]) -> types.TaskStatusNotification:
    """The notifications/tasks/status of a 2025-11-25 `Task` (`task_fields(..., modern=False)`),
    every field the revision requires on the wire."""
    return _StatusNotification(params=_StatusParams.model_validate(task, by_name=False))


def tool_result(record: JobRecord) -> dict[str, Any]:
    """The tools/call result of a finished job, as its tool gives it: for start_research the
    report JSON check_research shows, for a consensus the consensus tool's answer; a tool error
    for a failure, a line for a cancel."""
    what = "Consensus" if record.method == CONSENSUS_METHOD else "Research job"
    if record.status == "completed" and record.method == CONSENSUS_METHOD:
        text, is_error = record.report or "", False
    elif record.status == "completed":
        text, is_error = result_json(record), False
    elif record.status == "failed":
        text = tool_text(AskAnotherError(f"{what} {record.id} failed: {record.error}"))
        is_error = True
    else:
        text, is_error = f"{what} {record.id} was cancelled before it finished.", False
    return {"content": [{"type": "text", "text": text}], "isError": is_error}
