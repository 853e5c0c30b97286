"""What a running job waits for is stored as `Question` values and read back as the same values,
on both backends: another process (or node) sees the same typed questions the job's actor holds,
a spend confirmation as its own kind."""

from __future__ import annotations

from pathlib import Path

from ask_another.config import DatabaseUrl
from ask_another.interaction.types import (
    Choice,
    ChoiceOption,
    PermissionRequest,
    Question,
    SpendRequest,
)
from ask_another.store import open_database
from ask_another.store.jobs import JobRecord, job_store

PERMISSION = Question(kind="permission", tool_call_id="p1", expires_at=1_796_083_200.5,
                      request=PermissionRequest(tool_call_id="p1", tool="write_note",
                                                server="host", class_="effect",
                                                arguments={"text": "a"}))
CHOICE = Question(kind="choice", tool_call_id="c1", expires_at=1_796_083_260.0,
                  request=Choice(tool_call_id="c1", prompt="Which?",
                                 options=[ChoiceOption("a", "A"), ChoiceOption("b", "B")]))
SPEND = Question(kind="spend", tool_call_id="confirm-spend", expires_at=1_796_083_300.0,
                 request=SpendRequest(estimated_cost="about $1.20", confirm_above_usd=0.5,
                                      model="openai/m1"))


async def test_questions_round_trip_through_the_store_as_values(store_target: Path | DatabaseUrl):
    async with open_database(store_target) as db:
        jobs = job_store(db)
        record = JobRecord(id="r-q", model="openai/m1", query="q", created_at=1.0,
                           status="in_progress", waiting_for=[SPEND], detail={"depth": "deep"})
        await jobs.insert(record)
        stored = await jobs.get("r-q")
        assert stored is not None and stored.waiting_for == [SPEND]
        assert stored.detail == {"depth": "deep"}  # the questions are not in the detail

        assert await jobs.add_events("r-q", [], detail={"depth": "deep"},
                                     waiting_for=[PERMISSION, CHOICE])
        stored = await jobs.get("r-q")
        assert stored is not None and stored.waiting_for == [PERMISSION, CHOICE]
        assert stored.waiting_for[0].expires_text == "2026-12-01 00:00:00 UTC"

        assert await jobs.add_events("r-q", [], detail={"depth": "deep"}, waiting_for=[])
        stored = await jobs.get("r-q")
        assert stored is not None and stored.waiting_for == []


async def test_a_row_from_before_questions_were_values_reads_as_waiting_for_nothing(
    store_target: Path | DatabaseUrl,
):
    async with open_database(store_target) as db:
        jobs = job_store(db)
        await jobs.insert(JobRecord(id="r-old", model="m", query="q", created_at=1.0,
                                    status="in_progress"))
        old = ('{"waiting_for": [{"kind": "permission", "tool_call_id": "x", "tool": "t", '
               '"expires_at": "2026-12-01 00:00:00 UTC"}], "depth": "deep"}')
        await db.execute("UPDATE research_jobs SET detail = ? WHERE id = 'r-old'", (old,))
        stored = await jobs.get("r-old")
        assert stored is not None and stored.waiting_for == [] and stored.detail == {
            "depth": "deep"}
