"""A provider call's ledger row is written before the call, unanswered, and completed after it
(issue 42 item 7), on both backends: the intent and its completion are one row, a retried
write of either is no second row, a withdrawn intent (a call the provider refused) leaves
nothing while an answered row stays, and the totals count an unanswered call among the calls
of unknown price and say how many never answered."""

from __future__ import annotations

from pathlib import Path

from ask_another.config import DatabaseUrl
from ask_another.store import open_database
from ask_another.store.usage import (
    UsageRow,
    forget_usage,
    record_intent,
    record_usage,
    usage_totals,
)


async def test_an_intent_and_its_completion_are_one_row_and_unanswered_calls_are_counted(
    store_target: Path | DatabaseUrl,
):
    async with open_database(store_target) as db:
        made = UsageRow(kind="research", model="openai/m1", job_id="r-1", call_id="job:r-1:1:a:0",
                        at=100.0)
        await record_intent(db, made)
        await record_intent(db, made)  # a retried write
        rows = await db.fetchall("SELECT * FROM usage")
        assert [(r["call_id"], r["answered"], r["cost_usd"]) for r in rows] == [
            ("job:r-1:1:a:0", 0, None)]

        await record_usage(db, UsageRow(kind="research", model="openai/m1", job_id="r-1",
                                        call_id="job:r-1:1:a:0", prompt_tokens=10,
                                        completion_tokens=5, cost_usd=0.25, at=105.0))
        await record_intent(db, made)  # late: the completed row stays completed
        await record_usage(db, UsageRow(kind="research", model="openai/m1", call_id="x-2",
                                        cost_usd=0.5, at=101.0))  # no intent: written whole
        await record_intent(db, UsageRow(kind="completion", model="openai/m1", call_id="x-3",
                                         at=102.0))  # killed mid-call: stays unanswered
        await record_intent(db, UsageRow(kind="completion", model="openai/m1", call_id="x-4",
                                         at=103.0))
        await forget_usage(db, "x-4")  # refused by the provider: no call
        await forget_usage(db, "x-2")  # an answered row is never withdrawn
        rows = await db.fetchall("SELECT call_id, answered, prompt_tokens, cost_usd, at "
                                 "FROM usage ORDER BY at")
        assert [tuple(r) for r in rows] == [("job:r-1:1:a:0", 1, 10, 0.25, 100.0),
                                            ("x-2", 1, None, 0.5, 101.0),
                                            ("x-3", 0, None, None, 102.0)]

        totals = await usage_totals(db, 0.0, 200.0)
        assert (totals.total.calls, totals.total.unknown_calls,
                totals.total.unanswered_calls) == (3, 1, 1)
        assert totals.total.describe() == ("$0.75 + 1 call of unknown price, "
                                           "1 call unanswered")
