"""What the console shows of the questions jobs wait for: the one place that reads them.

A job's open permission requests, choices and spend confirmations are in its record's
``waiting_for`` detail (research/questions.py writes it; the store has it, so a job of any
process on the home or any node is seen). `pending_of` turns one record's into `Pending`
values; everything else in the console reads those.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from ask_another.research import ResearchJobs
from ask_another.store.jobs import JobRecord
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

    @property
    def url(self) -> str:
        """Its approval page, under the console's root."""
        return f"/approvals/{self.job.id}/{self.tool_call_id}"

    def standing_for(self, user: User) -> bool:
        """Whether `user` may answer it *always* (a standing rule for its tool): a permission
        request of their own job."""
        return self.kind == "permission" and self.job.user_id == user.id

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
    for entry in record.detail.get("waiting_for") or []:
        if not isinstance(entry, dict):
            continue
        if entry.get("kind") == "choice":
            options = tuple((str(o.get("id")), str(o.get("label")))
                            for o in entry.get("options") or [] if isinstance(o, dict))
            found.append(Pending(record, "choice", str(entry.get("tool_call_id")), "ask_user",
                                 {}, str(entry.get("expires_at", "")),
                                 prompt=str(entry.get("prompt", "")), options=options))
            continue
        tool = str(entry.get("tool"))
        arguments = entry.get("arguments")
        found.append(Pending(record, "spend" if tool == SPEND_TOOL else "permission",
                             str(entry.get("tool_call_id")), tool,
                             arguments if isinstance(arguments, dict) else {},
                             str(entry.get("expires_at", ""))))
    return found


async def pending_questions(jobs: ResearchJobs) -> list[Pending]:
    """Every question the jobs `jobs` may see wait for, oldest job first."""
    # Each unfinished job read again through `get`: from its actor when it runs here, whose
    # questions the store has only once the actor's next write lands.
    records = [await jobs.get(r.id) for r in await jobs.list() if not r.finished]
    return [p for r in reversed(records) for p in pending_of(r)]
