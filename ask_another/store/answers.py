"""The audit of every answer a person gave to a job's question: who, through which face, when,
what, the reason, and the standing rule it made. One row per answer, written once and never
changed: nothing here updates or deletes a row, and no page of the console offers to. Every
face's answer is written by `ResearchJobs.answer_permission` / `answer_choice` once the job took
it (research/jobs.py: the console, the MCP tools, form and URL elicitation, MCP Tasks' input
requests, the terminal, an embedding's own call), and each call a standing answer decided
without asking by the agent method (face ``standing rule``, the rule applied in `rule`).

Read per job (`answers_of`: the job's page, `check_research`) and for export (`answers_for`:
every answer to the jobs a user may see, an admin's the team's, oldest first).
"""

from __future__ import annotations

import time
from typing import Any

import msgspec

from ask_another.store.db import Database
from ask_another.store.scope import visible
from ask_another.users import User

__all__ = ["STANDING_RULE", "Answer", "answered", "answers_for", "answers_of", "record_answer"]

STANDING_RULE = "standing rule"
"""The face of a call a person's standing answer decided without asking them."""


class Answer(msgspec.Struct, frozen=True, kw_only=True):
    job_id: str
    at: float
    principal: str | None  # who answered (None: the local user)
    face: str  # "console", "mcp", "elicitation", "task", "terminal", "library", "standing rule"
    tool_call_id: str
    tool: str
    answer: str  # "allow", "deny", "always-allow", "always-deny", "option:ID"
    reason: str | None = None
    rule: str | None = None  # the standing rule it made or, face "standing rule", applied


_COLUMNS = "job_id, at, principal, face, tool_call_id, tool, answer, reason, rule"


async def record_answer(db: Database, answer: Answer) -> None:
    await db.execute(
        f"INSERT INTO job_answers ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (answer.job_id, answer.at, answer.principal, answer.face, answer.tool_call_id,
         answer.tool, answer.answer, answer.reason, answer.rule))


def answered(job_id: str, user: User, face: str, tool_call_id: str, tool: str, answer: str,
             reason: str | None = None, rule: str | None = None) -> Answer:
    """An `Answer` given now by `user`."""
    return Answer(job_id=job_id, at=time.time(), principal=user.id, face=face,
                  tool_call_id=tool_call_id, tool=tool, answer=answer, reason=reason, rule=rule)


def _answer(row: Any) -> Answer:
    return Answer(**{c: row[c] for c in _COLUMNS.split(", ")})


async def answers_of(db: Database, job_id: str) -> list[Answer]:
    """The answers to `job_id`'s questions, oldest first (its visibility is the caller's)."""
    rows = await db.fetchall(f"SELECT {_COLUMNS} FROM job_answers WHERE job_id = ? ORDER BY id",
                             (job_id,))
    return [_answer(r) for r in rows]


async def answers_for(db: Database, user: User, limit: int = 100_000) -> list[Answer]:
    """The answers to every job `user` may see (an admin: the team's), oldest first."""
    seen, params = visible(user, "j.user_id")
    columns = ", ".join(f"a.{c}" for c in _COLUMNS.split(", "))
    rows = await db.fetchall(
        f"SELECT {columns} FROM job_answers a JOIN research_jobs j ON j.id = a.job_id "
        f"WHERE {seen} ORDER BY a.id LIMIT ?", (*params, limit))
    return [_answer(r) for r in rows]
