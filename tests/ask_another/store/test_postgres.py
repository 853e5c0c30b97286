"""The PostgreSQL store on a real server: its schema matches SQLite's, migrations run once even
from processes starting at once, newer schemas and bad URLs are refused clearly (never showing
the password), rows read both ways, statements keep the SQLite store's cancellation semantics,
and leases are counted on the database's clock.

The store tests that hold on both backends (feedback, usage, the claim race, research jobs
through the runtime) take the `store_target` / `store_env` fixtures instead.
"""

from __future__ import annotations

import socket
import sqlite3
import threading
import time
from pathlib import Path

import psycopg
import pytest
import trio
from first_start import first_starts
from postgres_server import PostgresServer, find_bindir

from ask_another.config import Config, DatabaseUrl
from ask_another.errors import StoreError
from ask_another.runtime import open_runtime
from ask_another.store import MIGRATIONS, Migration, add_feedback, list_feedback, open_database
from ask_another.store.jobs import JobRecord, PostgresJobStore, job_store


def database_url(url: str, **extra: str) -> DatabaseUrl:
    config = Config.from_env({"ASK_ANOTHER_DATABASE_URL": url, **extra})
    assert config.database_url is not None
    return config.database_url


def columns_sqlite(path: Path) -> dict[str, list[str]]:
    with sqlite3.connect(path) as conn:
        tables = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")]
        return {t: sorted(r[1] for r in conn.execute(f"PRAGMA table_info({t})")) for t in tables}


def columns_postgres(url: str) -> dict[str, list[str]]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT table_name, column_name FROM information_schema.columns "
            "WHERE table_schema = 'public' AND table_name <> 'ask_another_schema'").fetchall()
    tables: dict[str, list[str]] = {}
    for table, column in rows:
        tables.setdefault(table, []).append(column)
    return {t: sorted(c) for t, c in tables.items()}


async def test_the_postgres_schema_has_the_sqlite_tables_and_columns_at_the_same_version(
    postgres_url: str, tmp_path: Path
):
    async with open_database(database_url(postgres_url)) as db:
        assert db.dialect == "postgres"
        assert await db.schema_version() == len(MIGRATIONS)
    async with open_database(tmp_path / "db.sqlite3"):
        pass
    sqlite_tables = columns_sqlite(tmp_path / "db.sqlite3")
    postgres_tables = columns_postgres(postgres_url)
    # SQLite's implicit rowid is a real column on PostgreSQL (the job lists order by it).
    postgres_tables["research_jobs"].remove("rowid")
    assert postgres_tables == sqlite_tables


async def test_rows_read_by_position_and_by_name_and_percent_signs_are_literal(
    postgres_url: str
):
    async with open_database(database_url(postgres_url)) as db:
        row = await db.fetchone("SELECT '100%' AS text, ? AS n", (7,))
        assert (row[0], row["text"], row[1], row["n"]) == ("100%", "100%", 7, 7)

        def in_one_transaction(conn: object) -> int:
            with conn:  # type: ignore[attr-defined]
                conn.execute(  # type: ignore[attr-defined]
                    "INSERT INTO feedback (created_at, issue) VALUES ('t', 'kept')")
            with conn:  # type: ignore[attr-defined]
                conn.execute(  # type: ignore[attr-defined]
                    "INSERT INTO feedback (created_at, issue) VALUES ('t', 'undone')")
                raise ValueError("rolled back")

        with pytest.raises(ValueError, match="rolled back"):
            await db.run(in_one_transaction)
        # The connection went back to the pool open and usable; only the raising block is undone.
        assert [r.issue for r in await list_feedback(db)] == ["kept"]
        assert (await add_feedback(db, "next")).id > 0


async def test_a_failing_migration_leaves_the_postgres_database_as_it_was(postgres_url: str):
    broken = Migration(len(MIGRATIONS) + 1, "broken", "CREATE TABLE ok (x TEXT);\nNOT SQL AT ALL;")
    with pytest.raises(StoreError, match=r"cannot open the database .*syntax error"):
        async with open_database(database_url(postgres_url), [*MIGRATIONS, broken]):
            pass
    with psycopg.connect(postgres_url) as conn:
        assert conn.execute("SELECT version FROM ask_another_schema").fetchone() == (
            len(MIGRATIONS),)
        assert conn.execute("SELECT to_regclass('ok')").fetchone() == (None,)


async def test_a_postgres_database_from_a_newer_version_is_refused_clearly(postgres_url: str):
    async with open_database(database_url(postgres_url)):
        pass
    with psycopg.connect(postgres_url) as conn:
        conn.execute("UPDATE ask_another_schema SET version = 999")
    with pytest.raises(StoreError, match=r"newer than this ask-another.*ASK_ANOTHER_DATABASE_URL"):
        async with open_database(database_url(postgres_url)):
            pass


