"""A job's end, or its start of waiting for a person, as the MCP Events extension has it
(SEP-3415, ``io.modelcontextprotocol/events``, the draft of
modelcontextprotocol/experimental-ext-triggers-events): one event type, poll and push, replayed
from the job table with a resume cursor.

- ``events/list``: the one event type, `JOB_EVENT` (``research.job_updated``), with its
  subscription arguments (an optional ``job_id``) and its payload (the job, its status, whether
  it waits for a person, and a line naming the call that fetches the report or answers it).
- ``events/poll`` ``{name, arguments, cursor, maxAgeMs?, maxEvents?}``: the events after
  `cursor` (null: none, and a cursor for now), ``{events, cursor, truncated, hasMore,
  nextPollMs}``.
- ``events/stream``: the same as a long request; ``notifications/events/active`` first, then
  ``notifications/events/event`` as they happen and ``notifications/events/heartbeat`` (with
  the cursor reached) every `HEARTBEAT` seconds, each with the stream's request id as
  ``_meta["io.modelcontextprotocol/subscriptionId"]``; it ends when the client cancels.

Every event comes from the store, so any node answers a poll and a stream survives a restart
by its cursor: a job's end at its ``ended_at``; its start of waiting at the time its question
was asked (its expiry less `ASK_ANOTHER_PERMISSION_TIMEOUT`). The cursor is that time, as
text; an event is after the cursor when it is later. The store is read each `LOOK_EVERY`
seconds of a stream, among the caller's `LOOKED_AT` latest jobs. Served in both eras on the
low-level server (the SDK has no events runtime) and advertised under
``capabilities.extensions`` (server/tasks/'s initialize patch; `EventsExtension` for
2026-07-28).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

import mcp_types as types
import trio
from mcp.server.context import ServerRequestContext
from mcp.server.extension import Extension, MethodBinding
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, ConfigDict, Field

from ask_another.config import Config
from ask_another.research import ResearchJobs
from ask_another.runtime import Runtime
from ask_another.server.context import user_of
from ask_another.server.lifespan import ServerState, Unavailable
from ask_another.server.wording import tool_text
from ask_another.store.jobs import JobRecord

__all__ = ["EVENTS_EXTENSION", "JOB_EVENT", "EventsExtension", "JobEvent", "RawNotification",
           "job_events", "serve_events"]

EVENTS_EXTENSION: Final = "io.modelcontextprotocol/events"
SUBSCRIPTION_ID: Final = "io.modelcontextprotocol/subscriptionId"
JOB_EVENT: Final = "research.job_updated"
NOT_FOUND: Final = -32011  # the extension's NotFound
LOOK_EVERY: Final = 1.0
HEARTBEAT: Final = 15.0
NEXT_POLL_MS: Final = 5_000
LOOKED_AT: Final = 200
MAX_EVENTS: Final = 100

DESCRIPTOR: Final = {
    "name": JOB_EVENT,
    "description": "A research job (or consensus task) of yours ended (completed, failed, "
                   "cancelled) or started waiting for a person (a permission, a question, a "
                   "spend confirmation). `text` names the call that fetches the report or "
                   "answers the question.",
    "delivery": ["poll", "push"],
    "inputSchema": {"type": "object", "additionalProperties": False, "properties": {
        "job_id": {"type": "string", "description": "Only this job's events."}}},
    "payloadSchema": {"type": "object", "additionalProperties": False,
                      "required": ["job_id", "status", "model", "waiting", "text"],
                      "properties": {"job_id": {"type": "string"},
                                     "status": {"type": "string"},
                                     "model": {"type": "string"},
                                     "waiting": {"type": "boolean"},
                                     "text": {"type": "string"}}},
}


@dataclass(frozen=True)
class JobEvent:
    """One event of a job, at `at` (Unix seconds, from the job table)."""

    event_id: str
    at: float
    record: JobRecord
    waiting: bool

    def text(self) -> str:
        """What the model reads: what happened and the call to make."""
        job = self.record
        if self.waiting:
            return (f"Research job {job.id} ({job.model}) waits for a person: call "
                    f"check_research with job_id='{job.id}' to see what it asks, then "
                    "answer_permission or answer_choice.")
        if job.status == "completed":
            return (f"Research job {job.id} ({job.model}) completed: call check_research "
                    f"with job_id='{job.id}' for the report (or read research://{job.id}).")
        return (f"Research job {job.id} ({job.model}) ended {job.status}: check_research "
                f"with job_id='{job.id}' shows why.")

    def occurrence(self) -> dict[str, Any]:
        return {"eventId": self.event_id, "name": JOB_EVENT,
                "timestamp": datetime.fromtimestamp(self.at, UTC).isoformat(
                    timespec="milliseconds").replace("+00:00", "Z"),
                "data": {"job_id": self.record.id, "status": self.record.status,
                         "model": self.record.model, "waiting": self.waiting,
                         "text": self.text()},
                "cursor": cursor_of(self.at)}


def cursor_of(at: float) -> str:
    return repr(float(at))  # exact: an event is after its own cursor never


def _after(cursor: str | None) -> float | None:
    if cursor is None:
        return None
    try:
        return float(cursor)
    except ValueError:
        raise MCPError(types.INVALID_PARAMS, f"invalid events cursor {cursor!r}: pass the "
                       "cursor the last poll, event or heartbeat gave, or null for now") from None


def job_events(records: Sequence[JobRecord], config: Config) -> list[JobEvent]:
    """Every event `records` show, oldest first: each one's end, and each question it waits
    on (asked at its expiry less the permission timeout)."""
    found = []
    for record in records:
        if record.finished and record.ended_at is not None:
            found.append(JobEvent(f"{record.id}:{record.status}", record.ended_at, record,
                                  False))
        elif not record.finished:
            found.extend(JobEvent(f"{record.id}:waiting:{question.tool_call_id}",
                                  question.expires_at - config.permission_timeout, record, True)
                         for question in record.waiting_for)
    return sorted(found, key=lambda e: (e.at, e.event_id))


class Subscription(BaseModel):
    """The params of events/poll and events/stream."""

    model_config = ConfigDict(populate_by_name=True, extra="allow")
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    cursor: str | None = None
    max_age_ms: float | None = Field(default=None, alias="maxAgeMs")
    max_events: int | None = Field(default=None, alias="maxEvents", ge=1)


class ListParams(types.RequestParams):
    model_config = ConfigDict(extra="allow")
    cursor: str | None = None


class SubscriptionParams(types.RequestParams, Subscription):
    model_config = ConfigDict(populate_by_name=True, extra="allow")


def _runtime(ctx: ServerRequestContext[ServerState, Any]) -> Runtime:
    state = ctx.lifespan_context
    opened = state.opened if isinstance(state, ServerState) else None
    if isinstance(opened, Unavailable):
        raise MCPError(types.INTERNAL_ERROR, tool_text(opened.error))
    if not isinstance(opened, Runtime):
        raise MCPError(types.INTERNAL_ERROR, "the ask-another runtime is not running")
    return opened


def _checked(params: Subscription) -> str | None:
    """The job id the subscription is about, if any; an error for another event name or an
    argument the event type does not take."""
    if params.name != JOB_EVENT:
        raise MCPError(NOT_FOUND, f"no event type {params.name!r}: events/list names the one "
                       f"served here, {JOB_EVENT!r}", {"kind": "event"})
    unknown = sorted(set(params.arguments) - {"job_id"})
    job_id = params.arguments.get("job_id")
    if unknown or not (job_id is None or isinstance(job_id, str)):
        raise MCPError(types.INVALID_PARAMS, f"{JOB_EVENT} takes only job_id (a string), got "
                       f"{params.arguments!r}")
    return job_id.strip() if isinstance(job_id, str) else None


async def _since(jobs: ResearchJobs, config: Config, params: Subscription, after: float,
                 job_id: str | None) -> list[JobEvent]:
    floor = after
    if params.max_age_ms is not None:
        floor = max(floor, time.time() - params.max_age_ms / 1000)
    records = [await jobs.get(job_id)] if job_id else await jobs.list(LOOKED_AT)
    return [e for e in job_events(records, config) if e.at > floor]


async def _poll(ctx: ServerRequestContext[ServerState, Any], params: BaseModel
                ) -> dict[str, Any]:
    assert isinstance(params, SubscriptionParams)
    job_id = _checked(params)
    runtime = _runtime(ctx)
    after = _after(params.cursor)
    if after is None:  # start from now
        return {"events": [], "cursor": cursor_of(time.time()), "truncated": False,
                "hasMore": False, "nextPollMs": NEXT_POLL_MS}
    try:
        found = await _since(runtime.jobs_for(user_of()), runtime.config, params, after,
                             job_id)
    except MCPError:
        raise
    except Exception as exc:  # an unknown job id, another user's
        raise MCPError(NOT_FOUND, tool_text(exc), {"kind": "subscription"}) from None
    limit = min(params.max_events or MAX_EVENTS, MAX_EVENTS)
    page = found[:limit]
    cursor = cursor_of(page[-1].at) if page else cursor_of(max(after, time.time() - 1.0))
    return {"events": [e.occurrence() for e in page], "cursor": cursor, "truncated": False,
            "hasMore": len(found) > limit, "nextPollMs": NEXT_POLL_MS}


class RawNotification(BaseModel):
    """A notification the SDK's union of server notifications does not have (the events
    extension's, a Claude Code channel event), sent through `ServerSession.send_notification`
    all the same."""

    method: str
    params: dict[str, Any]


async def _stream(ctx: ServerRequestContext[ServerState, Any], params: BaseModel
                  ) -> dict[str, Any]:
    assert isinstance(params, SubscriptionParams)
    job_id = _checked(params)
    runtime = _runtime(ctx)
    jobs = runtime.jobs_for(user_of())
    meta = {SUBSCRIPTION_ID: ctx.request_id}
    after = _after(params.cursor)
    position = time.time() if after is None else after

    async def send(method: str, body: dict[str, Any]) -> None:
        await ctx.session.send_notification(
            RawNotification(method=method, params={**body, "_meta": meta}),  # type: ignore[arg-type]
            related_request_id=ctx.request_id)

    await send("notifications/events/active", {"cursor": cursor_of(position),
                                               "truncated": False})
    quiet_since = trio.current_time()
    while True:
        try:
            found = await _since(jobs, runtime.config, params, position, job_id)
        except Exception as exc:  # the stream stays open: the spec's transient error
            await send("notifications/events/error", {"error": {
                "code": types.INTERNAL_ERROR, "message": tool_text(exc)}})
            found = []
        for event in found:
            await send("notifications/events/event", event.occurrence())
            position = event.at
            quiet_since = trio.current_time()
        if trio.current_time() - quiet_since >= HEARTBEAT:
            position = max(position, time.time() - 1.0)
            await send("notifications/events/heartbeat", {"cursor": cursor_of(position)})
            quiet_since = trio.current_time()
        await trio.sleep(LOOK_EVERY)


async def _list(ctx: ServerRequestContext[ServerState, Any], params: BaseModel
                ) -> dict[str, Any]:
    return {"events": [DESCRIPTOR]}


class EventsExtension(Extension):
    """Advertises the events extension to 2026-07-28 clients (its methods are served in both
    eras by `serve_events`)."""

    identifier = EVENTS_EXTENSION

    def methods(self) -> Sequence[MethodBinding]:
        return ()


def serve_events(server: MCPServer[Any]) -> None:
    """Serve events/list, events/poll and events/stream on the low-level server."""
    lowlevel = server._lowlevel_server
    lowlevel.add_request_handler("events/list", ListParams, _list)
    lowlevel.add_request_handler("events/poll", SubscriptionParams, _poll)
    lowlevel.add_request_handler("events/stream", SubscriptionParams, _stream)
