"""What a job waits for: open permission requests, choices and its spend confirmation, and how
each one ended.

Owned by the job actor and touched only in its message loop. Each open question is a `Question`
value (interaction/types.py), the one shape every face reads. A question is open from the
`AskPermission` / `AskChoice` / `AskSpend` until the first of: an answer, its expiry, a cancel of
that tool call, or the end of the job. Exactly one of them settles it; every later answer is
refused with a message that says how it was settled, and changes nothing.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Literal

from ask_another.interaction.types import (
    Choice,
    ChoiceFailed,
    Decision,
    Deny,
    PermissionRequest,
    Question,
    QuestionKind,
    SpendRequest,
)
from ask_another.research.messages import NotWaiting
from supervisors import Caller, TaskHandle

__all__ = ["AnswerKind", "Expired", "OpenQuestion", "Questions"]

AnswerKind = Literal["permission", "choice"]
"""What an answer is: a `Decision` (a permission or a spend confirmation) or an option id."""

_ANSWERS: dict[QuestionKind, AnswerKind] = {
    "permission": "permission", "spend": "permission", "choice": "choice"}
_NAMES: dict[QuestionKind, str] = {
    "permission": "permission", "spend": "spend confirmation", "choice": "choice"}


@dataclass(frozen=True, slots=True)
class Expired:
    """What a question's timer task returns when the time is up."""

    tool_call_id: str


@dataclass(slots=True)
class OpenQuestion:
    question: Question
    caller: Caller
    timer: TaskHandle | None = None


@dataclass
class Questions:
    open: dict[str, OpenQuestion] = field(default_factory=dict)
    settled: dict[str, str] = field(default_factory=dict)
    """tool_call_id -> how its question ended ("allowed", "expired", ...), for late answers."""

    def add(self, request: PermissionRequest | Choice | SpendRequest, tool_call_id: str,
            caller: Caller, timeout: float) -> OpenQuestion:
        kind: QuestionKind = ("permission" if isinstance(request, PermissionRequest)
                              else "choice" if isinstance(request, Choice) else "spend")
        now = time.time()
        entry = OpenQuestion(Question(kind=kind, tool_call_id=tool_call_id, request=request,
                                      expires_at=now + timeout, asked_at=now), caller)
        self.open[tool_call_id] = entry
        return entry

    def waiting(self) -> list[Question]:
        """The open questions, oldest first."""
        return [entry.question for entry in self.open.values()]

    def refusal(self, job_id: str, tool_call_id: str, kind: AnswerKind) -> NotWaiting | None:
        """Why an answer of `kind` for `tool_call_id` cannot be taken, or None if it can."""
        entry = self.open.get(tool_call_id)
        if entry is not None and _ANSWERS[entry.question.kind] == kind:
            return None
        if entry is not None:
            return NotWaiting(f"tool call {tool_call_id!r} of job {job_id} waits for a "
                              f"{_NAMES[entry.question.kind]}, not a {kind}",
                              hint="answer_choice" if entry.question.kind == "choice"
                              else "answer_permission")
        how = self.settled.get(tool_call_id)
        if how is not None:
            return NotWaiting(f"tool call {tool_call_id!r} of job {job_id} is no longer "
                              f"waiting: it was already {how}. This answer changes nothing")
        waiting = ", ".join(repr(k) for k in self.open) or "nothing"
        return NotWaiting(f"job {job_id} has no question for tool call {tool_call_id!r} (it "
                          f"waits for {waiting}). This answer changes nothing")

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
        answer = (ChoiceFailed("expired") if entry.question.kind == "choice"
                  else Deny("expired"))
        return self.settle(tool_call_id, answer, "expired without an answer")

    def close_all(self) -> None:
        """The job ended: nobody will answer what is still open."""
        for tool_call_id, entry in list(self.open.items()):
            answer = (ChoiceFailed("no_answer") if entry.question.kind == "choice"
                      else Deny("rejected"))
            self.settle(tool_call_id, answer, "closed when the job ended")
