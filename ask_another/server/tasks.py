"""MCP Tasks over research jobs, in both protocol eras: a thin adapter, no task state of its own.

A research job already is what the protocol calls a task: durable (its row is committed before
`start_research` answers), polled, cancellable, and waiting for a person now and then. So a task
*is* a job (a task-augmented `consensus` stores one too, of method "consensus":
research/methods/consensus.py): the task id is the job id, every `tasks/*` request acts for
the caller's user through `ResearchJobs` (another user's id is refused like check_research
refuses it), and everything is read from and written to the job store, so a task started on
one node is read, answered and cancelled on another, and survives a restart.

Job to task (the state table in docs/server.md):

- pending / in_progress -> ``working``, or ``input_required`` while the job waits for a person
  (a permission, an ask_user choice, a spend confirmation); ``statusMessage`` is the live step,
  or what it waits for.
- completed -> ``completed``; cancelled -> ``cancelled``.
- failed -> ``failed`` on 2025-11-25 (that revision counts an ``isError`` tool result as a
  failure); on 2026-07-28 ``completed`` with the ``isError`` tool result, since that revision
  keeps ``failed`` for JSON-RPC errors only.
- The task's result is the tool result its tool would have given: for start_research the same
  report JSON check_research shows, for consensus the panel's answer (the job's report).

Two wire forms, both served here:

- **2025-11-25** (VS Code's agent mode): `LegacyTasks`, a server middleware. It adds
  ``capabilities.tasks`` to the initialize result, stamps ``execution.taskSupport: "optional"``
  on the long tools in tools/list, answers a tools/call carrying ``task`` with
  ``{"task": ...}`` at once, and serves tasks/get, tasks/result (blocks until the job ends; the
  job's questions are elicited through it, with the related-task ``_meta``, and status
  notifications ride it), tasks/list (the user's own) and tasks/cancel.
- **2026-07-28** (SEP-2663, ``io.modelcontextprotocol/tasks``): `TasksExtension`. Its
  tools/call interceptor answers with the flat ``resultType: "task"`` only when the request
  declares the extension (else the ordinary result); tasks/get carries the result inline once
  done and the job's questions as ``inputRequests``; tasks/update delivers ``inputResponses``
  to the job as answer_permission / answer_choice do; tasks/cancel.

It also pushes `research://JOB_ID` updates (`JobUpdates`): through the subscription bus to
2026-07-28 listen streams, through resources/subscribe to 2025-11-25 sessions, to the job's user
only, raised by each node from what it reads in the store.

The SDK (mcp 2.3) has the 2025 task types but no tasks runtime, so this leans on provisional
parts of it: `MCPServer(middleware=...)` (a middleware runs before params validation and owns
its short-circuited result, so a 2025 task answer escapes the result sieve that would drop it
from a tools/call handler's result), `Extension` with `MethodBinding` and
`intercept_tool_call`, the fields of `ServerRequestContext`, `MCPServer(subscriptions=...)` and
`_lowlevel_server` (resources/subscribe has no decorator). `seam_problems()` names each
one an SDK upgrade moved; tests/ask_another/server/test_task_seams.py fails with those names.
"""

from __future__ import annotations

import collections
import contextlib
import inspect
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from typing import Any, Final

import mcp_types as types
import trio
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.extension import Extension, MethodBinding
from mcp.server.mcpserver import MCPServer
from mcp.server.session import ServerSession
from mcp.server.subscriptions import ResourceUpdated, ServerEvent
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp_types.methods import SPEC_CLIENT_METHODS
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
)

from ask_another.config import Config
from ask_another.errors import AskAnotherError, InvalidArgument
from ask_another.interaction.types import ALLOW, Deny, Question
from ask_another.logs import get_logger
from ask_another.research import JobUpdate, ResearchJobs
from ask_another.research.methods import CONSENSUS_METHOD
from ask_another.runtime import Runtime
from ask_another.server.channel import CHANNEL_CAPABILITY, Channels
from ask_another.server.context import user_of
from ask_another.server.events import EVENTS_EXTENSION
from ask_another.server.lifespan import ServerState, Unavailable
from ask_another.server.tools.attached import asked_of, waiting_text
from ask_another.server.tools.research import result_json
from ask_another.server.tools.stances import stances_map
from ask_another.server.wording import tool_text
from ask_another.store.jobs import JobRecord, job_store
from ask_another.users import LOCAL_USER, User