async def test_a_user_who_may_not_create_tables_is_told_how_to_fix_it(postgres_url: str):
    # PostgreSQL 15 lets only the database's owner create tables in `public`: a database made
    # by another role was "permission denied for schema public" with no way forward.
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute("DROP ROLE IF EXISTS walker")
        admin.execute("CREATE ROLE walker LOGIN")
    url = postgres_url.replace("postgresql://postgres@", "postgresql://walker@")
    with pytest.raises(StoreError) as caught:
        async with open_database(database_url(url)):
            pass
    message = str(caught.value)
    assert "permission denied for schema public" in message
    assert message.endswith("its user must own the database (ALTER DATABASE ... OWNER TO ...) "
                            "or be granted CREATE on schema public")


async def test_an_unreachable_server_is_one_clear_line_without_the_password():
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = database_url(f"postgresql://team:s3cret-PW@127.0.0.1:{port}/ask")
    with pytest.raises(StoreError) as caught:
        async with open_database(url):
            pass
    message = str(caught.value)
    assert message.startswith(
        f"cannot connect to the database postgresql://team:****@127.0.0.1:{port}/ask: ")
    assert "refused" in message and "\n" not in message
    assert "s3cret-PW" not in message


async def test_a_malformed_database_url_stops_the_runtime_with_the_reason(tmp_path: Path):
    config = Config.from_env({"ASK_ANOTHER_HOME": str(tmp_path / "home"),
                              "ASK_ANOTHER_DATABASE_URL": "mysql://team:s3cret-PW@db/ask"})
    assert [p.variable for p in config.problems] == ["ASK_ANOTHER_DATABASE_URL"]
    with pytest.raises(StoreError, match="ASK_ANOTHER_DATABASE_URL must be a postgresql://") as e:
        async with open_runtime(config, prewarm_after=None):
            pass
    assert "s3cret-PW" not in str(e.value) and "s3cret-PW" not in str(config.problems)
    assert not (tmp_path / "home" / "ask-another.sqlite3").exists()  # no quiet SQLite fallback


async def test_a_wrong_password_is_refused_without_showing_it(postgres_server, tmp_path: Path):
    with psycopg.connect(postgres_server.url(), autocommit=True) as conn:
        conn.execute("CREATE ROLE team LOGIN PASSWORD 'right-pw'")
    hba = postgres_server.root / "data" / "pg_hba.conf"
    original = hba.read_text()
    # Password checks for `team` only; everyone else stays on trust.
    hba.write_text("host all team 127.0.0.1/32 scram-sha-256\n" + original)
    try:
        with psycopg.connect(postgres_server.url(), autocommit=True) as conn:
            conn.execute("SELECT pg_reload_conf()")
        url = database_url(postgres_server.url("postgres").replace(
            "postgres@", "team:wrong-PW-1234@"))
        with pytest.raises(StoreError) as caught:
            async with open_database(url):
                pass
        assert "password authentication failed" in str(caught.value)
        assert "wrong-PW-1234" not in str(caught.value)
    finally:
        hba.write_text(original)
        with psycopg.connect(postgres_server.url(), autocommit=True) as conn:
            conn.execute("SELECT pg_reload_conf()")


@pytest.mark.slow  # starts processes
def test_processes_migrating_one_fresh_postgres_database_at_once_all_succeed(
    postgres_server, tmp_path: Path
):
    for round_ in range(3):
        url = postgres_server.new_database()
        go = tmp_path / f"go-{round_}"
        assert first_starts(url, 8, go) == []
        with psycopg.connect(url) as conn:
            assert conn.execute("SELECT version FROM ask_another_schema").fetchall() == [
                (len(MIGRATIONS),)]


async def test_a_statement_cancelled_while_waiting_for_a_connection_never_runs(
    postgres_url: str
):
    # One connection per pool: the second write waits for it, and is cancelled there.
    async with open_database(database_url(postgres_url,
                                          ASK_ANOTHER_DATABASE_POOL_SIZE="1")) as db:
        entered, release = threading.Event(), threading.Event()

        def holder(conn: object) -> None:
            with conn:  # type: ignore[attr-defined]
                conn.execute(  # type: ignore[attr-defined]
                    "INSERT INTO feedback (created_at, issue) VALUES ('t', 'holder')")
                entered.set()
                release.wait(10)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(db.run, holder)
            await trio.to_thread.run_sync(entered.wait, 5)
            with trio.move_on_after(0.2) as waiting:
                await add_feedback(db, "cancelled")
            assert waiting.cancelled_caught
            release.set()
        assert [r.issue for r in await list_feedback(db)] == ["holder"]


async def test_a_started_statement_runs_to_completion_when_its_caller_is_cancelled(
    postgres_url: str
):
    async with open_database(database_url(postgres_url)) as db:
        entered, release = threading.Event(), threading.Event()

        def slow(conn: object) -> str:
            entered.set()
            release.wait(10)
            with conn:  # type: ignore[attr-defined]
                conn.execute(  # type: ignore[attr-defined]
                    "INSERT INTO feedback (created_at, issue) VALUES ('t', 'finished')")
            return "done"

        got: list[str] = []
        scope = trio.CancelScope()

        async def caller() -> None:
            with scope:
                got.append(await db.run(slow))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(caller)
            await trio.to_thread.run_sync(entered.wait, 5)
            scope.cancel()
            release.set()
        assert got == ["done"]  # like trio.to_thread: it ran, and its caller got the result
        assert [r.issue for r in await list_feedback(db)] == ["finished"]


