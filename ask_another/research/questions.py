"""What an agent job waits for: open permission requests and choices, and how each one ended.

Owned by the job actor and touched only in its message loop. A question is open from the turn's
`AskPermission` / `AskChoice` until the first of: an answer, its expiry, a cancel of that tool
call, or the end of the job. Exactly one of them settles it; every later answer is refused with
a message that says how it was settled, and changes nothing.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from ask_another.interaction.types import (
    Allow,
    Choice,
    ChoiceFailed,
    Decision,
    Deny,
    PermissionRequest,
)
from supervisors import Caller, TaskHandle

__all__ = ["Expired", "OpenQuestion", "Questions"]

Kind = Literal["permission", "choice"]


@dataclass(frozen=True, slots=True)
class Expired:
    """What a question's timer task returns when the time is up."""

    tool_call_id: str


@dataclass(slots=True)
class OpenQuestion:
    kind: Kind
    question: PermissionRequest | Choice
    caller: Caller
    expires_at: float  # wall clock, for people
    timer: TaskHandle | None = None

    def describe(self) -> dict[str, Any]:
        """The question as check_research and progress notifications show it."""
        expires = datetime.fromtimestamp(self.expires_at, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        if isinstance(self.question, PermissionRequest):
            return {"kind": "permission", "tool_call_id": self.question.tool_call_id,
                    "tool": self.question.tool, "server": self.question.server,
                    "class": self.question.class_, "arguments": self.question.arguments,
                    "expires_at": expires}
        return {"kind": "choice", "tool_call_id": self.question.tool_call_id,
                "prompt": self.question.prompt,
                "options": [{"id": o.id, "label": o.label} for o in self.question.options],
                "expires_at": expires}


@dataclass
class Questions:
    open: dict[str, OpenQuestion] = field(default_factory=dict)
    settled: dict[str, str] = field(default_factory=dict)
    """tool_call_id -> how its question ended ("allowed", "expired", ...), for late answers."""

    def add(self, question: PermissionRequest | Choice, caller: Caller, timeout: float
            ) -> OpenQuestion:
        kind: Kind = "permission" if isinstance(question, PermissionRequest) else "choice"
        entry = OpenQuestion(kind, question, caller, time.time() + timeout)
        self.open[question.tool_call_id] = entry
        return entry

    def describe(self) -> list[dict[str, Any]]:
        return [q.describe() for q in self.open.values()]

    def refusal(self, job_id: str, tool_call_id: str, kind: Kind) -> str | None:
        """Why an answer of `kind` for `tool_call_id` cannot be taken, or None if it can."""
        entry = self.open.get(tool_call_id)
        if entry is not None and entry.kind == kind:
            return None
        if entry is not None:
            other = "answer_choice" if entry.kind == "choice" else "answer_permission"
            return (f"tool call {tool_call_id!r} of job {job_id} waits for a {entry.kind}, not "
                    f"a {kind}: use {other}")
        how = self.settled.get(tool_call_id)
        if how is not None:
            return (f"tool call {tool_call_id!r} of job {job_id} is no longer waiting: it was "
                    f"already {how}. This answer changes nothing")
        waiting = ", ".join(repr(k) for k in self.open) or "nothing"
        return (f"job {job_id} has no question for tool call {tool_call_id!r} (it waits for "
                f"{waiting}). This answer changes nothing")

    def settle(self, tool_call_id: str, answer: Decision | str | ChoiceFailed, how: str) -> bool:
        """Reply to the waiting turn with `answer`; False if it was no longer open."""
        entry = self.open.pop(tool_call_id, None)
        if entry is None:
            return False
        if entry.timer is not None:
            entry.timer.cancel()
        self.settled[tool_call_id] = how
        entry.caller.reply(answer)
        return True

    def expire(self, tool_call_id: str) -> bool:
        entry = self.open.get(tool_call_id)
        if entry is None:
            return False
        answer = Deny("expired") if entry.kind == "permission" else ChoiceFailed("expired")
        return self.settle(tool_call_id, answer, "expired without an answer")

    def close_all(self) -> None:
        """The job ended: nobody will answer what is still open."""
        for tool_call_id, entry in list(self.open.items()):
            answer = Deny("rejected") if entry.kind == "permission" else ChoiceFailed("no_answer")
            self.settle(tool_call_id, answer, "closed when the job ended")


def decision_of(text: str) -> Decision | None:
    """`allow` / `deny` (any case, surrounding blanks ignored) as a Decision; None otherwise."""
    match text.strip().lower():
        case "allow":
            return Allow()
        case "deny":
            return Deny("rejected")
    return None
