"""Per-user scoping in the store (migration 7): who made each row, what a user's listings show,
what an admin's show, and the running-jobs count a limit relies on. The tests that take
`store_target` run on both backends (a SQLite file, a PostgreSQL database)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import trio

from ask_another.config import DatabaseUrl
from ask_another.store import MIGRATIONS, add_feedback, list_feedback, open_database
from ask_another.store.conversations import (
    ConversationRecord,
    NewMessage,
    append_messages,
    get_conversation,
)
from ask_another.store.jobs import JobRecord, job_store
from ask_another.store.usage import UsageRow, record_usage, spent_since, usage_totals
from ask_another.users import LOCAL_USER, User

ALICE = User("alice", admin=False)
BOB = User("bob", admin=False)
ADMIN = User("root", admin=True)


def job(job_id: str, user: str | None, at: float = 1.0) -> JobRecord:
    return JobRecord(id=job_id, model="openai/m1", query=f"q {job_id}", created_at=at,
                     user_id=user)


async def test_a_version_6_database_gains_user_columns_and_its_rows_are_the_local_users(
    tmp_path: Path,
):
    path = tmp_path / "db.sqlite3"
    async with open_database(path, MIGRATIONS[:6]) as db:
        await db.execute("INSERT INTO research_jobs (id, model, query, method, status, "
                         "created_at) VALUES ('r-old', 'm', 'q', 'provider', 'completed', 1)")
        await db.execute(
            "INSERT INTO feedback (created_at, issue) VALUES ('2025-01-01', 'old feedback')")
    async with open_database(path) as db:
        jobs = job_store(db)
        assert await db.schema_version() == len(MIGRATIONS) >= 7
        old = await jobs.get("r-old")
        assert old is not None and old.user_id is None
        # The local user (an admin) sees the old rows; a named user does not.
        assert [r.id for r in await jobs.recent()] == ["r-old"]
        assert await jobs.recent(user=ALICE) == []
        assert [f.issue for f in await list_feedback(db)] == ["old feedback"]
        assert await list_feedback(db, user=ALICE) == []
    with sqlite3.connect(path) as conn:
        indexes = {r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert {"research_jobs_by_user", "research_jobs_running_by_user", "feedback_by_user",
            "usage_by_user"} <= indexes


async def test_job_listings_show_a_user_their_own_jobs_and_an_admin_every_job(
    store_target: Path | DatabaseUrl
):
    async with open_database(store_target) as db:
        jobs = job_store(db)
        for n, user in enumerate(["alice", "bob", None, "alice"]):
            await jobs.insert(job(f"r-{n}", user, at=float(n)))
        await jobs.finish("r-3", "completed", ended_at=9.0)
        assert [r.id for r in await jobs.recent(user=ALICE)] == ["r-3", "r-0"]
        assert [r.id for r in await jobs.recent(user=BOB)] == ["r-1"]
        assert [r.id for r in await jobs.recent(user=ADMIN)] == ["r-3", "r-2", "r-1", "r-0"]
        assert [r.id for r in await jobs.recent()] == ["r-3", "r-2", "r-1", "r-0"]  # local
        assert [r.id for r in await jobs.unfinished(ALICE)] == ["r-0"]
        assert [r.id for r in await jobs.unfinished(ADMIN)] == ["r-0", "r-1", "r-2"]
        stored = await jobs.get("r-1")
        assert stored is not None and stored.user_id == "bob"
        assert await jobs.running("alice") == 1
        assert await jobs.running(None) == 1  # the local user's own


async def test_insert_within_a_running_limit_refuses_the_job_over_it_and_writes_nothing(
    store_target: Path | DatabaseUrl,
):
    async with open_database(store_target) as db:
        jobs = job_store(db)
        assert await jobs.insert(job("r-1", "alice"), max_running=2)
        assert await jobs.insert(job("r-2", "alice"), max_running=2)
        assert not await jobs.insert(job("r-3", "alice"), max_running=2)
        assert await jobs.get("r-3") is None
        assert await jobs.insert(job("r-4", "bob"), max_running=2)  # bob has his own count
        await jobs.finish("r-1", "cancelled", ended_at=5.0)
        assert await jobs.insert(job("r-5", "alice"), max_running=2)  # one finished


async def test_racing_inserts_never_pass_the_running_limit(store_target: Path | DatabaseUrl):
    # Sixty starts at once for one user, limit 3, through two connections to one file (as two
    # processes sharing a home; the insert holds the write lock while it counts), or two pools
    # on one PostgreSQL database (the insert first takes the user's advisory lock).
    async with open_database(store_target) as one, open_database(store_target) as two:
        passed: list[bool] = []

        async def start(n: int) -> None:
            db = one if n % 2 else two
            passed.append(await job_store(db).insert(job(f"r-{n}", "alice"), max_running=3))

        async with trio.open_nursery() as nursery:
            for n in range(60):
                nursery.start_soon(start, n)
        assert passed.count(True) == 3
        assert await job_store(one).running("alice") == 3
        assert len(await job_store(two).recent(user=ALICE)) == 3


async def test_conversations_keep_the_user_who_started_them(
    store_target: Path | DatabaseUrl
):
    async with open_database(store_target) as db:
        record = ConversationRecord(id="c-1", model="openai/m1", system=None, created_at=1.0,
                                    updated_at=1.0, user_id="alice")
        await append_messages(db, record, [NewMessage(role="user", content="hi")], now=2.0)
        # A later turn written with another record (an admin's) never changes the owner.
        other = ConversationRecord(id="c-1", model="openai/m1", system="s", created_at=1.0,
                                   updated_at=1.0, user_id="root")
        await append_messages(db, other, [NewMessage(role="user", content="again")], now=3.0)
        stored = await get_conversation(db, "c-1")
        assert stored is not None and stored.user_id == "alice" and stored.system == "s"


async def test_feedback_listings_show_a_user_their_own_rows(
    store_target: Path | DatabaseUrl
):
    async with open_database(store_target) as db:
        await add_feedback(db, "from alice", user_id="alice")
        await add_feedback(db, "from bob", user_id="bob")
        await add_feedback(db, "from the local user")
        assert [f.issue for f in await list_feedback(db, user=ALICE)] == ["from alice"]
        assert [f.user_id for f in await list_feedback(db, user=ADMIN)] == [None, "bob", "alice"]
        assert len(await list_feedback(db, user=LOCAL_USER)) == 3


async def test_usage_totals_and_spend_are_per_user(
    store_target: Path | DatabaseUrl
):
    async with open_database(store_target) as db:
        await record_usage(db, UsageRow(kind="completion", model="a", cost_usd=1.0, at=10.0,
                                        user_id="alice"))
        await record_usage(db, UsageRow(kind="completion", model="b", cost_usd=2.0, at=11.0,
                                        user_id="bob"))
        await record_usage(db, UsageRow(kind="completion", model="c", cost_usd=4.0, at=12.0))
        alice = await usage_totals(db, 0, 100, ALICE)
        assert alice.total.known_usd == 1.0 and list(alice.by_model) == ["a"]
        assert (await usage_totals(db, 0, 100, ADMIN)).total.known_usd == 7.0
        assert (await usage_totals(db, 0, 100)).total.known_usd == 7.0  # the local admin
        # An admin's report says who spent it (it had no per-user breakdown); a user's has none.
        by_user = (await usage_totals(db, 0, 100, ADMIN)).by_user
        assert {k: v.known_usd for k, v in by_user.items()} == {
            "(local)": 4.0, "alice": 1.0, "bob": 2.0}
        assert alice.by_user == {}
        # What a ceiling counts: the user's own spend, admin or not.
        assert (await spent_since(db, 0, "alice")).known_usd == 1.0
        assert (await spent_since(db, 0, "bob")).known_usd == 2.0
        assert (await spent_since(db, 0)).known_usd == 4.0
