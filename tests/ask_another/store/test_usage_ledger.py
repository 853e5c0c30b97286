"""The usage ledger on both backends: totals by day, model and tool, unknown never $0."""

from __future__ import annotations

from pathlib import Path

from ask_another.config import DatabaseUrl
from ask_another.store import open_database
from ask_another.store.usage import UsageRow, record_usage, spent_since, usage_totals

DAY = 86400.0
T0 = 1_764_547_200.0  # 2025-12-01 00:00 UTC


async def test_totals_keep_unknown_prices_apart(store_target: Path | DatabaseUrl):
    async with open_database(store_target) as db:
        await record_usage(db, UsageRow(kind="completion", model="a", prompt_tokens=10,
                                        completion_tokens=5, cost_usd=0.25, tool="completion",
                                        at=T0 + 10))
        await record_usage(db, UsageRow(kind="consensus", model="b", prompt_tokens=7,
                                        tool="consensus", at=T0 + 20))
        await record_usage(db, UsageRow(kind="research", model="a", cost_usd=1.0,
                                        job_id="r-1", at=T0 + DAY + 5))
        totals = await usage_totals(db, T0, T0 + 2 * DAY)
        assert totals.total.describe() == "$1.25 + 1 call of unknown price"
        assert totals.total.calls == 3 and totals.total.prompt_tokens == 17
        assert list(totals.by_day) == ["2025-12-01", "2025-12-02"]
        assert totals.by_model["b"].describe() == "cost unknown"
        assert totals.by_model["a"].describe() == "$1.25"
        assert set(totals.by_tool) == {"completion", "consensus", "research"}
        assert (await spent_since(db, T0 + DAY)).known_usd == 1.0
        assert (await usage_totals(db, 0, T0)).total.calls == 0


async def test_a_provider_call_is_one_row_however_often_it_is_written(
        store_target: Path | DatabaseUrl):
    # A retried or taken-over attempt wrote a job's usage again (28 doubled rows in a 10 s
    # outage of two nodes' database): a row is keyed by its call id now (migration 9).
    async with open_database(store_target) as db:
        row = UsageRow(kind="research", model="gemini/x", cost_usd=1.5, job_id="r-1",
                       call_id="gemini-interaction:abc", at=T0)
        first = await record_usage(db, row)
        again = await record_usage(db, row)  # the write retried after a lost connection
        taken_over = await record_usage(db, UsageRow(  # another node saw it complete too
            kind="research", model="gemini/x", cost_usd=1.5, job_id="r-1",
            call_id="gemini-interaction:abc", at=T0 + 60))
        assert first == again == taken_over
        other = await record_usage(db, UsageRow(kind="completion", model="a", at=T0))
        assert other != first
        totals = await usage_totals(db, 0, T0 + DAY)
        assert totals.total.calls == 2 and totals.total.known_usd == 1.5
