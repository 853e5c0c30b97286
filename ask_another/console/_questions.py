"""What the console shows of the questions jobs wait for: the one place that reads them.

A job's open permission requests, choices and spend confirmations are its record's
`waiting_for`, `Question` values (research/questions.py keeps them; the store has them, so a job
of any process on the home or any node is seen, as soon as its actor has written them: a
question is written the moment it is asked). `pending_of` words one record's as `Pending`
values for the templates; everything else in the console reads those.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from ask_another.interaction.types import Choice, PermissionRequest, SpendRequest
from ask_another.policy import rule_scope, scope_text
from ask_another.research import ResearchJobs, UnknownJob, job_name
from ask_another.store.jobs import JobRecord, JobStore
from ask_another.users import User

__all__ = ["SPEND_TOOL", "Pending", "pending_of", "pending_questions"]

SPEND_TOOL = "confirm_spend"


@dataclass(frozen=True, slots=True)
class Pending:
    """One question a job waits for a person to answer."""

    job: JobRecord
    kind: Literal["permission", "choice", "spend"]
    tool_call_id: str
    tool: str  # the tool asked for (a permission), "ask_user" (a choice), "confirm_spend"
    arguments: dict[str, Any]
    expires_at: str
    prompt: str = ""
    options: tuple[tuple[str, str], ...] = ()  # a choice's (id, label) pairs
    expires: float = 0.0  # expires_at, in Unix seconds
    asked: float | None = None  # when it was asked (None: a question stored before that)

    @property
    def url(self) -> str:
        """Its approval page, under the console's root."""
        return f"/approvals/{self.job.id}/{self.tool_call_id}"

    def standing_for(self, user: User) -> bool:
        """Whether `user` may answer it *always* (a standing rule for its tool): a permission
        request of their own job."""
        return self.kind == "permission" and self.job.user_id == user.id

    @property
    def scope(self) -> str:
        """What an *always* answer of it would cover (policy.py's `rule_scope`)."""
        return rule_scope(self.tool, self.arguments)

    @property
    def covers(self) -> str:
        return scope_text(self.scope)

    @property
    def read_url(self) -> str | None:
        """The address a read asks for (read_article), to show as a link."""
        url = self.arguments.get("url")
        return url if isinstance(url, str) and url.startswith(("http://", "https://")) else None


def pending_of(record: JobRecord) -> list[Pending]:
    """The questions `record` waits for (none once it has finished)."""
    if record.finished:
        return []
    found = []
    for q in record.waiting_for:
        match q.request:
            case Choice(prompt=prompt, options=options):
                found.append(Pending(record, "choice", q.tool_call_id, "ask_user", {},
                                     q.expires_text, prompt=prompt,
                                     options=tuple((o.id, o.label) for o in options),
                                     expires=q.expires_at, asked=q.asked_at))
            case SpendRequest() as spend:
                found.append(Pending(record, "spend", q.tool_call_id, SPEND_TOOL,
                                     {"estimated_cost": spend.estimated_cost,
                                      "confirm_above_usd": spend.confirm_above_usd,
                                      "model": spend.model}, q.expires_text,
                                     expires=q.expires_at, asked=q.asked_at))
            case PermissionRequest(tool=tool, arguments=arguments):
                found.append(Pending(record, "permission", q.tool_call_id, tool,
                                     dict(arguments), q.expires_text,
                                     expires=q.expires_at, asked=q.asked_at))
    return found


async def pending_questions(jobs: ResearchJobs, store: JobStore) -> list[Pending]:
    """Every question the jobs `jobs` may see wait for, oldest job first: the jobs the store
    finds waiting (`JobStore.waiting`, however many jobs exist) and the jobs running in this
    process (whose newest question the store has only once their actor's write lands), each
    read through `get`, from its actor when it runs here, so a question answered a moment ago
    is gone and one asked a moment ago is there."""
    ids = {r.id: None for r in await store.waiting(jobs.user)}
    for name in jobs.registry.names():
        if isinstance(name, tuple) and len(name) == 2 and name == job_name(str(name[1])):
            ids.setdefault(str(name[1]))
    records = []
    for job_id in ids:
        try:
            records.append(await jobs.get(job_id))
        except UnknownJob:  # another user's, running here
            continue
    records.sort(key=lambda r: r.created_at)
    return [p for r in records for p in pending_of(r)]
