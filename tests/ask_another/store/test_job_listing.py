"""The console's lists of jobs, on both backends: the jobs that wait for a person, found however
many jobs exist, and the jobs list paged by cursor, narrowed by state, model, user and words of
the question."""

from __future__ import annotations

from pathlib import Path

from ask_another.config import DatabaseUrl
from ask_another.interaction.types import PermissionRequest, Question
from ask_another.store import open_database
from ask_another.store.jobs import JobQuery, JobRecord, job_store
from ask_another.users import LOCAL_USER, User

ALICE = User("token:alice:1", admin=False)
BOB = User("token:bob:2", admin=False)
ASKS = Question(kind="permission", tool_call_id="call-1", expires_at=2e9,
                request=PermissionRequest(tool_call_id="call-1", tool="read_article",
                                          server="host", class_="read",
                                          arguments={"url": "https://example.com/a"}))


async def test_a_waiting_job_is_found_among_any_number_of_newer_ones(
    store_target: Path | DatabaseUrl,
):
    async with open_database(store_target) as db:
        jobs = job_store(db)
        await jobs.insert(JobRecord(id="r-waits", model="m", query="q", created_at=1.0,
                                    status="in_progress", waiting_for=[ASKS],
                                    user_id=ALICE.id))
        await jobs.insert(JobRecord(id="r-runs", model="m", query="q", created_at=2.0,
                                    status="in_progress", user_id=ALICE.id,
                                    detail={"note": "no questions here"}))
        for n in range(220):
            await jobs.insert(JobRecord(id=f"r-{n:03}", model="m", query="q",
                                        created_at=10.0 + n, status="completed",
                                        user_id=ALICE.id))
        assert [r.id for r in await jobs.waiting(ALICE)] == ["r-waits"]
        assert [r.id for r in await jobs.waiting(LOCAL_USER)] == ["r-waits"]  # an admin
        assert await jobs.waiting(BOB) == []
        (found,) = await jobs.waiting(ALICE)
        assert found.waiting_for == [ASKS]


async def test_the_jobs_list_pages_by_cursor_and_filters(store_target: Path | DatabaseUrl):
    async with open_database(store_target) as db:
        jobs = job_store(db)
        for n in range(120):
            who = ALICE if n % 2 else BOB
            await jobs.insert(JobRecord(
                id=f"r-{n:03}", model="openai/m1" if n % 3 else "gemini/g",
                query=f"question {n} about 100% of trio_nurseries" if n == 7 else f"question {n}",
                created_at=float(n // 4),  # ties on created_at: the cursor breaks them by rowid
                status="completed" if n % 5 else "failed", user_id=who.id))
        seen: list[str] = []
        query = JobQuery()
        while True:
            page = await jobs.listing(LOCAL_USER, query, limit=50)
            seen += [r.id for r in page.records]
            if page.after is None:
                break
            query = JobQuery(before=page.after)
        assert seen == [f"r-{n:03}" for n in reversed(range(120))]  # each once, newest first

        alices = await jobs.listing(ALICE, JobQuery(), limit=500)
        assert len(alices.records) == 60 and {r.user_id for r in alices.records} == {ALICE.id}
        failed = await jobs.listing(LOCAL_USER, JobQuery(status="failed"), limit=500)
        assert {r.id for r in failed.records} == {f"r-{n:03}" for n in range(0, 120, 5)}
        gemini_bob = await jobs.listing(LOCAL_USER, JobQuery(model="gemini/g",
                                                             principal=BOB.id), limit=500)
        assert {r.id for r in gemini_bob.records} == {f"r-{n:03}" for n in range(0, 120, 6)}
        # Words of the question, any case; % and _ are letters, not patterns.
        for words in ("TRIO_NURSERIES", "100%", "about 100"):
            (hit,) = (await jobs.listing(LOCAL_USER, JobQuery(search=words))).records
            assert hit.id == "r-007"
        assert (await jobs.listing(LOCAL_USER, JobQuery(search="%"))).records[0].id == "r-007"
        assert (await jobs.listing(BOB, JobQuery(search="trio"))).records == []  # alice's
        assert (await jobs.listing(LOCAL_USER, JobQuery(principal=""))).records == []
        unfinished = await jobs.listing(LOCAL_USER, JobQuery(status="unfinished"))
        assert unfinished.records == [] and unfinished.after is None
        models, users = await jobs.facets(LOCAL_USER)
        assert models == ["gemini/g", "openai/m1"] and set(users) == {ALICE.id, BOB.id}
        assert await jobs.facets(BOB) == (["gemini/g", "openai/m1"], [BOB.id])