async def test_leases_are_counted_on_the_database_clock_not_the_callers(postgres_url: str):
    async with open_database(database_url(postgres_url)) as db:
        store = job_store(db)
        assert isinstance(store, PostgresJobStore)
        skewed = time.time() - 3600.0  # this node's clock an hour behind
        record = JobRecord(id="r-clock", model="m", query="q", created_at=skewed,
                           status="in_progress", owner="a", lease_expires=skewed + 15.0)
        await store.insert(record, skewed)
        # On the caller's clock the lease expired an hour ago; on the database's it is alive.
        assert await store.expired(time.time()) == []
        assert not await store.claim("r-clock", "b", time.time() + 15.0, time.time())
        stored = await store.get("r-clock")
        assert stored is not None and stored.lease_expires is not None
        assert abs(stored.lease_expires - (time.time() + 15.0)) < 5.0
        # A node whose clock runs ahead cannot make a lease last longer than its length.
        ahead = time.time() + 3600.0
        assert await store.renew("a", ahead + 15.0, ahead) == {"r-clock"}
        stored = await store.get("r-clock")
        assert stored is not None and stored.lease_expires is not None
        assert abs(stored.lease_expires - (time.time() + 15.0)) < 5.0
        # Expired by the database's clock: taken over, whatever the caller's clock says.
        assert await store.renew("a", skewed - 1.0, skewed) == {"r-clock"}
        assert [r.id for r in await store.expired(skewed)] == ["r-clock"]
        assert await store.claim("r-clock", "b", skewed + 15.0, skewed)


async def test_the_running_jobs_limit_counts_and_inserts_in_one_step_on_postgres(
    postgres_url: str
):
    async with open_database(database_url(postgres_url)) as db:
        store = job_store(db)
        now = time.time()

        def job(n: int) -> JobRecord:  # NULL started_at, ended_at, ...: typed by the column
            return JobRecord(id=f"r-limit{n:04d}", model="m", query="q", created_at=now,
                             owner="a", lease_expires=now + 15.0, user_id="alice")

        results = []
        async with trio.open_nursery() as nursery:
            async def start(n: int) -> None:
                results.append(await store.insert(job(n), now, max_running=3))
            for n in range(10):  # racing starts of one user: the limit holds
                nursery.start_soon(start, n)
        assert sorted(results) == [False] * 7 + [True] * 3
        rows = await db.fetchall("SELECT id FROM research_jobs WHERE user_id = ?", ("alice",))
        assert len(rows) == 3


@pytest.mark.slow  # a server of its own, restarted
async def test_statements_after_a_database_restart_succeed_on_fresh_connections():
    bindir = find_bindir()
    assert bindir is not None
    server = PostgresServer.start(bindir)
    try:
        url = database_url(server.new_database())
        async with open_database(url) as db:
            # Five pooled connections (held at once, so the pool made them), all idle when the
            # server goes away. psycopg_pool alone tested them one at a time, 1 s, 2 s, 2 s
            # apart, and the first statement after the restart failed ("no connection within
            # 5 s") whenever the pool had grown to four or more: under load, often.
            held = threading.Barrier(5, timeout=60)
            async with trio.open_nursery() as nursery:
                for _ in range(5):
                    nursery.start_soon(db.run, lambda _conn: held.wait())
            for n in range(5):
                await add_feedback(db, f"before {n}")
            await trio.to_thread.run_sync(server.restart)
            # Each statement gets a connection the pool checked first: none fails.
            for n in range(8):
                await add_feedback(db, f"after {n}")
                assert len(await list_feedback(db)) == 6 + n
    finally:
        server.stop()


@pytest.mark.slow  # a server of its own, stopped
async def test_a_statement_while_the_database_is_down_fails_within_seconds_and_says_so():
    # It waited psycopg_pool's 30 s for a connection, so /health (meant to answer within 5 s)
    # and every tool call took 30 s to say "couldn't get a connection after 30.00 sec".
    bindir = find_bindir()
    assert bindir is not None
    server = PostgresServer.start(bindir)
    try:
        url = database_url(server.new_database().replace("postgres@", "postgres:s3cret-PW@"))
        async with open_database(url) as db:
            await add_feedback(db, "before")
            await trio.to_thread.run_sync(server._stop_server)
            started = time.monotonic()
            with pytest.raises(StoreError) as caught:
                await list_feedback(db)
            assert time.monotonic() - started < 15
            message = str(caught.value)
            assert message.startswith(f"cannot reach the database {url.shown}: no connection "
                                      "within 5 s; is the server running and reachable?")
            assert "s3cret-PW" not in message
            await trio.to_thread.run_sync(server._start_server)
            assert [f.issue for f in await list_feedback(db)] == ["before"]
    finally:
        server.stop()
