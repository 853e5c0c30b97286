"""Standing permission rules: what a person answered with *always allow* or *always deny* for
a tool, kept per user, so their later agent jobs are not asked about it again.

One row per (user, tool); the local user's rows have the principal ``''`` (a primary key cannot
hold NULL). A rule applies only where the configured policy would ask a person
(`Policy.with_standing`): it never opens what `ASK_ANOTHER_PERMISSIONS` denies, nor a read of
the user's own hosts (`internal`, `after_internal`), which are asked each time.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Literal

from ask_another.store.db import Database

__all__ = ["Standing", "StandingRule", "remove_rule", "rules_of", "set_rule"]

Standing = Literal["allow", "deny"]


@dataclass(frozen=True, slots=True)
class StandingRule:
    tool: str
    rule: Standing
    created_at: float


def _principal(user_id: str | None) -> str:
    return user_id if user_id is not None else ""


async def set_rule(db: Database, user_id: str | None, tool: str, rule: Standing) -> None:
    """Store (or replace) the standing rule of `user_id` (None: the local user) for `tool`."""
    await db.execute(
        "INSERT INTO permission_rules (principal, tool, rule, created_at) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (principal, tool) DO UPDATE SET rule = excluded.rule, "
        "created_at = excluded.created_at",
        (_principal(user_id), tool, rule, time.time()))


async def remove_rule(db: Database, user_id: str | None, tool: str) -> bool:
    """Revoke it; False when there was none."""
    changed = await db.execute("DELETE FROM permission_rules WHERE principal = ? AND tool = ?",
                               (_principal(user_id), tool))
    return changed > 0


async def rules_of(db: Database, user_id: str | None) -> list[StandingRule]:
    """The user's standing rules, by tool."""
    rows = await db.fetchall("SELECT tool, rule, created_at FROM permission_rules "
                             "WHERE principal = ? ORDER BY tool", (_principal(user_id),))
    return [StandingRule(r["tool"], r["rule"], r["created_at"]) for r in rows]
