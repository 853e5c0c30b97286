"""The usage ledger: one row per provider call, with what it cost and what it served.

Every provider call that returned (a completion, each model of a consensus and its synthesis,
each step of a research job, a web search) is one row: when (`at`, Unix seconds), what kind of
call (`kind`), the model, tokens in and out, the price in USD, and what it served: the tool
(`completion`, `consensus`, `start_research`, ...), the research job or the conversation.

`cost_usd` is NULL when the price is unknown (litellm has no price for the model): unknown is a
value of its own, never 0, and every total keeps the count of unknown-priced calls beside the
sum of the known ones.

A row is written BEFORE its call, unanswered (`answered` 0, no tokens, no price: `intent_insert`),
and completed after it with its tokens and price (`usage_insert`: one statement that completes
the intent, or writes the whole row where no intent was written). So a process killed during a
call (kill -9, a power cut) leaves the call in the ledger, unanswered: its price is unknown, and
every total counts it among the calls of unknown price and says how many were unanswered. A
call the provider refused (or that was never sent) is no call: its intent is deleted
(`forget_usage`).

Each row has a `call_id`, unique in the table (migration 9): random for a call made once, the
provider's own id where two attempts or two nodes may see the same call (a Gemini interaction's
id), and a research job's call the job, its attempt, the step and the call's number in it
(research/job.py). A row whose call id is already there is not written twice (an intent does
nothing, a completion completes it), so a write retried after a lost connection, or a job taken
over after its first owner recorded the call, never counts a call twice.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field, replace
from typing import Final, Literal

from ask_another.costs import cost_text
from ask_another.store.db import Connection, Database, Row
from ask_another.store.scope import own, visible
from ask_another.users import LOCAL_USER, User

__all__ = ["LOCAL_NAME", "Kind", "Spent", "Totals", "UsageRow", "forget_usage", "intent_insert",
           "record_intent", "record_usage", "spent_by_job", "spent_since", "unpriced_jobs_since",
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
    answered: bool = True  # False: written before the call (an intent), not completed yet


@dataclass(frozen=True, slots=True)
class Spent:
    """A total: the sum of the known prices, the calls of unknown price, and all the calls."""

    known_usd: float = 0.0
    unknown_calls: int = 0
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    unanswered_calls: int = 0
    """Calls made that never answered (their process was killed during the call, or they
    timed out): counted among the calls of unknown price."""

    def describe(self) -> str:
        """`$0.0012`, `$0.0012 + 2 calls of unknown price`, or `cost unknown` (never `$0`
        for calls whose price nobody knows; see costs.py), then how many calls never answered
        (`, 1 call unanswered`)."""
        text = cost_text(self.known_usd, self.unknown_calls, self.calls)
        if self.unanswered_calls:
            n = self.unanswered_calls
            text += f", {n} call{'s' if n != 1 else ''} unanswered"
        return text


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


_INSERT: Final = (
    "INSERT INTO usage (at, kind, model, prompt_tokens, completion_tokens, cost_usd, tool, "
    "job_id, conversation_id, user_id, call_id, answered) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (call_id) ")


def _values(row: UsageRow) -> tuple[object, ...]:
    return (row.at if row.at is not None else time.time(), row.kind, row.model,
            row.prompt_tokens, row.completion_tokens, row.cost_usd, row.tool, row.job_id,
            row.conversation_id, row.user_id, row.call_id, int(row.answered))


def usage_insert(row: UsageRow) -> tuple[str, tuple[object, ...]]:
    """The statement that records an answered call, and its parameters: it completes the
    call's intent (tokens, price, answered; its time stays the intent's), or writes the whole
    row when no intent was written. One row per call id whoever repeats it. For a caller that
    writes it together with other statements in one transaction (a conversation's turn,
    store/conversations.py)."""
    return (_INSERT + "DO UPDATE SET prompt_tokens = excluded.prompt_tokens, "
            "completion_tokens = excluded.completion_tokens, cost_usd = excluded.cost_usd, "
            "answered = 1", _values(replace(row, answered=True)))


def intent_insert(row: UsageRow) -> tuple[str, tuple[object, ...]]:
    """The statement that records a call about to be made, unanswered (nothing when its call
    id is recorded already: a retried write, or a call completed meanwhile)."""
    return (_INSERT + "DO NOTHING",
            _values(replace(row, answered=False, prompt_tokens=None,
                                         completion_tokens=None, cost_usd=None)))


async def record_intent(db: Database, row: UsageRow) -> None:
    """Write the row of a call about to be made (see `intent_insert`)."""
    await db.execute(*intent_insert(row))


async def forget_usage(db: Database, call_id: str) -> None:
    """Delete the intent of a call that was not made after all (refused by the provider, or
    never sent); an answered row stays."""
    await db.execute("DELETE FROM usage WHERE call_id = ? AND answered = 0", (call_id,))


async def record_usage(db: Database, row: UsageRow) -> int:
    """Record one answered call (completing its intent, see `usage_insert`); returns its id."""
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
                 completion_tokens=int(row["tout"] or 0),
                 unanswered_calls=int(row["unanswered"] or 0))


_SUMS = ("SUM(cost_usd) AS known, SUM(CASE WHEN cost_usd IS NULL THEN 1 ELSE 0 END) AS unknown, "
         "COUNT(*) AS calls, SUM(prompt_tokens) AS tin, SUM(completion_tokens) AS tout, "
         "SUM(CASE WHEN answered = 0 THEN 1 ELSE 0 END) AS unanswered")
_UTC_DAY = {  # the UTC day of `at` as YYYY-MM-DD: the one expression the backends write apart
    "sqlite": "date(at, 'unixepoch')",
    "postgres": "to_char(to_timestamp(at) AT TIME ZONE 'UTC', 'YYYY-MM-DD')",
}


async def spent_by_job(db: Database, job_id: str) -> tuple[Spent, int]:
    """What the research job `job_id` has spent so far, and how many of its calls were web
    searches (a job resumed after a kill goes on from there)."""
    row = await db.fetchone(
        f"SELECT {_SUMS}, SUM(CASE WHEN kind = 'search' THEN 1 ELSE 0 END) AS searches "
        "FROM usage WHERE job_id = ?", (job_id,))
    if row is None:
        return Spent(), 0
    return _spent(row), int(row["searches"] or 0)


async def spent_since(db: Database, since: float, user_id: str | None = None) -> Spent:
    """What the user `user_id` (None: the local user) spent from `since` (Unix seconds) on."""
    mine, params = own(user_id)
    row = await db.fetchone(f"SELECT {_SUMS} FROM usage WHERE at >= ? AND {mine}",
                            (since, *params))
    return _spent(row) if row is not None else Spent()


async def unpriced_jobs_since(db: Database, since: float, user_id: str | None = None
                              ) -> dict[str, tuple[float, int]]:
    """The research jobs of the user `user_id` with calls of unknown price from `since` on: for
    each, the known sum of its calls in that time and how many are of unknown price (the budget
    counts such a job at its estimate, spend/budget.py)."""
    mine, params = own(user_id)
    rows = await db.fetchall(
        f"SELECT job_id, {_SUMS} FROM usage WHERE at >= ? AND {mine} AND job_id IS NOT NULL "
        "GROUP BY job_id HAVING SUM(CASE WHEN cost_usd IS NULL THEN 1 ELSE 0 END) > 0",
        (since, *params))
    return {str(r["job_id"]): (float(r["known"] or 0.0), int(r["unknown"] or 0)) for r in rows}


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
