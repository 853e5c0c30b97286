"""Tasks for 2026-07-28 requests (SEP-2663, ``io.modelcontextprotocol/tasks``):
`TasksExtension`, its tools/call interceptor (a task only when the request declares the
extension), tasks/get, tasks/update and tasks/cancel."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import mcp_types as types
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.extension import Extension, MethodBinding
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
)

from ask_another.config import Config
from ask_another.errors import AskAnotherError
from ask_another.server.context import user_of
from ask_another.server.lifespan import ServerState
from ask_another.server.tasks.job import TASK_TOOLS, TASKS_EXTENSION, task_fields, tool_result
from ask_another.server.tasks.questions import answer, open_questions
from ask_another.server.tasks.requests import console_root, refused, request_runtime, start_job
from ask_another.server.wording import tool_text
from ask_another.store.jobs import JobRecord

__all__ = ["TasksExtension", "detailed_task"]


CLIENT_CAPABILITIES: Final = "io.modelcontextprotocol/clientCapabilities"
MISSING_CAPABILITY: Final = -32021


def detailed_task(record: JobRecord, config: Config, console_url: str | None = None
              ) -> dict[str, Any]:
    """A 2026-07-28 `DetailedTask`: the task with its result or its input requests inline
    (each with its approval link where a console serves the job, `console_url`)."""
    task = task_fields(record, config, modern=True)
    if record.finished and record.status != "cancelled":
        task["result"] = tool_result(record)
    elif task["status"] == "input_required":
        task["inputRequests"] = {asked.key: asked.request()
                                 for asked in open_questions(record, console_url)}
    return task


class TaskParams(types.RequestParams):
    """The params of tasks/get and tasks/cancel."""

    model_config = ConfigDict(populate_by_name=True, extra="allow")
    task_id: str = Field(alias="taskId", min_length=1)


class UpdateParams(TaskParams):
    """The params of tasks/update: the client's answers to the task's input requests."""

    input_responses: dict[str, dict[str, Any]] = Field(alias="inputResponses",
                                                       default_factory=dict)


def _declares(ctx: ServerRequestContext[ServerState, Any]) -> bool:
    """Whether this request's per-request capabilities name the tasks extension."""
    meta = (ctx.params or {}).get("_meta")
    capabilities = meta.get(CLIENT_CAPABILITIES) if isinstance(meta, dict) else None
    extensions = capabilities.get("extensions") if isinstance(capabilities, dict) else None
    return isinstance(extensions, dict) and TASKS_EXTENSION in extensions


def _require_declared(ctx: ServerRequestContext[ServerState, Any]) -> None:
    if not _declares(ctx):
        raise MCPError(MISSING_CAPABILITY, "Missing required client capability: the request "
                       f"must declare the {TASKS_EXTENSION} extension",
                       {"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}})


class TasksExtension(Extension):
    """Tasks for 2026-07-28 requests (SEP-2663; see the module docstring)."""

    identifier = TASKS_EXTENSION

    def methods(self) -> Sequence[MethodBinding]:
        modern = frozenset(MODERN_PROTOCOL_VERSIONS)
        return (MethodBinding("tasks/get", TaskParams, self._get, protocol_versions=modern),
                MethodBinding("tasks/update", UpdateParams, self._update,
                              protocol_versions=modern),
                MethodBinding("tasks/cancel", TaskParams, self._cancel,
                              protocol_versions=modern))

    async def intercept_tool_call(self, params: types.CallToolRequestParams,
                                  ctx: ServerRequestContext[ServerState, Any], call_next: CallNext
                                  ) -> HandlerResult:
        if (ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS or params.name not in TASK_TOOLS
                or not _declares(ctx)):
            return await call_next(ctx)
        runtime = request_runtime(ctx)
        try:
            record = await start_job(runtime, user_of(), params.name, params.arguments or {})
        except AskAnotherError as exc:  # what the tool itself would answer
            return types.CallToolResult(content=[types.TextContent(type="text",
                                                                   text=tool_text(exc))],
                                        is_error=True)
        return {"resultType": "task", **task_fields(record, runtime.config, modern=True)}

    async def _get(self, ctx: ServerRequestContext[ServerState, Any], params: BaseModel
                   ) -> HandlerResult:
        assert isinstance(params, TaskParams)
        _require_declared(ctx)
        runtime = request_runtime(ctx)
        try:
            record = await runtime.jobs_for(user_of()).get(params.task_id.strip())
        except Exception as exc:
            raise refused(exc) from None
        return detailed_task(record, runtime.config, console_root(ctx))

    async def _update(self, ctx: ServerRequestContext[ServerState, Any], params: BaseModel
                      ) -> HandlerResult:
        assert isinstance(params, UpdateParams)
        _require_declared(ctx)
        jobs = request_runtime(ctx).jobs_for(user_of())
        task_id = params.task_id.strip()
        try:
            questions = {q.key: q for q in open_questions(await jobs.get(task_id))}
        except Exception as exc:
            raise refused(exc) from None
        # Keys not outstanding (never issued, answered, expired) are ignored, as the spec says.
        for key, response in params.input_responses.items():
            if key in questions:
                content = response.get("content")
                await answer(jobs, task_id, questions[key], str(response.get("action")),
                             content if isinstance(content, dict) else None)
        return {}

    async def _cancel(self, ctx: ServerRequestContext[ServerState, Any], params: BaseModel
                      ) -> HandlerResult:
        assert isinstance(params, TaskParams)
        _require_declared(ctx)
        try:
            await request_runtime(ctx).jobs_for(user_of()).cancel(params.task_id.strip())
        except Exception as exc:
            raise refused(exc) from None
        return {}
