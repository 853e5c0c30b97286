"""What a job waits for, as a task puts it to its client: the one place its questions become
input requests (2026-07-28) and elicitations tied to the task (2025-11-25), the delivery of a
person's answer, and `Claims`, which keeps each question asked once."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import mcp_types as types

from ask_another.errors import AskAnotherError
from ask_another.interaction.types import ALLOW, Deny
from ask_another.logs import get_logger
from ask_another.research import ResearchJobs
from ask_another.server.tasks.job import RELATED_TASK, waiting_questions
from ask_another.server.tools.attached import asked_of
from ask_another.store.jobs import JobRecord

__all__ = ["Asked", "Claims", "answer", "elicitation", "open_questions"]


log = get_logger("ask_another.server.tasks")


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
    for waiting in waiting_questions(record):
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
                                         ALLOW if allowed else Deny("rejected"), face="task")
        elif isinstance(value.get("option_id"), str):
            await jobs.answer_choice(job_id, asked.tool_call_id, value["option_id"],
                                     face="task")
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
