"""Standing permission rules: what a person answered with *always allow* or *always deny* for
a tool and one target of it, kept per user, so their later agent jobs are not asked about it
again.

One row per (user, tool, scope); the scope is `policy.rule_scope` of the call the answer was
given on (the host of a read, the engine of a search, the exact arguments of any other tool),
so an *always allow* of one read covers that host only; a rule made before rules were scoped
has the scope `ANY_SCOPE` and covers every call of its tool. The local user's rows have the
principal ``''`` (a primary key cannot hold NULL). Each row says when it was made and through
which face. A rule applies only where the configured policy would ask a person
(`Policy.with_standing`): it never opens what `ASK_ANOTHER_PERMISSIONS` denies, nor a read of
the user's own hosts (`internal`, `after_internal`), which are asked each time.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Literal

from ask_another.policy import scope_text
from ask_another.store.db import Database

__all__ = ["Standing", "StandingRule", "remove_rule", "rules_of", "set_rule"]

Standing = Literal["allow", "deny"]


@dataclass(frozen=True, slots=True)
class StandingRule:
    tool: str
    rule: Standing
    created_at: float
    scope: str
    face: str | None = None  # where it was made ("console"; None: before faces were kept)

    @property
    def covers(self) -> str:
        """Its scope as people read it."""
        return scope_text(self.scope)


def _principal(user_id: str | None) -> str:
    return user_id if user_id is not None else ""


async def set_rule(db: Database, user_id: str | None, tool: str, rule: Standing, scope: str,
                   face: str) -> None:
    """Store (or replace) the standing rule of `user_id` (None: the local user) for `tool`'s
    calls of `scope`, made through `face`."""
    await db.execute(
        "INSERT INTO standing_rules (principal, tool, scope, rule, created_at, face) "
        "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (principal, tool, scope) DO UPDATE SET "
        "rule = excluded.rule, created_at = excluded.created_at, face = excluded.face",
        (_principal(user_id), tool, scope, rule, time.time(), face))


async def remove_rule(db: Database, user_id: str | None, tool: str, scope: str) -> bool:
    """Revoke it; False when there was none."""
    changed = await db.execute(
        "DELETE FROM standing_rules WHERE principal = ? AND tool = ? AND scope = ?",
        (_principal(user_id), tool, scope))
    return changed > 0


async def rules_of(db: Database, user_id: str | None) -> list[StandingRule]:
    """The user's standing rules, by tool and scope."""
    rows = await db.fetchall("SELECT tool, scope, rule, created_at, face FROM standing_rules "
                             "WHERE principal = ? ORDER BY tool, scope", (_principal(user_id),))
    return [StandingRule(r["tool"], r["rule"], r["created_at"], r["scope"], r["face"])
            for r in rows]
