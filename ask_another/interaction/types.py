"""The values that cross the Interaction boundary, field for field as in Mead's behaviour.

They are frozen msgspec Structs so that an agent host can `match` on them, encode them to JSON for
its own UI, and trust that nobody changes them behind its back.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

import msgspec

from ask_another.policy import CallClass as CallClass

ToolClass = Literal["read", "effect"]
"""`read` tools only look (read an article); `effect` tools change something outside the turn."""


ToolStatus = Literal["pending", "in_progress", "completed", "failed"]


class PermissionRequest(msgspec.Struct, frozen=True, kw_only=True):
    """What the router asks before running one tool call."""

    tool_call_id: str
    tool: str
    server: str
    # `class` is a Python keyword; the attribute is `class_` and the wire name stays `class`.
    class_: CallClass = msgspec.field(name="class")
    arguments: dict[str, object]


class ToolUpdate(msgspec.Struct, frozen=True, kw_only=True):
    """One step of a tool call's lifecycle: pending, in_progress, then completed or failed."""

    tool_call_id: str
    title: str
    status: ToolStatus
    current_step: str | None = None
    progress: float | None = None
    cancellable: bool = False


class ChoiceOption(msgspec.Struct, frozen=True):
    id: str
    label: str


class Choice(msgspec.Struct, frozen=True, kw_only=True):
    """A multiple-choice question put to the person by the `ask_user` tool."""

    tool_call_id: str
    prompt: str
    options: list[ChoiceOption]


class Allow(msgspec.Struct, frozen=True, tag="allow"):
    """The call may run."""


class Deny(msgspec.Struct, frozen=True, tag="deny"):
    """The call must not run; `reason` says whether a person said no or nobody answered in time,
    and `message` is what the person said with their no, which the model is told (a console's
    reason field, Claude Code's "no, and tell it what to do instead")."""

    reason: Literal["rejected", "expired"] = "rejected"
    message: str | None = None


Decision = Allow | Deny

ALLOW = Allow()


class ChoiceFailed(msgspec.Struct, frozen=True):
    """`ask_choice` got no option: the time ran out, or there was nobody to ask."""

    reason: Literal["expired", "no_answer"]


class SpendRequest(msgspec.Struct, frozen=True, kw_only=True):
    """A research job's estimated cost, above `ASK_ANOTHER_CONFIRM_USD`: a person confirms it
    before anything is spent (a `Question` of kind ``spend``)."""

    estimated_cost: str  # as people read it ("about $1.20"; costs.py)
    confirm_above_usd: float
    model: str


QuestionKind = Literal["permission", "choice", "spend"]

_REQUESTS: dict[str, type[PermissionRequest | Choice | SpendRequest]] = {
    "permission": PermissionRequest, "choice": Choice, "spend": SpendRequest}


class Question(msgspec.Struct, frozen=True, kw_only=True):
    """One question a research job waits on a person for, the same value from the job's actor
    to every face (which words it): a tool call's permission, an `ask_user` choice, or a spend
    confirmation. `expires_at` is wall-clock Unix seconds: no answer by then means deny (or, for
    a choice, no answer). A permission or a spend confirmation is answered with a `Decision`
    (`answer_permission`), a choice with an option id (`answer_choice`)."""

    kind: QuestionKind
    tool_call_id: str
    request: PermissionRequest | Choice | SpendRequest
    expires_at: float
    asked_at: float | None = None  # when it was asked (None: a question stored before it)

    @property
    def expires_text(self) -> str:
        """`expires_at` as people read it (UTC)."""
        return datetime.fromtimestamp(self.expires_at, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def question_of(raw: dict[str, Any]) -> Question:
    """A `Question` from its JSON form (`msgspec.to_builtins`); its `kind` says which request it
    holds. Raises `msgspec.ValidationError` (or `KeyError`) for anything else."""
    kind = raw["kind"]
    request = msgspec.convert(raw["request"], _REQUESTS[kind], from_attributes=False)
    asked = raw.get("asked_at")
    return Question(kind=kind, tool_call_id=msgspec.convert(raw["tool_call_id"], str),
                    request=request, expires_at=msgspec.convert(raw["expires_at"], float),
                    asked_at=None if asked is None else msgspec.convert(asked, float))
