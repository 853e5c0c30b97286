"""The messages a research job actor answers, and what it answers with.

Calls (`ref.call(msg)`):

- `Status()` → the job's `JobRecord` as the actor holds it (written to the store already).
- `AwaitResult()` → the final `JobRecord`, once the job is completed, failed or cancelled
  (a deferred reply: the call waits; give it a timeout).
- `Cancel(tool_call_id=None)` → a `CancelOutcome`: what was stopped. With `tool_call_id`, one
  tool call of an agent job is cancelled instead (a running call fails with "cancelled by the
  user", a call waiting for permission is denied) and the answer is `Answered` or `NotWaiting`;
  the job goes on.
- `Subscribe(channel)` → None; from then on every timeline event and state change is sent to
  `channel` as a `JobUpdate` (``send_nowait``: a full channel drops updates, a closed one is
  forgotten). The channel is closed when the job ends.
- `PermissionAnswer(tool_call_id, decision)` (a `Decision`; it also answers a spend
  confirmation) / `ChoiceAnswer(tool_call_id, option_id)` →
  `Answered` when the job was waiting for exactly that, else `NotWaiting` saying why (already
  answered, expired, unknown id, not an option); a refused answer changes nothing.

Sent by the `JobOwner` (supervisor.py): `Relinquish()` (``send``): another process has taken
this job's lease; the actor stops its work and exits without writing anything.

Sent by an agent job's own work task (its Interaction, see methods/agent.py), not by other code:
`AskPermission`, `AskChoice`, `AskSpend` (deferred replies: a `Decision` / an option id or
`ChoiceFailed`),
`ToolUpdated`, `RegisterCall` (→ None) and `TextPreview` (``send``, best effort).
"""

from __future__ import annotations

from typing import Any

import msgspec

from ask_another.errors import AskAnotherError, Hint
from ask_another.interaction.protocol import CallHandle
from ask_another.interaction.types import (
    Choice,
    Decision,
    PermissionRequest,
    Question,
    SpendRequest,
    ToolUpdate,
)
from ask_another.store.jobs import JobRecord

__all__ = [
    "Answered",
    "AskChoice",
    "AskPermission",
    "AskSpend",
    "AwaitResult",
    "Cancel",
    "CancelOutcome",
    "ChoiceAnswer",
    "JobUpdate",
    "NotWaiting",
    "PermissionAnswer",
    "RegisterCall",
    "Relinquish",
    "Status",
    "Subscribe",
    "TextPreview",
    "ToolUpdated",
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
    """The user's decision on a tool call that waits for permission (agent jobs), or on the
    job's spend confirmation."""

    tool_call_id: str
    decision: Decision


class ChoiceAnswer(msgspec.Struct, frozen=True, tag=True):
    """The user's pick among the options of a pending choice (agent jobs)."""

    tool_call_id: str
    option_id: str


class Relinquish(msgspec.Struct, frozen=True, tag=True):
    """Sent (``send``) by the `JobOwner`: another process holds this job's lease now; stop the
    work and exit without writing anything (the new owner writes what happens next)."""


class NotWaiting(msgspec.Struct, frozen=True, tag=True):
    """The answer to a permission or choice answer the job was not waiting for."""

    message: str
    hint: Hint | None = None

    def error(self) -> AskAnotherError:
        return AskAnotherError(self.message, hint=self.hint)


class Answered(msgspec.Struct, frozen=True, tag=True):
    """An answer (or a tool-call cancel) the job took; `message` says what it did."""

    message: str


class AskPermission(msgspec.Struct, frozen=True, tag=True):
    """The job's turn waits for a person to allow or deny this call."""

    request: PermissionRequest


class AskChoice(msgspec.Struct, frozen=True, tag=True):
    """The job's turn waits for a person to pick one option (the ask_user tool)."""

    choice: Choice


class AskSpend(msgspec.Struct, frozen=True, tag=True):
    """The job waits for a person to confirm its estimated cost before anything is spent."""

    request: SpendRequest


class ToolUpdated(msgspec.Struct, frozen=True, tag=True):
    """A tool call of the job's turn changed state: it goes on the job's timeline."""

    update: ToolUpdate


class RegisterCall(msgspec.Struct, frozen=True, tag=True):
    """An allowed tool call runs under `handle`; `Cancel(tool_call_id)` uses it."""

    tool_call_id: str
    handle: CallHandle


class TextPreview(msgspec.Struct, frozen=True, tag=True):
    """The answer being written: `chars` so far and the last few of them (coalesced)."""

    chars: int
    tail: str


class CancelOutcome(msgspec.Struct, frozen=True, kw_only=True):
    """What a cancel did. `cancelled` is False when the job had already finished (`record`
    then shows how); `remote` says what happened to the provider's side, when there is one."""

    cancelled: bool
    record: JobRecord
    remote: str | None = None


class JobUpdate(msgspec.Struct, frozen=True, kw_only=True):
    """One update sent to subscribers: the job's state after a step or a state change, with
    the questions it waits on a person for (every update carries them)."""

    job_id: str
    status: str
    step: str | None
    elapsed: float
    detail: dict[str, Any] = msgspec.field(default_factory=dict)
    waiting_for: tuple[Question, ...] = ()