__all__ = [
    "RELATED_TASK",
    "TASKS_EXTENSION",
    "TASK_TOOLS",
    "Asked",
    "LegacyTasks",
    "TasksExtension",
    "open_questions",
    "seam_problems",
    "status_notification",
    "task_fields",
    "task_status",
    "tool_result",
]

log = get_logger("ask_another.server.tasks")

TASKS_EXTENSION: Final = "io.modelcontextprotocol/tasks"
RELATED_TASK: Final = "io.modelcontextprotocol/related-task"
CLIENT_CAPABILITIES: Final = "io.modelcontextprotocol/clientCapabilities"
IMMEDIATE_RESPONSE: Final = "io.modelcontextprotocol/model-immediate-response"
TASK_TOOLS: Final = frozenset({"start_research", "consensus"})
"""The tools a client may run as a task: each one's task is the job it starts (a consensus's
is a job of method "consensus", research/methods/consensus.py)."""
LOOK_AGAIN: Final = 5.0
"""Seconds a blocked tasks/result waits on the job before it looks at the store again."""
MISSING_CAPABILITY: Final = -32021
LIST_PAGE: Final = 100
"""Tasks in one page of tasks/list."""
_TASK_METHODS: Final = frozenset({"tasks/get", "tasks/result", "tasks/list", "tasks/cancel"})


# ----- a job as a task (both eras) -----------------------------------------------------------


