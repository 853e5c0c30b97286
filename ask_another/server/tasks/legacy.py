"""Tasks for 2025-11-25 sessions (VS Code's agent mode): `LegacyTasks`, a server middleware
that adds the capability, stamps `execution.taskSupport` on the long tools, answers a
task-augmented tools/call at once and serves tasks/get, tasks/result, tasks/list and
tasks/cancel."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import mcp_types as types
import trio
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ask_another.logs import get_logger
from ask_another.research import JobUpdate, ResearchJobs
from ask_another.runtime import Runtime
from ask_another.server.channel import CHANNEL_CAPABILITY
from ask_another.server.context import user_of
from ask_another.server.events import EVENTS_EXTENSION
from ask_another.server.lifespan import ServerState
from ask_another.server.tasks.job import (
    RELATED_TASK,
    TASK_TOOLS,
    status_notification,
    task_fields,
    tool_result,
    waiting_ids,
)
from ask_another.server.tasks.questions import Claims, answer, elicitation, open_questions
from ask_another.server.tasks.requests import (
    console_root,
    immediate_text,
    refused,
    request_runtime,
    start_job,
    task_id_of,
)
from ask_another.server.tasks.updates import Creator, JobUpdates
from ask_another.store.jobs import JobRecord

__all__ = ["LegacyTasks"]


log = get_logger("ask_another.server.tasks")

IMMEDIATE_RESPONSE: Final = "io.modelcontextprotocol/model-immediate-response"
LOOK_AGAIN: Final = 5.0
"""Seconds a blocked tasks/result waits on the job before it looks at the store again."""
LIST_PAGE: Final = 100
"""Tasks in one page of tasks/list."""
_TASK_METHODS: Final = frozenset({"tasks/get", "tasks/result", "tasks/list", "tasks/cancel"})


def _can_elicit(ctx: ServerRequestContext[ServerState, Any]) -> bool:
    caps = ctx.session.client_capabilities
    return caps is not None and caps.elicitation is not None


class LegacyTasks:
    """Tasks for 2025-11-25 sessions (see the module docstring). Every other request, and every
    request of a 2026-07-28 connection, passes through untouched. The tasks a session creates
    are watched by `updates`, which sends it notifications/tasks/status on each change."""

    def __init__(self, updates: JobUpdates | None = None) -> None:
        self.updates = updates

    async def __call__(self, ctx: ServerRequestContext[ServerState, Any], call_next: CallNext
                       ) -> HandlerResult:
        if ctx.request_id is None or ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return await call_next(ctx)
        if ctx.method == "initialize":
            channel = self.updates is not None and self.updates.channels.enabled
            if self.updates is not None and channel:
                self.updates.channels.add(ctx.session._connection, ctx.session, user_of())
                self.updates.wake()
            return _with_capability(await call_next(ctx), channel=channel)
        if ctx.method == "tools/list":
            return _with_task_support(await call_next(ctx))
        params = ctx.params or {}
        if ctx.method == "tools/call" and isinstance(params.get("task"), dict):
            return await self._create(ctx, params)
        if ctx.method not in _TASK_METHODS:
            return await call_next(ctx)
        runtime = request_runtime(ctx)
        jobs = runtime.jobs_for(user_of())
        try:
            if ctx.method == "tasks/list":
                return await _list(runtime, jobs, params.get("cursor"))
            task_id = task_id_of(params)
            if ctx.method == "tasks/get":
                return task_fields(await jobs.get(task_id), runtime.config, modern=False)
            if ctx.method == "tasks/cancel":
                return await self._cancel(runtime, jobs, task_id)
            return await self._result(ctx, runtime, jobs, task_id)
        except MCPError:
            raise
        except Exception as exc:
            raise refused(exc) from None

    async def _create(self, ctx: ServerRequestContext[ServerState, Any], params: Mapping[str, Any]
                      ) -> HandlerResult:
        name = params.get("name")
        if name not in TASK_TOOLS:
            # The spec's answer for a tool whose taskSupport is absent (forbidden).
            raise MCPError(types.METHOD_NOT_FOUND, f"the tool {name!r} does not run as a task; "
                           f"call it without 'task' (tasks: {', '.join(sorted(TASK_TOOLS))})")
        runtime = request_runtime(ctx)
        try:
            record = await start_job(runtime, user_of(), name, params.get("arguments") or {})
        except Exception as exc:
            raise refused(exc) from None
        if self.updates is not None:
            self.updates.watch_task(Creator(ctx.session, user_of(), console_root(ctx)),
                                    record.id)
        return {"task": task_fields(record, runtime.config, modern=False),
                "_meta": {IMMEDIATE_RESPONSE: immediate_text(record)}}

    async def _cancel(self, runtime: Runtime, jobs: ResearchJobs, task_id: str
                      ) -> dict[str, Any]:
        outcome = await jobs.cancel(task_id)
        if not outcome.cancelled:
            raise MCPError(types.INVALID_PARAMS, f"task {task_id} had already ended "
                           f"({outcome.record.status}); nothing was cancelled")
        return task_fields(outcome.record, runtime.config, modern=False)

    async def _result(self, ctx: ServerRequestContext[ServerState, Any], runtime: Runtime,
                      jobs: ResearchJobs, task_id: str) -> dict[str, Any]:
        """Block until the job ends and answer with its tool result. Meanwhile its questions are
        put to the client as elicitations tied to the task, and its status changes go out as
        notifications/tasks/status on this request's stream."""
        related = {RELATED_TASK: {"taskId": task_id}}
        claims = self.updates.claims if self.updates is not None else Claims()
        with claims.result_pending(task_id):
            return await self._answer_when_done(ctx, runtime, jobs, task_id, claims, related)

    async def _answer_when_done(self, ctx: ServerRequestContext[ServerState, Any],
                                runtime: Runtime, jobs: ResearchJobs, task_id: str,
                                claims: Claims, related: dict[str, Any]) -> dict[str, Any]:
        shown: tuple[str, str] | None = None
        while True:
            record = await jobs.get(task_id)
            task = task_fields(record, runtime.config, modern=False)
            if (task["status"], task["statusMessage"]) != shown:
                shown = (task["status"], task["statusMessage"])
                await _notify_status(ctx, task)
            if record.finished:
                return {**tool_result(record), "_meta": related}
            fresh = [q for q in open_questions(record, console_root(ctx))
                     if claims.claim(task_id, q.key)] if _can_elicit(ctx) else []
            if fresh:
                question = fresh[0]
                reply = await ctx.session.send_request(
                    elicitation(question, task_id), types.ElicitResult,
                    metadata=ServerMessageMetadata(related_request_id=ctx.request_id))
                await answer(jobs, task_id, question, reply.action, reply.content)
                continue
            await _until_change(jobs, record)


