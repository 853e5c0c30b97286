"""The messages a research job actor answers, and what it answers with.

Calls (`ref.call(msg)`):

- `Status()` → the job's `JobRecord` as the actor holds it (written to the store already).
- `AwaitResult()` → the final `JobRecord`, once the job is completed, failed or cancelled
  (a deferred reply: the call waits; give it a timeout).
- `Cancel(tool_call_id=None)` → a `CancelOutcome`: what was stopped. `tool_call_id` (for the
  permission issue) cancels one pending tool call of an agent job instead of the job; for now
  there are none, so it is refused.
- `Subscribe(channel)` → None; from then on every timeline event and state change is sent to
  `channel` as a `JobUpdate` (``send_nowait``: a full channel drops updates, a closed one is
  forgotten). The channel is closed when the job ends.
- `PermissionAnswer(tool_call_id, decision)` / `ChoiceAnswer(tool_call_id, option_id)` →
  a `NotWaiting` until agent jobs exist (the next issue fills them in).
"""

from __future__ import annotations

from typing import Any

import msgspec

from ask_another.store.jobs import JobRecord

__all__ = [
    "AwaitResult",
    "Cancel",
    "CancelOutcome",
    "ChoiceAnswer",
    "JobUpdate",
    "NotWaiting",
    "PermissionAnswer",
    "Status",
    "Subscribe",
]


class Status(msgspec.Struct, frozen=True, tag=True):
    """Ask for the job's current record."""


class AwaitResult(msgspec.Struct, frozen=True, tag=True):
    """Wait for the job's final record."""


class Cancel(msgspec.Struct, frozen=True, tag=True):
    """Cancel the job (or, with `tool_call_id`, one pending tool call of an agent job)."""

    tool_call_id: str | None = None


class Subscribe(msgspec.Struct, frozen=True, tag=True):
    """Send every update to `channel` (a `trio.MemorySendChannel[JobUpdate]`)."""

    channel: Any


class PermissionAnswer(msgspec.Struct, frozen=True, tag=True):
    """The user's decision on a tool call that waits for permission (agent jobs)."""

    tool_call_id: str
    decision: str


class ChoiceAnswer(msgspec.Struct, frozen=True, tag=True):
    """The user's pick among the options of a pending choice (agent jobs)."""

    tool_call_id: str
    option_id: str


class NotWaiting(msgspec.Struct, frozen=True, tag=True):
    """The answer to a permission or choice answer the job was not waiting for."""

    message: str


class CancelOutcome(msgspec.Struct, frozen=True, kw_only=True):
    """What a cancel did. `cancelled` is False when the job had already finished (`record`
    then shows how); `remote` says what happened to the provider's side, when there is one."""

    cancelled: bool
    record: JobRecord
    remote: str | None = None


class JobUpdate(msgspec.Struct, frozen=True, kw_only=True):
    """One update sent to subscribers: the job's state after a step or a state change."""

    job_id: str
    status: str
    step: str | None
    elapsed: float
    detail: dict[str, Any] = msgspec.field(default_factory=dict)
