"""The feedback table: what clients tell us through the `feedback` tool, with a timestamp."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from ask_another.store.db import Database
from ask_another.store.scope import visible
from ask_another.users import LOCAL_USER, User


@dataclass(frozen=True, slots=True)
class FeedbackRecord:
    id: int
    created_at: str  # ISO 8601, UTC
    issue: str
    tool_name: str | None
    user_id: str | None = None  # who sent it (None: the local user; users.py)


async def add_feedback(db: Database, issue: str, tool_name: str | None = None,
                       user_id: str | None = None) -> FeedbackRecord:
    """Append one piece of feedback from `user_id` (None: the local user); returns it as
    stored."""
    created_at = datetime.now(UTC).isoformat(timespec="seconds")
    row_id = await db.insert(
        "INSERT INTO feedback (created_at, tool_name, issue, user_id) VALUES (?, ?, ?, ?) "
        "RETURNING id",
        (created_at, tool_name, issue, user_id),
    )
    return FeedbackRecord(id=row_id, created_at=created_at, issue=issue, tool_name=tool_name,
                          user_id=user_id)


async def list_feedback(db: Database, limit: int = 100, user: User = LOCAL_USER
                        ) -> list[FeedbackRecord]:
    """The most recent feedback `user` may see first (an admin: everyone's)."""
    seen, params = visible(user)
    rows = await db.fetchall(
        f"SELECT id, created_at, issue, tool_name, user_id FROM feedback WHERE {seen} "
        "ORDER BY id DESC LIMIT ?", (*params, limit)
    )
    return [FeedbackRecord(id=r["id"], created_at=r["created_at"], issue=r["issue"],
                           tool_name=r["tool_name"], user_id=r["user_id"]) for r in rows]