async def _list(runtime: Runtime, jobs: ResearchJobs, cursor: Any) -> dict[str, Any]:
    """One page of the user's tasks, newest first; `nextCursor` while more follow. The cursor
    is where the next page starts (opaque to clients, as the spec asks)."""
    start = 0
    if cursor is not None:
        if not (isinstance(cursor, str) and cursor.isdigit() and len(cursor) < 10):
            raise MCPError(types.INVALID_PARAMS, f"invalid tasks/list cursor {cursor!r}: pass "
                           "the nextCursor of the previous page, or none for the first")
        start = int(cursor)
    records = await jobs.list(start + LIST_PAGE + 1)
    page: dict[str, Any] = {"tasks": [task_fields(r, runtime.config, modern=False)
                                      for r in records[start:start + LIST_PAGE]]}
    if len(records) > start + LIST_PAGE:
        page["nextCursor"] = str(start + LIST_PAGE)
    return page


async def _until_change(jobs: ResearchJobs, record: JobRecord) -> None:
    """Wait until the job ends, or its status, step or questions differ from `record`'s, or
    `LOOK_AGAIN` seconds pass (it may run on another node, where nothing here is told)."""
    known = (record.status, record.step, list(waiting_ids(record)))
    with trio.CancelScope() as scope:

        async def changed(update: JobUpdate) -> None:
            if (update.status, update.step,
                    [q.tool_call_id for q in update.waiting_for]) != known:
                scope.cancel()

        await jobs.wait(record.id, LOOK_AGAIN, on_progress=changed, progress_every=LOOK_AGAIN)


async def _notify_status(ctx: ServerRequestContext[ServerState, Any], task: dict[str, Any]) -> None:
    try:
        await ctx.session.send_notification(
            status_notification(task),  # type: ignore[arg-type]  # not in the union
            related_request_id=ctx.request_id)
    except Exception as exc:  # a notification is optional: never fail the wait for it
        log.info("tasks.status_not_sent", task_id=task["taskId"], reason=str(exc))


def _with_capability(result: HandlerResult, *, channel: bool = False) -> HandlerResult:
    """The initialize result with `capabilities.tasks` (VS Code ignores tasks without
    `requests.tools.call`), the events extension, and with `channel` Claude Code's
    `experimental["claude/channel"]`."""
    if isinstance(result, dict) and isinstance(result.get("capabilities"), dict):
        result["capabilities"]["tasks"] = {"list": {}, "cancel": {},
                                           "requests": {"tools": {"call": {}}}}
        # MCP Events (server/events.py), where 2025-11-25 clients of the extension look.
        extensions = result["capabilities"].setdefault("extensions", {})
        if isinstance(extensions, dict):
            extensions[EVENTS_EXTENSION] = {}
        if channel:
            experimental = result["capabilities"].setdefault("experimental", {})
            if isinstance(experimental, dict):
                experimental[CHANNEL_CAPABILITY] = {}
    return result


def _with_task_support(result: HandlerResult) -> HandlerResult:
    if isinstance(result, dict):
        for tool in result.get("tools") or []:
            if isinstance(tool, dict) and tool.get("name") in TASK_TOOLS:
                tool["execution"] = {"taskSupport": "optional"}
    return result
