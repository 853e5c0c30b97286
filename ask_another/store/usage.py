"""The usage ledger: one row per provider call, with what it cost and what it served.

Every provider call that returned (a completion, each model of a consensus and its synthesis,
each step of a research job, a web search) is one row: when (`at`, Unix seconds), what kind of
call (`kind`), the model, tokens in and out, the price in USD, and what it served: the tool
(`completion`, `consensus`, `start_research`, ...), the research job or the conversation.

`cost_usd` is NULL when the price is unknown (litellm has no price for the model): unknown is a
value of its own, never 0, and every total keeps the count of unknown-priced calls beside the
sum of the known ones. A call that failed before the provider answered costs nothing and is
not recorded.

Each row has a `call_id`, unique in the table (migration 9): random for a call made once, the
provider's own id where two attempts or two nodes may see the same call (a Gemini interaction's
id). A row whose call id is already there is not written again (`ON CONFLICT DO NOTHING`), so a
write retried after a lost connection, or a job taken over after its first owner recorded the
call, never counts a call twice.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field
from typing import Literal

from ask_another.costs import cost_text
from ask_another.store.db import Connection, Database, Row
from ask_another.store.scope import own, visible
from ask_another.users import LOCAL_USER, User

__all__ = ["LOCAL_NAME", "Kind", "Spent", "Totals", "UsageRow", "record_usage", "spent_since",
           "usage_insert", "usage_totals"]

Kind = Literal["completion", "consensus", "synthesis", "research", "search"]


@dataclass(frozen=True, slots=True)
class UsageRow:
    kind: Kind
    model: str
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cost_usd: float | None = None  # None: the price is unknown
    tool: str | None = None
    job_id: str | None = None
    conversation_id: str | None = None
    at: float | None = None  # None: now
    user_id: str | None = None  # whose call it was (None: the local user; users.py)
    # The provider call's id, unique in the ledger: a row is written once, whoever retries it.
    call_id: str = field(default_factory=lambda: secrets.token_hex(12))


@dataclass(frozen=True, slots=True)
class Spent:
    """A total: the sum of the known prices, the calls of unknown price, and all the calls."""

    known_usd: float = 0.0
    unknown_calls: int = 0
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def describe(self) -> str:
        """`$0.001200`, `$0.001200 + 2 calls of unknown price`, or `cost unknown` (never `$0`
        for calls whose price nobody knows; see costs.py)."""
        return cost_text(self.known_usd, self.unknown_calls, self.calls)


@dataclass(frozen=True, slots=True)
class Totals:
    since: float
    until: float
    total: Spent
    by_day: dict[str, Spent]  # "YYYY-MM-DD" (UTC)
    by_model: dict[str, Spent]
    by_tool: dict[str, Spent]
    # Only for an admin, who sees everyone's rows: by user name, LOCAL_NAME for the local user.
    by_user: dict[str, Spent] = field(default_factory=dict)


def usage_insert(row: UsageRow) -> tuple[str, tuple[object, ...]]:
    """The INSERT of one row and its parameters, for a caller that writes it together with
    other statements in one transaction (a conversation's turn, store/conversations.py)."""
    return (
        "INSERT INTO usage (at, kind, model, prompt_tokens, completion_tokens, cost_usd, tool, "
        "job_id, conversation_id, user_id, call_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (call_id) DO NOTHING",
        (row.at if row.at is not None else time.time(), row.kind, row.model, row.prompt_tokens,
         row.completion_tokens, row.cost_usd, row.tool, row.job_id, row.conversation_id,
         row.user_id, row.call_id),
    )


async def record_usage(db: Database, row: UsageRow) -> int:
    """Append one row (nothing when its call id is recorded already); returns its id."""
    sql, params = usage_insert(row)

    def go(conn: Connection) -> int:
        with conn:
            written = conn.execute(sql + " RETURNING id", params).fetchone()
            if written is None:  # this call's row was written before
                written = conn.execute("SELECT id FROM usage WHERE call_id = ?",
                                       (row.call_id,)).fetchone()
            return int(written[0])
    return await db.run(go)


def _spent(row: Row) -> Spent:
    return Spent(known_usd=float(row["known"] or 0.0), unknown_calls=int(row["unknown"] or 0),
                 calls=int(row["calls"] or 0), prompt_tokens=int(row["tin"] or 0),
                 completion_tokens=int(row["tout"] or 0))


_SUMS = ("SUM(cost_usd) AS known, SUM(CASE WHEN cost_usd IS NULL THEN 1 ELSE 0 END) AS unknown, "
         "COUNT(*) AS calls, SUM(prompt_tokens) AS tin, SUM(completion_tokens) AS tout")
_UTC_DAY = {  # the UTC day of `at` as YYYY-MM-DD: the one expression the backends write apart
    "sqlite": "date(at, 'unixepoch')",
    "postgres": "to_char(to_timestamp(at) AT TIME ZONE 'UTC', 'YYYY-MM-DD')",
}


async def spent_since(db: Database, since: float, user_id: str | None = None) -> Spent:
    """What the user `user_id` (None: the local user) spent from `since` (Unix seconds) on."""
    mine, params = own(user_id)
    row = await db.fetchone(f"SELECT {_SUMS} FROM usage WHERE at >= ? AND {mine}",
                            (since, *params))
    return _spent(row) if row is not None else Spent()


LOCAL_NAME = "(local)"  # the local user's rows (user_id NULL), in `Totals.by_user`


async def usage_totals(db: Database, since: float, until: float, user: User = LOCAL_USER
                       ) -> Totals:
    """Totals of the rows `user` may see (an admin: everyone's) for `since <= at < until`,
    overall and by UTC day, model and tool."""
    seen, seen_params = visible(user)
    where = f"WHERE at >= ? AND at < ? AND {seen}"
    params = (since, until, *seen_params)
    total = await db.fetchone(f"SELECT {_SUMS} FROM usage {where}", params)

    async def grouped(key: str) -> dict[str, Spent]:
        rows = await db.fetchall(
            f"SELECT {key} AS k, {_SUMS} FROM usage {where} GROUP BY k ORDER BY k", params)
        return {str(r["k"]): _spent(r) for r in rows}

    return Totals(since=since, until=until, total=_spent(total) if total else Spent(),
                  by_day=await grouped(_UTC_DAY[db.dialect]),
                  by_model=await grouped("model"),
                  by_tool=await grouped("COALESCE(tool, kind)"),
                  by_user=await grouped(f"COALESCE(user_id, '{LOCAL_NAME}')") if user.admin
                  else {})
