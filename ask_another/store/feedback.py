"""The feedback table: what clients tell us through the `feedback` tool, with a timestamp."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from ask_another.store.db import Database


@dataclass(frozen=True, slots=True)
class FeedbackRecord:
    id: int
    created_at: str  # ISO 8601, UTC
    issue: str
    tool_name: str | None


async def add_feedback(db: Database, issue: str, tool_name: str | None = None) -> FeedbackRecord:
    """Append one piece of feedback; returns it as stored."""
    created_at = datetime.now(UTC).isoformat(timespec="seconds")
    row_id = await db.execute(
        "INSERT INTO feedback (created_at, tool_name, issue) VALUES (?, ?, ?)",
        (created_at, tool_name, issue),
    )
    return FeedbackRecord(id=row_id, created_at=created_at, issue=issue, tool_name=tool_name)


async def list_feedback(db: Database, limit: int = 100) -> list[FeedbackRecord]:
    """The most recent feedback first."""
    rows = await db.fetchall(
        "SELECT id, created_at, issue, tool_name FROM feedback ORDER BY id DESC LIMIT ?", (limit,)
    )
    return [FeedbackRecord(id=r["id"], created_at=r["created_at"], issue=r["issue"],
                           tool_name=r["tool_name"]) for r in rows]