def _iso(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _waiting(record: JobRecord) -> list[Question]:
    return [] if record.finished else list(record.waiting_for)


def _waiting_ids(record: JobRecord) -> tuple[str, ...]:
    """The tool calls whose questions `record` waits on: what tells one waiting from another."""
    return tuple(q.tool_call_id for q in _waiting(record))


def task_status(record: JobRecord, *, modern: bool) -> str:
    """The task status of a job (the table in the module docstring)."""
    if record.status == "completed" or (record.status == "failed" and modern):
        return "completed"
    if record.status in ("failed", "cancelled"):
        return record.status
    return "input_required" if _waiting(record) else "working"


def _status_message(record: JobRecord) -> str:
    waiting = _waiting(record)
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
    ttl = None if config.task_ttl is None else round(config.task_ttl * 1000)
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


def _detailed(record: JobRecord, config: Config, console_url: str | None = None
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


# ----- what the job waits for: the one place its questions become input requests -------------


@dataclass(frozen=True)
class Asked:
    """One question a job waits on, as a task puts it to the client: an elicitation form under
    a key that stays the same for the task's lifetime (one tool call asks at most once of each
    kind)."""

    key: str
    kind: str  # "permission", "choice" or "spend" (a Question's kind)
    tool_call_id: str
    message: str
    schema: dict[str, Any]
    expires_at: float = 0.0  # wall-clock Unix seconds: unanswered by then, the job moves on

    def request(self) -> dict[str, Any]:
        """The 2026-07-28 input request (an `elicitation/create` in form mode)."""
        return {"method": "elicitation/create",
                "params": {"mode": "form", "message": self.message,
                           "requestedSchema": self.schema}}


def open_questions(record: JobRecord, console_url: str | None = None) -> list[Asked]:
    """The questions `record` waits on a person for, in the order the job asked them; each
    message ends with its approval link where a console serves the job (`console_url`)."""
    asked = []
    for waiting in _waiting(record):
        question = asked_of(record.id, waiting, console_url)
        schema = question.schema.model_json_schema()
        schema.pop("title", None)
        asked.append(Asked(f"{question.kind}:{question.tool_call_id}", question.kind,
                           question.tool_call_id, question.message, schema,
                           waiting.expires_at))
    return asked


async def answer(jobs: ResearchJobs, job_id: str, asked: Asked, action: str,
                 content: Mapping[str, Any] | None) -> None:
    """Deliver a person's answer to `asked` as answer_permission / answer_choice would: an
    accepted form with its value; a declined or cancelled permission is a deny, a declined
    choice stays open (answer_choice can still answer it). A late or repeated answer is refused
    by the job and changes nothing; it is logged, not raised (the spec says to ignore it)."""
    value = (content or {}) if action == "accept" else {}
    try:
        if asked.kind in ("permission", "spend"):
            allowed = value.get("decision") == "allow"
            await jobs.answer_permission(job_id, asked.tool_call_id,
                                         ALLOW if allowed else Deny("rejected"))
        elif isinstance(value.get("option_id"), str):
            await jobs.answer_choice(job_id, asked.tool_call_id, value["option_id"])
    except AskAnotherError as exc:
        log.info("tasks.answer_refused", job_id=job_id, key=asked.key, reason=str(exc))


def elicitation(asked: Asked, task_id: str) -> types.ElicitRequest:
    """The 2025-11-25 elicitation/create that puts `asked` to the client, tied to its task
    (``io.modelcontextprotocol/related-task`` in ``_meta``)."""
    return types.ElicitRequest(params=types.ElicitRequestFormParams(
        message=asked.message, requested_schema=asked.schema,
        _meta={RELATED_TASK: {"taskId": task_id}}))  # type: ignore[arg-type]  # _meta alias


class Claims:
    """Which of a 2025-11-25 task's questions have been put to its client, by whom: a question
    is asked once, either on a blocked tasks/result's stream or pushed to the session that
    created the task (`JobUpdates`), never both. A push waits while a tasks/result is blocked
    on the task (that one asks)."""

    def __init__(self) -> None:
        self._asked: dict[str, set[str]] = {}
        self._results: dict[str, int] = {}

    def claim(self, task_id: str, key: str) -> bool:
        """Whether the caller may ask `key` now (nobody has): it then has."""
        asked = self._asked.setdefault(task_id, set())
        if key in asked:
            return False
        asked.add(key)
        return True

    def release(self, task_id: str, key: str) -> None:
        """`key` was not asked after all (the client could not be reached): ask it again."""
        self._asked.get(task_id, set()).discard(key)

    def may_push(self, task_id: str) -> bool:
        return not self._results.get(task_id)

    @contextlib.contextmanager
    def result_pending(self, task_id: str) -> Iterator[None]:
        self._results[task_id] = self._results.get(task_id, 0) + 1
        try:
            yield
        finally:
            self._results[task_id] -= 1
            if not self._results[task_id]:
                del self._results[task_id]

    def forget(self, task_id: str) -> None:
        """The task ended: nothing of it is asked again."""
        self._asked.pop(task_id, None)


# ----- requests to jobs ----------------------------------------------------------------------


def _runtime(ctx: ServerRequestContext[ServerState, Any]) -> Runtime:
    state = ctx.lifespan_context
    runtime = state.opened if isinstance(state, ServerState) else None
    if isinstance(runtime, Unavailable):
        raise MCPError(types.INTERNAL_ERROR, tool_text(runtime.error))
    if not isinstance(runtime, Runtime):
        raise MCPError(types.INTERNAL_ERROR, "the ask-another runtime is not running")
    return runtime


def _console_root(ctx: ServerRequestContext[ServerState, Any]) -> str | None:
    """Where the approval links of the input requests point (`ServerState.console_root`)."""
    state = ctx.lifespan_context
    return state.console_root() if isinstance(state, ServerState) else None


def _refused(exc: Exception) -> MCPError:
    """A job's refusal (unknown id, another user's job, bad arguments) as invalid params, one
    line a person can act on; anything else as an internal error, logged."""
    if isinstance(exc, AskAnotherError):
        return MCPError(types.INVALID_PARAMS, tool_text(exc))
    log.exception("tasks.crashed")
    return MCPError(types.INTERNAL_ERROR, tool_text(exc))


def _task_id(params: Mapping[str, Any] | None) -> str:
    task_id = (params or {}).get("taskId")
    if not isinstance(task_id, str) or not task_id.strip():
        raise MCPError(types.INVALID_PARAMS, "taskId is required: the id of a task (a research "
                                             "job id, such as r-0123456789)")
    return task_id.strip()


def _argument(arguments: Mapping[str, Any], name: str, default: str | None = None, *,
              tool: str = "start_research") -> str:
    value = arguments.get(name, default)
    if not isinstance(value, str):
        raise InvalidArgument(f"Invalid arguments for {tool}: {name} is required "
                              "and must be a string" if value is None else
                              f"Invalid arguments for {tool}: {name} must be a string, "
                              f"got {value!r}")
    return value


def _optional(arguments: Mapping[str, Any], name: str, kind: type | tuple[type, ...],
              what: str) -> Any:
    """A consensus argument that may be left out (None), else of `kind`."""
    value = arguments.get(name)
    if value is not None and (not isinstance(value, kind) or isinstance(value, bool)):
        raise InvalidArgument(f"Invalid arguments for consensus: {name} must be {what}, got "
                              f"{value!r}")
    return value


async def _start_consensus(runtime: Runtime, user: User, arguments: Mapping[str, Any]
                           ) -> JobRecord:
    """The consensus job a task-augmented consensus asks for: the tool's arguments, checked
    here as its schema would (`confirm_spend` has no use: the task asks for the confirmation)."""
    models = arguments.get("models")
    if not isinstance(models, list) or not all(isinstance(m, str) for m in models):
        raise InvalidArgument("Invalid arguments for consensus: models is required and must "
                              f"be a list of model names, got {models!r}")
    stances = stances_map(arguments.get("stances"))
    return await runtime.jobs_for(user).start_consensus(
        models, _argument(arguments, "prompt", tool="consensus"),
        system=_optional(arguments, "system", str, "a string"), stances=stances,
        synthesize=_optional(arguments, "synthesize", str, "a model name"),
        conversation_id=_optional(arguments, "conversation_id", str, "a conversation id"),
        temperature=_optional(arguments, "temperature", (int, float), "a number"),
        timeout=_optional(arguments, "timeout", (int, float), "a number of seconds"))


async def _start(runtime: Runtime, user: User, tool: str, arguments: Mapping[str, Any]
                 ) -> JobRecord:
    """Start the job a task-augmented call of `tool` asks for; the row is committed when this
    returns, so tasks/get finds it from any node at once."""
    runtime.rates.check(user)  # the per-user tool-call limit, as for every tool call
    if tool == "consensus":
        record = await _start_consensus(runtime, user, arguments)
    else:
        model = _argument(arguments, "model")
        query = _argument(arguments, "query")
        method = _argument(arguments, "method", "auto").strip() or "auto"
        depth = _argument(arguments, "depth", "standard").strip() or "standard"
        record = await runtime.jobs_for(user).start(model, query, method, depth=depth)
    log.info("tasks.created", job_id=record.id, user=user.id, tool=tool)
    return record


def _immediate(record: JobRecord) -> str:
    if record.method == CONSENSUS_METHOD:
        return (f"Consensus {record.id} runs as a task. The panel's answer arrives when the "
                f"task completes; check_research with job_id='{record.id}' shows it too.")
    return (f"Research job {record.id} ({record.model}) runs as a task. Its report arrives "
            f"when the task completes; check_research with job_id='{record.id}' shows it too.")


# ----- 2025-11-25: the middleware ------------------------------------------------------------


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
        runtime = _runtime(ctx)
        jobs = runtime.jobs_for(user_of())
        try:
            if ctx.method == "tasks/list":
                return await _list(runtime, jobs, params.get("cursor"))
            task_id = _task_id(params)
            if ctx.method == "tasks/get":
                return task_fields(await jobs.get(task_id), runtime.config, modern=False)
            if ctx.method == "tasks/cancel":
                return await self._cancel(runtime, jobs, task_id)
            return await self._result(ctx, runtime, jobs, task_id)
        except MCPError:
            raise
        except Exception as exc:
            raise _refused(exc) from None

    async def _create(self, ctx: ServerRequestContext[ServerState, Any], params: Mapping[str, Any]
                      ) -> HandlerResult:
        name = params.get("name")
        if name not in TASK_TOOLS:
            # The spec's answer for a tool whose taskSupport is absent (forbidden).
            raise MCPError(types.METHOD_NOT_FOUND, f"the tool {name!r} does not run as a task; "
                           f"call it without 'task' (tasks: {', '.join(sorted(TASK_TOOLS))})")
        runtime = _runtime(ctx)
        try:
            record = await _start(runtime, user_of(), name, params.get("arguments") or {})
        except Exception as exc:
            raise _refused(exc) from None
        if self.updates is not None:
            self.updates.watch_task(Creator(ctx.session, user_of(), _console_root(ctx)),
                                    record.id)
        return {"task": task_fields(record, runtime.config, modern=False),
                "_meta": {IMMEDIATE_RESPONSE: _immediate(record)}}

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
            fresh = [q for q in open_questions(record, _console_root(ctx))
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
    known = (record.status, record.step, list(_waiting_ids(record)))
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


# ----- 2026-07-28: the extension -------------------------------------------------------------


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
        runtime = _runtime(ctx)
        try:
            record = await _start(runtime, user_of(), params.name, params.arguments or {})
        except AskAnotherError as exc:  # what the tool itself would answer
            return types.CallToolResult(content=[types.TextContent(type="text",
                                                                   text=tool_text(exc))],
                                        is_error=True)
        return {"resultType": "task", **task_fields(record, runtime.config, modern=True)}

    async def _get(self, ctx: ServerRequestContext[ServerState, Any], params: BaseModel
                   ) -> HandlerResult:
        assert isinstance(params, TaskParams)
        _require_declared(ctx)
        runtime = _runtime(ctx)
        try:
            record = await runtime.jobs_for(user_of()).get(params.task_id.strip())
        except Exception as exc:
            raise _refused(exc) from None
        return _detailed(record, runtime.config, _console_root(ctx))

    async def _update(self, ctx: ServerRequestContext[ServerState, Any], params: BaseModel
                      ) -> HandlerResult:
        assert isinstance(params, UpdateParams)
        _require_declared(ctx)
        jobs = _runtime(ctx).jobs_for(user_of())
        task_id = params.task_id.strip()
        try:
            questions = {q.key: q for q in open_questions(await jobs.get(task_id))}
        except Exception as exc:
            raise _refused(exc) from None
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
            await _runtime(ctx).jobs_for(user_of()).cancel(params.task_id.strip())
        except Exception as exc:
            raise _refused(exc) from None
        return {}


# ----- live job resources: research://JOB_ID updates -----------------------------------------


RESOURCE_PREFIX: Final = "research://"
WATCH_EVERY: Final = 1.0
"""Seconds between two reads of the store for changed jobs, while anyone listens."""
MAX_LEGACY_SUBSCRIPTIONS: Final = 10_000
"""2025-11-25 resources/subscribe entries on this node, every session's."""
MAX_LEGACY_PER_USER: Final = 1_000
"""Of which one user's (every session of theirs): one user cannot fill the node's table."""
MAX_LISTENS_PER_USER: Final = 64
"""2026-07-28 subscriptions/listen streams one user may hold open on this node (the SDK's
`ListenHandler` allows 1,024 on the node, and a user may have 512 requests in flight)."""

Listener = Callable[[ServerEvent], None]


def _job_state(record: JobRecord) -> tuple[str, str | None, tuple[str, ...]]:
    return record.status, record.step, _waiting_ids(record)


@dataclass(frozen=True, eq=False)
class Creator:
    """The 2025-11-25 session that created a task, whose user it acts for, and where the
    approval links of its questions point."""

    session: ServerSession
    user: User
    console_url: str | None = None

    def can_elicit(self) -> bool:
        caps = self.session.client_capabilities
        return caps is not None and caps.elicitation is not None


class JobUpdates:
    """Pushes `research://JOB_ID` updates to the people who may read that job, in both eras.

    - 2026-07-28: it is the server's subscription bus (`MCPServer(subscriptions=...)`): each
      `subscriptions/listen` stream registers through `subscribe`, which notes the caller's
      user, and a job's update reaches only the streams whose user may see the job (the SDK's
      listen handler then keeps to the URIs each stream asked for).
    - 2025-11-25: `resources/subscribe` / `resources/unsubscribe` (registered on the low-level
      server), refused for another user's job; an update is `notifications/resources/updated`.

    `run` watches the store, not this process's actors, while anyone listens: every node
    raises the updates of its own listeners for whatever changed, wherever the job runs.
    """

    def __init__(self, channel: bool = False) -> None:
        self.channels = Channels(channel)  # Claude Code channel events (server/channel.py)
        self._listeners: dict[object, tuple[Listener, User]] = {}
        self._legacy: dict[tuple[int, str], tuple[Any, User]] = {}
        self._per_user: collections.Counter[str | None] = collections.Counter()  # legacy
        self._closing: set[int] = set()  # connections whose end drops their entries
        self._tasks: dict[str, list[Creator]] = {}  # task id -> the 2025 session that made it
        self.claims = Claims()
        self._config: Config | None = None
        self._runtime: Runtime | None = None
        self._nursery: trio.Nursery | None = None
        self._wake = trio.Event()

    # the SubscriptionBus protocol (mcp.server.subscriptions)
    async def publish(self, event: ServerEvent) -> None:
        """An event the SDK raises (a list change): to every listener."""
        for listener, _user in list(self._listeners.values()):
            _deliver(listener, event)
        await trio.lowlevel.checkpoint()

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """A listen stream's registration (`check_listen` bounded it first); the SDK
        unsubscribes when the stream ends, however it ends."""
        token = object()
        self._listeners[token] = (listener, user_of())  # the listen request's caller
        self._wake.set()

        def unsubscribe() -> None:
            self._listeners.pop(token, None)

        return unsubscribe

    def check_listen(self) -> None:
        """Refuse a subscriptions/listen past `MAX_LISTENS_PER_USER` streams of its caller's
        (`ListenBound`, before the SDK's handler: raised from `subscribe`, the refusal would
        leave that handler's stream buffers unclosed)."""
        user = user_of()
        held = sum(1 for _, u in self._listeners.values() if u.id == user.id)
        if held >= MAX_LISTENS_PER_USER:
            raise MCPError(types.INTERNAL_ERROR, f"too many subscriptions/listen streams: "
                           f"{held} are open for you on this server (at most "
                           f"{MAX_LISTENS_PER_USER}); close one first")

    def wake(self) -> None:
        """Someone new listens: let `run` read the store again."""
        self._wake.set()

    def statistics(self) -> dict[str, int]:
        """How many entries each table holds: listen streams, 2025 subscriptions, watched
        tasks."""
        return {"listeners": len(self._listeners), "legacy_subscriptions": len(self._legacy),
                "watched_tasks": sum(len(c) for c in self._tasks.values())}

    # resources/subscribe and resources/unsubscribe (2025-11-25)
    async def on_subscribe(self, ctx: ServerRequestContext[ServerState, Any],
                           params: types.SubscribeRequestParams) -> dict[str, Any]:
        uri = str(params.uri)
        if not uri.startswith(RESOURCE_PREFIX):
            raise MCPError(types.INVALID_PARAMS, f"only research://JOB_ID resources change, "
                           f"not {uri!r}")
        user = user_of()
        try:
            await _runtime(ctx).jobs_for(user).get(uri.removeprefix(RESOURCE_PREFIX))
        except MCPError:
            raise
        except Exception as exc:
            raise _refused(exc) from None
        connection = ctx.session._connection
        key = (id(connection), uri)
        if key in self._legacy:  # subscribed already: nothing more to hold
            return {}
        if len(self._legacy) >= MAX_LEGACY_SUBSCRIPTIONS:
            raise MCPError(types.INTERNAL_ERROR, "too many resource subscriptions on this "
                           "server; unsubscribe from finished jobs")
        if self._per_user[user.id] >= MAX_LEGACY_PER_USER:
            raise MCPError(types.INTERNAL_ERROR, f"too many resource subscriptions: you hold "
                           f"{self._per_user[user.id]} on this server (at most "
                           f"{MAX_LEGACY_PER_USER}); unsubscribe from finished jobs")
        self._legacy[key] = (ctx.session, user)
        self._per_user[user.id] += 1
        self._drop_at_end(connection)
        self._wake.set()
        return {}

    async def on_unsubscribe(self, ctx: ServerRequestContext[ServerState, Any],
                             params: types.UnsubscribeRequestParams) -> dict[str, Any]:
        self._unsubscribe((id(ctx.session._connection), str(params.uri)))
        return {}

    def _unsubscribe(self, key: tuple[int, str]) -> None:
        entry = self._legacy.pop(key, None)
        if entry is not None:
            self._per_user[entry[1].id] -= 1
            if self._per_user[entry[1].id] <= 0:
                del self._per_user[entry[1].id]

    def _drop_at_end(self, connection: Any) -> None:
        """When `connection` (a 2025-11-25 session) ends, drop its subscriptions and the tasks
        it watches: the SDK unwinds the connection's exit stack as it closes."""
        if id(connection) in self._closing:
            return
        self._closing.add(id(connection))
        connection.exit_stack.callback(self._connection_ended, id(connection))

    def _connection_ended(self, connection: int) -> None:
        self._closing.discard(connection)
        for key in [k for k in self._legacy if k[0] == connection]:
            self._unsubscribe(key)
        for task_id, creators in list(self._tasks.items()):
            creators[:] = [c for c in creators if id(c.session._connection) != connection]
            if not creators:
                del self._tasks[task_id]

    def watch_task(self, creator: Creator, task_id: str) -> None:
        """Send the session that created a task (a 2025-11-25 one) notifications/tasks/status
        on each change of the task until it ends, and put the task's questions to it as they
        open (an elicitation related to the task) where it can be asked."""
        self._tasks.setdefault(task_id, []).append(creator)
        self._drop_at_end(creator.session._connection)
        self._wake.set()

    async def _task_changed(self, record: JobRecord) -> None:
        creators = self._tasks.pop(record.id, []) if record.finished \
            else self._tasks.get(record.id, [])
        if record.finished:
            self.claims.forget(record.id)
        if not creators or self._config is None:
            return
        notification = status_notification(task_fields(record, self._config, modern=False))
        for creator in list(creators):
            try:
                await creator.session.send_notification(notification)  # type: ignore[arg-type]
            except Exception as exc:  # the session is gone (it was optional anyway)
                log.info("tasks.status_not_sent", task_id=record.id, reason=str(exc))
                if creator in creators:
                    creators.remove(creator)
        self._push_questions(record)

    def _push_questions(self, record: JobRecord) -> None:
        """Ask the task's creator each question of `record` nobody has asked yet, unless a
        tasks/result blocked on it asks them. fastmcp 3 polls tasks/get to the end and calls
        tasks/result only then, so without this its elicitation handler never heard them."""
        if self._nursery is None or record.finished or not self.claims.may_push(record.id):
            return
        for creator in self._tasks.get(record.id, []):
            if not creator.can_elicit():
                continue
            for asked in open_questions(record, creator.console_url):
                if self.claims.claim(record.id, asked.key):
                    self._nursery.start_soon(self._push, creator, record.id, asked)

    async def _push(self, creator: Creator, task_id: str, asked: Asked) -> None:
        """One pushed question, waited on until its expiry (then the job has moved on)."""
        assert self._runtime is not None
        log.info("tasks.elicit_pushed", task_id=task_id, key=asked.key)
        reply = None
        with trio.move_on_at(trio.current_time() + max(0.0, asked.expires_at - time.time())):
            try:
                reply = await creator.session.send_request(elicitation(asked, task_id),
                                                           types.ElicitResult)
            except Exception as exc:  # the session is gone, or its client refused the request
                log.info("tasks.elicit_not_pushed", task_id=task_id, key=asked.key,
                         reason=str(exc))
                self.claims.release(task_id, asked.key)
                return
        if reply is not None:
            await answer(self._runtime.jobs_for(creator.user), task_id, asked, reply.action,
                         reply.content)

    async def job_changed(self, record: JobRecord) -> None:
        """Tell whoever may see `record` that `research://ID` may read differently now, and
        the sessions that created it as a task its new status."""
        await self._task_changed(record)
        if self.channels and self._config is not None:
            await self.channels.job_changed(record, self._config)
        uri = RESOURCE_PREFIX + record.id
        event = ResourceUpdated(uri=uri)
        for listener, user in list(self._listeners.values()):
            if user.can_see(record.user_id):
                _deliver(listener, event)
        for key, (session, user) in list(self._legacy.items()):
            if key[1] != uri or not user.can_see(record.user_id):
                continue
            try:
                await session.send_resource_updated(uri)
            except Exception as exc:  # the session is gone: its subscriptions with it
                log.info("tasks.subscription_dropped", uri=uri, reason=str(exc))
                self._unsubscribe(key)

    async def run(self, runtime: Runtime) -> None:
        """Read the store every `WATCH_EVERY` seconds while anyone listens, and raise an update
        for each job whose status, step or questions changed (and each that ended)."""
        seen: dict[str, tuple[str, str | None, tuple[str, ...]]] = {}
        first = True
        self._config, self._runtime = runtime.config, runtime
        async with trio.open_nursery() as self._nursery:  # the pushed questions
            while True:
                if not (self._listeners or self._legacy or self._tasks or self.channels):
                    self._wake = trio.Event()
                    await self._wake.wait()
                    seen, first = {}, True
                try:
                    seen = await self._look(runtime, seen, announce=not first)
                    first = False
                except Exception:  # a store hiccup must not end the watch: try again next turn
                    log.exception("tasks.watch_failed")
                await trio.sleep(WATCH_EVERY)

    async def _look(self, runtime: Runtime, seen: dict[str, Any], *, announce: bool
                    ) -> dict[str, Any]:
        store = job_store(await runtime.database())
        current = {r.id: r for r in await store.unfinished(LOCAL_USER)}  # every user's
        for job_id in seen.keys() - current.keys():  # ended since the last look
            ended = await store.get(job_id)
            if ended is not None and announce:
                await self.job_changed(ended)
        for job_id in self._tasks.keys() - current.keys() - seen.keys():  # ended unseen
            ended = await store.get(job_id)
            if ended is None:
                self._tasks.pop(job_id, None)
            elif ended.finished:
                await self._task_changed(ended)
        for job_id, record in current.items():
            if announce and seen.get(job_id) != _job_state(record):
                await self.job_changed(record)
            elif job_id in self._tasks:  # a question left to ask (a tasks/result ended, ...)
                self._push_questions(record)
        return {job_id: _job_state(record) for job_id, record in current.items()}


def _deliver(listener: Listener, event: ServerEvent) -> None:
    try:
        listener(event)
    except Exception:  # one bad listener must not starve the others
        log.exception("tasks.listener_failed")


# ----- wiring and the SDK seams --------------------------------------------------------------


def live_resources(server: MCPServer[Any], updates: JobUpdates) -> None:
    """Serve 2025-11-25 resources/subscribe and resources/unsubscribe from `updates` (on the
    low-level server: `MCPServer` has no decorator for them)."""
    lowlevel = server._lowlevel_server
    lowlevel.add_request_handler("resources/subscribe", types.SubscribeRequestParams,
                                 updates.on_subscribe)
    lowlevel.add_request_handler("resources/unsubscribe", types.UnsubscribeRequestParams,
                                 updates.on_unsubscribe)


class ListenBound:
    """A server middleware that refuses a subscriptions/listen past its user's bound
    (`JobUpdates.check_listen`) before the SDK's handler opens the stream."""

    def __init__(self, updates: JobUpdates) -> None:
        self.updates = updates

    async def __call__(self, ctx: ServerRequestContext[ServerState, Any], call_next: CallNext
                       ) -> HandlerResult:
        if ctx.method == "subscriptions/listen":
            self.updates.check_listen()
        return await call_next(ctx)


def middleware(updates: JobUpdates | None = None) -> list[Any]:
    """For `MCPServer(middleware=...)`; `updates` sends the status of the tasks a 2025-11-25
    session created to it as they change, and bounds each user's listen streams."""
    return [LegacyTasks(updates), *([ListenBound(updates)] if updates is not None else [])]


def extensions() -> list[Extension]:
    """For `MCPServer(extensions=...)`."""
    return [TasksExtension()]


def seam_problems() -> list[str]:
    """The provisional SDK parts this module relies on that are missing or changed, each named
    (empty while they hold)."""
    init = inspect.signature(MCPServer.__init__).parameters
    problems = [f"MCPServer({name}=...) is gone" for name in ("middleware", "extensions")
                if name not in init]
    if not isinstance(getattr(MCPServer, "middleware", None), property):
        problems.append("MCPServer.middleware (the list of Server.middleware) is gone")
    context = {f.name for f in fields(ServerRequestContext)}
    problems += [f"ServerRequestContext.{name} is gone"
                 for name in ("session", "lifespan_context", "protocol_version", "method",
                              "params", "request_id") if name not in context]
    binding = {f.name for f in fields(MethodBinding)}
    if not {"method", "params_type", "handler", "protocol_versions"} <= binding:
        problems.append(f"MethodBinding's fields changed: {sorted(binding)}")
    intercept = list(inspect.signature(Extension.intercept_tool_call).parameters)
    if intercept != ["self", "params", "ctx", "call_next"]:
        problems.append(f"Extension.intercept_tool_call(params, ctx, call_next) changed: "
                        f"{intercept}")
    lowlevel = getattr(MCPServer("probe"), "_lowlevel_server", None)
    if lowlevel is None or not callable(getattr(lowlevel, "add_request_handler", None)):
        problems.append("MCPServer._lowlevel_server.add_request_handler is gone")
    if "_connection" not in ServerSession.__init__.__code__.co_names:
        problems.append("ServerSession._connection (a 2025 subscription's connection) is gone")
    if "subscriptions" not in init:
        problems.append("MCPServer(subscriptions=...) (the subscription bus) is gone")
    claimed = sorted({"tasks/get", "tasks/update", "tasks/cancel"} & SPEC_CLIENT_METHODS)
    if claimed:
        problems.append(f"the SDK now serves {claimed} itself: MethodBinding refuses them")
    return problems
