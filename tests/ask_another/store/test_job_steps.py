"""A job's completed steps (research_steps), on both backends: stored once as they end, read
back in order with the attempt that stored them, and a second save of a step keeps the first
(a write retried after a lost connection, or a step finished again by a second run)."""

from __future__ import annotations

from pathlib import Path

from ask_another.config import DatabaseUrl
from ask_another.store import open_database
from ask_another.store.jobs import JobRecord, JobStep, job_store


async def test_steps_are_stored_once_and_read_back_in_order(store_target: Path | DatabaseUrl):
    async with open_database(store_target) as db:
        jobs = job_store(db)
        await jobs.insert(JobRecord(id="r-s", model="openai/m1", query="q", created_at=1.0,
                                    status="in_progress"))
        assert await jobs.steps("r-s") == []
        plan = {"queries": [{"query_id": "q1"}], "note": "ünïcode"}
        await jobs.save_step("r-s", "plan", plan, attempt=1, at=10.0)
        await jobs.save_step("r-s", "query:q1", {"success": True}, attempt=2, at=11.0)
        await jobs.save_step("r-s", "plan", {"other": 1}, attempt=3, at=12.0)  # kept: the first
        assert await jobs.steps("r-s") == [
            JobStep(name="plan", value=plan, attempt=1, at=10.0),
            JobStep(name="query:q1", value={"success": True}, attempt=2, at=11.0)]
        assert await jobs.steps("another") == []
