"""The store interface, and its embedded backend: a writing and a reading SQLite connection.

`Database` is the interface every store module (jobs, conversations, feedback, usage) is written
against, with ONE copy of its SQL for both backends: `?` placeholders, rows readable as `row[0]`
and `row["name"]`, `run(fn)` callbacks that get a `Connection` whose `with conn:` is one
transaction, `RETURNING id` where a new row's id is needed (`insert`). `SqliteDatabase` (here) is
the embedded default, a file under ASK_ANOTHER_HOME; `PostgresDatabase` (store/postgres.py) is
the team service's, chosen by ASK_ANOTHER_DATABASE_URL. The few statements that cannot be
written alike check `db.dialect`.

`open_database(path)` opens (creating the file and its directory), switches the file to WAL and
brings the schema up to date by applying `MIGRATIONS` in order. `PRAGMA user_version` records the
last migration applied, so each one runs exactly once per file. Later features add their tables by
appending a `Migration` to the list, with the next version number; never edit a released one.
A migration whose SQL differs on PostgreSQL (identity columns for AUTOINCREMENT, DOUBLE PRECISION
for REAL) carries that form in `postgres`; both backends run the same versions.

`StoreActor` (store/actor.py, with `connect_database`, which picks this backend or PostgreSQL)
owns the connections under the runtime's supervisor: it opens the database in
`init`, hands out the `Database` handle (`call(GetDatabase())`) and closes it in `terminate`.
Work is not routed through its mailbox: callers run statements on the handle directly.

Writes (`execute`, `run`) go through one connection, one at a time, with group commit: every
write queued while a batch runs goes into the next batch, and a batch is ONE worker-thread hop
that runs its writes one after another, each its own transaction (so one failing write fails
only its own caller, and a write that leaves a transaction open is rolled back before the next
one runs). One hop per batch instead of one per write matters under load: each hop waits for the
GIL, and with a thousand research jobs finishing at once, one hop per write let them queue for
tens of seconds, each job holding its result in memory meanwhile (docs/research.md). There is no
writer task: the caller that finds nobody writing runs the batch, and hands the next batch to the
first caller queued behind it.

Queries (`fetchone`, `fetchall`) go through a second, query-only connection with its own lock: in
WAL mode a reader never waits for the writer, so a status check does not queue behind a thousand
jobs' updates, and each query sees every write committed before it started. Both run in
`trio.to_thread`, so the trio loop never blocks on the disk.

Cancellation, like `trio.to_thread.run_sync`: a write cancelled while it waits in the queue is
withdrawn and never runs; once its batch has started, it runs to completion (SQLite cannot be
interrupted half-way safely) and its caller still gets the result, the cancellation being raised
at its next checkpoint. Cancelling the caller that runs a batch never drops the other callers'
writes in it.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal, Protocol, TypeVar

import outcome
import trio

from ask_another.errors import StoreError, StoreFull
from ask_another.tracing import count_statement

T = TypeVar("T")
Params = Sequence[Any] | dict[str, Any]

BUSY_TIMEOUT_MS: Final = 5000
"""How long a statement waits for another connection's (or process's) lock before failing."""


Dialect = Literal["sqlite", "postgres"]


class Row(Protocol):
    """A result row: by position (`row[0]`) or by column name (`row["id"]`)."""

    def __getitem__(self, key: int | str, /) -> Any: ...


class Cursor(Protocol):
    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...  # a Row, or None

    def fetchall(self) -> list[Any]: ...  # Rows


class Connection(Protocol):
    """What a `run(fn)` callback gets: `execute` with `?` placeholders, and `with conn:` as one
    transaction (committed at the end of the block, rolled back if it raises)."""

    def execute(self, sql: str, parameters: Params = (), /) -> Cursor: ...

    def __enter__(self) -> Any: ...

    def __exit__(self, *exc: Any) -> Any: ...


class Database(Protocol):
    """The store interface both backends implement (see the module docstring)."""

    dialect: Dialect
    closed: bool

    @property
    def where(self) -> str:
        """The file's path or the server's URL (password hidden), for messages."""
        ...

    async def run(self, fn: Callable[[Connection], T]) -> T: ...

    async def execute(self, sql: str, params: Params = ()) -> int: ...

    async def insert(self, sql: str, params: Params = ()) -> int: ...

    async def fetchone(self, sql: str, params: Params = ()) -> Any: ...

    async def fetchall(self, sql: str, params: Params = ()) -> list[Any]: ...

    async def schema_version(self) -> int: ...

    async def aclose(self) -> None: ...


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    description: str
    sql: str  # one or more statements, run as a script inside one transaction
    postgres: str | None = None  # the PostgreSQL form, where it differs from `sql`

    def script(self, dialect: Dialect) -> str:
        return self.postgres if dialect == "postgres" and self.postgres is not None else self.sql


MIGRATIONS: list[Migration] = [
    Migration(1, "feedback from clients", """
        CREATE TABLE feedback (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            created_at TEXT NOT NULL,
            tool_name TEXT,
            issue TEXT NOT NULL
        );
    """, postgres="""
        CREATE TABLE feedback (
            id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
            created_at TEXT NOT NULL,
            tool_name TEXT,
            issue TEXT NOT NULL
        );
    """),
    Migration(2, "research jobs and their timelines (store/jobs.py)", """
        CREATE TABLE research_jobs (
            id TEXT PRIMARY KEY,
            model TEXT NOT NULL,
            query TEXT NOT NULL,
            method TEXT NOT NULL,
            status TEXT NOT NULL,
            step TEXT,
            created_at REAL NOT NULL,
            started_at REAL,
            ended_at REAL,
            attempts INTEGER NOT NULL DEFAULT 0,
            provider_handle TEXT,
            report TEXT,
            citations TEXT,
            error TEXT,
            detail TEXT
        );
        CREATE INDEX research_jobs_by_status ON research_jobs (status);
        CREATE TABLE research_events (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            job_id TEXT NOT NULL REFERENCES research_jobs (id),
            at REAL NOT NULL,
            step TEXT NOT NULL,
            detail TEXT
        );
        CREATE INDEX research_events_by_job ON research_events (job_id);
    """, postgres="""
        CREATE TABLE research_jobs (
            id TEXT PRIMARY KEY,
            model TEXT NOT NULL,
            query TEXT NOT NULL,
            method TEXT NOT NULL,
            status TEXT NOT NULL,
            step TEXT,
            created_at DOUBLE PRECISION NOT NULL,
            started_at DOUBLE PRECISION,
            ended_at DOUBLE PRECISION,
            attempts INTEGER NOT NULL DEFAULT 0,
            provider_handle TEXT,
            report TEXT,
            citations TEXT,
            error TEXT,
            detail TEXT,
            rowid BIGINT GENERATED ALWAYS AS IDENTITY
        );
        CREATE INDEX research_jobs_by_status ON research_jobs (status);
        CREATE TABLE research_events (
            id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
            job_id TEXT NOT NULL REFERENCES research_jobs (id),
            at DOUBLE PRECISION NOT NULL,
            step TEXT NOT NULL,
            detail TEXT
        );
        CREATE INDEX research_events_by_job ON research_events (job_id);
    """),  # `rowid`: SQLite's insertion order, which the job lists break created_at ties by
    Migration(3, "conversations and their messages (store/conversations.py)", """
        CREATE TABLE conversations (
            id TEXT PRIMARY KEY,
            model TEXT NOT NULL,
            system TEXT,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL
        );
        CREATE TABLE messages (
            conversation_id TEXT NOT NULL REFERENCES conversations (id),
            seq INTEGER NOT NULL,
            role TEXT NOT NULL,
            content TEXT NOT NULL,
            tool_calls TEXT,
            created_at REAL NOT NULL,
            PRIMARY KEY (conversation_id, seq)
        );
    """, postgres="""
        CREATE TABLE conversations (
            id TEXT PRIMARY KEY,
            model TEXT NOT NULL,
            system TEXT,
            created_at DOUBLE PRECISION NOT NULL,
            updated_at DOUBLE PRECISION NOT NULL
        );
        CREATE TABLE messages (
            conversation_id TEXT NOT NULL REFERENCES conversations (id),
            seq INTEGER NOT NULL,
            role TEXT NOT NULL,
            content TEXT NOT NULL,
            tool_calls TEXT,
            created_at DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (conversation_id, seq)
        );
    """),
    Migration(4, "the MODEL_* variable a conversation or job was made with (two may share an id)",
              """
        ALTER TABLE conversations ADD COLUMN entry TEXT;
        ALTER TABLE research_jobs ADD COLUMN entry TEXT;
    """),
    Migration(5, "the usage ledger: one row per provider call (store/usage.py)", """
        CREATE TABLE usage (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            at REAL NOT NULL,
            kind TEXT NOT NULL,
            model TEXT NOT NULL,
            prompt_tokens INTEGER,
            completion_tokens INTEGER,
            cost_usd REAL,
            tool TEXT,
            job_id TEXT,
            conversation_id TEXT
        );
        CREATE INDEX usage_by_time ON usage (at);
    """, postgres="""
        CREATE TABLE usage (
            id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
            at DOUBLE PRECISION NOT NULL,
            kind TEXT NOT NULL,
            model TEXT NOT NULL,
            prompt_tokens INTEGER,
            completion_tokens INTEGER,
            cost_usd DOUBLE PRECISION,
            tool TEXT,
            job_id TEXT,
            conversation_id TEXT
        );
        CREATE INDEX usage_by_time ON usage (at);
    """),
    Migration(6, "research job leases and the requests for their owners (store/jobs.py)", """
        ALTER TABLE research_jobs ADD COLUMN owner TEXT;
        ALTER TABLE research_jobs ADD COLUMN lease_expires REAL;
        CREATE INDEX research_jobs_running_by_owner ON research_jobs (owner)
            WHERE status NOT IN ('completed', 'failed', 'cancelled');
        CREATE TABLE research_requests (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            job_id TEXT NOT NULL REFERENCES research_jobs (id),
            kind TEXT NOT NULL,
            tool_call_id TEXT,
            value TEXT,
            created_at REAL NOT NULL,
            taken_by TEXT,
            taken_at REAL,
            answered_at REAL,
            answer TEXT
        );
        CREATE INDEX research_requests_untaken ON research_requests (job_id)
            WHERE taken_at IS NULL;
    """, postgres="""
        ALTER TABLE research_jobs ADD COLUMN owner TEXT;
        ALTER TABLE research_jobs ADD COLUMN lease_expires DOUBLE PRECISION;
        CREATE INDEX research_jobs_running_by_owner ON research_jobs (owner)
            WHERE status NOT IN ('completed', 'failed', 'cancelled');
        CREATE TABLE research_requests (
            id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
            job_id TEXT NOT NULL REFERENCES research_jobs (id),
            kind TEXT NOT NULL,
            tool_call_id TEXT,
            value TEXT,
            created_at DOUBLE PRECISION NOT NULL,
            taken_by TEXT,
            taken_at DOUBLE PRECISION,
            answered_at DOUBLE PRECISION,
            answer TEXT
        );
        CREATE INDEX research_requests_untaken ON research_requests (job_id)
            WHERE taken_at IS NULL;
    """),
    Migration(7, "the user who made each job, conversation, feedback and usage row (NULL: the "
              "local user; store/scope.py)", """
        ALTER TABLE research_jobs ADD COLUMN user_id TEXT;
        ALTER TABLE conversations ADD COLUMN user_id TEXT;
        ALTER TABLE feedback ADD COLUMN user_id TEXT;
        ALTER TABLE usage ADD COLUMN user_id TEXT;
        CREATE INDEX research_jobs_by_user ON research_jobs (user_id, created_at);
        CREATE INDEX research_jobs_running_by_user ON research_jobs (user_id)
            WHERE status NOT IN ('completed', 'failed', 'cancelled');
        CREATE INDEX feedback_by_user ON feedback (user_id, id);
        CREATE INDEX usage_by_user ON usage (user_id, at);
    """),
    Migration(8, "rows carry a stable principal id, not a name a later user could take "
              "(users.py): the rows made before it are the name's (`name:NAME`)", """
        UPDATE research_jobs SET user_id = 'name:' || user_id WHERE user_id IS NOT NULL;
        UPDATE conversations SET user_id = 'name:' || user_id WHERE user_id IS NOT NULL;
        UPDATE feedback SET user_id = 'name:' || user_id WHERE user_id IS NOT NULL;
        UPDATE usage SET user_id = 'name:' || user_id WHERE user_id IS NOT NULL;
    """),
    Migration(9, "a usage row is one provider call, written once: its call id is unique (a write "
              "retried across a reconnect, or a taken-over job's call, is not counted again)", """
        ALTER TABLE usage ADD COLUMN call_id TEXT;
        CREATE UNIQUE INDEX usage_by_call ON usage (call_id);
    """),
    Migration(10, "standing permission rules: a user's 'always allow' / 'always deny' of a tool "
              "(store/rules.py; principal '' is the local user)", """
        CREATE TABLE permission_rules (
            principal TEXT NOT NULL,
            tool TEXT NOT NULL,
            rule TEXT NOT NULL CHECK (rule IN ('allow', 'deny')),
            created_at REAL NOT NULL,
            PRIMARY KEY (principal, tool)
        );
    """, postgres="""
        CREATE TABLE permission_rules (
            principal TEXT NOT NULL,
            tool TEXT NOT NULL,
            rule TEXT NOT NULL CHECK (rule IN ('allow', 'deny')),
            created_at DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (principal, tool)
        );
    """),
    Migration(11, "a research job's completed steps, each stored as it ends, so a resumed job "
              "skips them (store/jobs.py: save_step, steps)", """
        CREATE TABLE research_steps (
            job_id TEXT NOT NULL,
            step TEXT NOT NULL,
            value TEXT NOT NULL,
            attempt INTEGER NOT NULL,
            at REAL NOT NULL,
            PRIMARY KEY (job_id, step)
        );
    """, postgres="""
        CREATE TABLE research_steps (
            job_id TEXT NOT NULL,
            step TEXT NOT NULL,
            value TEXT NOT NULL,
            attempt INTEGER NOT NULL,
            at DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (job_id, step)
        );
    """),
    Migration(12, "a usage row is written before its provider call, unanswered, and completed "
              "after it (store/usage.py): the rows from before were all answered", """
        ALTER TABLE usage ADD COLUMN answered INTEGER NOT NULL DEFAULT 1;
    """),
    Migration(13, "console sessions logged out, until their cookie would have expired "
              "(store/sessions.py)", """
        CREATE TABLE console_logouts (
            nonce TEXT PRIMARY KEY,
            until REAL NOT NULL
        );
        CREATE INDEX console_logouts_by_until ON console_logouts (until);
    """, postgres="""
        CREATE TABLE console_logouts (
            nonce TEXT PRIMARY KEY,
            until DOUBLE PRECISION NOT NULL
        );
        CREATE INDEX console_logouts_by_until ON console_logouts (until);
    """),
    Migration(14, "standing rules are scoped to a target of their tool (policy.rule_scope; "
              "store/rules.py): the rules made before cover every call ('*')", """
        CREATE TABLE standing_rules (
            principal TEXT NOT NULL,
            tool TEXT NOT NULL,
            scope TEXT NOT NULL,
            rule TEXT NOT NULL CHECK (rule IN ('allow', 'deny')),
            created_at REAL NOT NULL,
            face TEXT,
            PRIMARY KEY (principal, tool, scope)
        );
        INSERT INTO standing_rules (principal, tool, scope, rule, created_at)
            SELECT principal, tool, '*', rule, created_at FROM permission_rules;
        DROP TABLE permission_rules;
    """, postgres="""
        CREATE TABLE standing_rules (
            principal TEXT NOT NULL,
            tool TEXT NOT NULL,
            scope TEXT NOT NULL,
            rule TEXT NOT NULL CHECK (rule IN ('allow', 'deny')),
            created_at DOUBLE PRECISION NOT NULL,
            face TEXT,
            PRIMARY KEY (principal, tool, scope)
        );
        INSERT INTO standing_rules (principal, tool, scope, rule, created_at)
            SELECT principal, tool, '*', rule, created_at FROM permission_rules;
        DROP TABLE permission_rules;
    """),
    Migration(15, "the audit of every answer to a job's question (store/answers.py): written "
              "once, never changed", """
        CREATE TABLE job_answers (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            job_id TEXT NOT NULL REFERENCES research_jobs (id),
            at REAL NOT NULL,
            principal TEXT,
            face TEXT NOT NULL,
            tool_call_id TEXT NOT NULL,
            tool TEXT NOT NULL,
            answer TEXT NOT NULL,
            reason TEXT,
            rule TEXT
        );
        CREATE INDEX job_answers_by_job ON job_answers (job_id, id);
    """, postgres="""
        CREATE TABLE job_answers (
            id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
            job_id TEXT NOT NULL REFERENCES research_jobs (id),
            at DOUBLE PRECISION NOT NULL,
            principal TEXT,
            face TEXT NOT NULL,
            tool_call_id TEXT NOT NULL,
            tool TEXT NOT NULL,
            answer TEXT NOT NULL,
            reason TEXT,
            rule TEXT
        );
        CREATE INDEX job_answers_by_job ON job_answers (job_id, id);
    """),
    Migration(16, "a research job keeps the trace context of the call that started it, so a "
              "run resumed after a restart continues that trace (tracing.py)", """
        ALTER TABLE research_jobs ADD COLUMN traceparent TEXT;
    """),
]


class _Write:
    """One queued write: the function, then its outcome, set by the batch that ran it."""

    __slots__ = ("fn", "lead", "result", "taken", "woken")

    def __init__(self, fn: Callable[[sqlite3.Connection], Any]) -> None:
        self.fn = fn
        self.taken = False  # in a batch that has started: it will run, whatever happens
        self.lead = False  # this caller runs the next batch
        self.result: outcome.Outcome[Any] | None = None
        self.woken = trio.Event()  # set when `result` is ready or when asked to lead


def _run_batch(conn: sqlite3.Connection, batch: list[_Write]) -> None:
    """In the worker thread: every write of the batch, in order, each on its own."""
    for write in batch:
        write.result = outcome.capture(write.fn, conn)
        try:
            open_transaction = conn.in_transaction
        except sqlite3.ProgrammingError:  # the write closed the connection (`aclose`)
            continue
        if open_transaction:
            # A write that failed (or forgot to commit) must not leave its transaction to the
            # next caller's write, which would commit or roll it back with its own.
            try:
                conn.rollback()
            except sqlite3.Error as exc:
                write.result = outcome.Error(exc)
            else:
                if not isinstance(write.result, outcome.Error):
                    write.result = outcome.Error(sqlite3.ProgrammingError(
                        "the write left its transaction open; it was rolled back"))


def store_failed(path: Path, exc: sqlite3.Error) -> StoreError:
    """The error for SQLite's failure `exc`: `StoreFull` when the disk (or a file-size limit)
    is full, which work in the background waits out (store/outage.py), else `StoreError`."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None and code & 0xFF == sqlite3.SQLITE_FULL:
        return StoreFull(f"the disk holding the database {path} is full ({exc}); free space "
                         "there: background work waits for it and goes on once there is room")
    return StoreError(f"the database {path} failed: {exc}")


class SqliteDatabase:
    """A writing and a query-only SQLite connection used from worker threads, each one statement
    at a time; writes are group-committed (see the module docstring)."""

    dialect: Dialect = "sqlite"

    def __init__(self, connection: sqlite3.Connection, reader: sqlite3.Connection,
                 path: Path) -> None:
        self._connection = connection
        self._queue: list[_Write] = []  # writes waiting for the next batch, in arrival order
        self._writing = False  # a batch runs, or a caller has been asked to run the next one
        self._reader = reader
        self._reader_lock = trio.Lock()
        self.path = path
        self.closed = False
        self.batches = 0  # statistics: batches (worker-thread hops) and writes run so far
        self.writes = 0

    @property
    def where(self) -> str:
        return str(self.path)

    async def run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run `fn(connection)` in a worker thread, alone on the connection.

        Use it for several statements that must run together; commit is up to `fn` (a
        transaction it leaves open is rolled back). Raises `StoreError` for any SQLite failure,
        and when the database is closed.
        """
        if self.closed:
            await trio.lowlevel.checkpoint()
            raise StoreError(f"the database {self.path} is closed")
        count_statement()
        result: T = await self._submit(fn)
        return result

    @property
    def queued(self) -> int:
        """Writes waiting for their batch (statistics)."""
        return len(self._queue)

    async def _submit(self, fn: Callable[[sqlite3.Connection], Any]) -> Any:
        await trio.lowlevel.checkpoint_if_cancelled()
        write = _Write(fn)
        self._queue.append(write)
        if not self._writing:
            self._writing = True
            write.lead = True
        else:
            try:
                await write.woken.wait()
            except trio.Cancelled:
                if not write.taken:
                    self._withdraw(write)
                    raise
                # Its batch has started: the write happens; wait for it as to_thread would.
                with trio.CancelScope(shield=True):
                    await write.woken.wait()
        if write.result is None:  # woken to lead the next batch
            await self._lead(write)
        assert write.result is not None
        try:
            return write.result.unwrap()
        except sqlite3.Error as exc:
            raise store_failed(self.path, exc) from exc

    async def _lead(self, write: _Write) -> None:
        try:
            await trio.lowlevel.checkpoint_if_cancelled()
        except trio.Cancelled:
            self._withdraw(write)
            raise
        batch, self._queue = self._queue, []
        for queued in batch:
            queued.taken = True
        # Shielded: the others' writes are in this batch, whatever happens to this caller.
        with trio.CancelScope(shield=True):
            try:
                await trio.to_thread.run_sync(_run_batch, self._connection, batch)
            except BaseException as exc:  # the hop itself failed: every write of it fails
                for queued in batch:
                    if queued.result is None:
                        queued.result = outcome.Error(exc)
            finally:
                self.batches += 1
                self.writes += len(batch)
                for queued in batch:
                    queued.woken.set()
                self._hand_over()

    def _withdraw(self, write: _Write) -> None:
        """A cancelled caller's write leaves the queue before its batch starts: it never runs.
        If it was to lead the next batch, the next caller queued leads instead."""
        self._queue.remove(write)
        if write.lead:
            self._hand_over()

    def _hand_over(self) -> None:
        """The next batch is run by the first caller queued, if any."""
        if self._queue:
            first = self._queue[0]
            first.lead = True
            first.woken.set()
        else:
            self._writing = False

    async def execute(self, sql: str, params: Params = ()) -> int:
        """Run one writing statement and commit; returns the number of rows it changed."""
        def go(conn: sqlite3.Connection) -> int:
            with conn:
                return conn.execute(sql, params).rowcount
        return await self.run(go)

    async def insert(self, sql: str, params: Params = ()) -> int:
        """Run one ``INSERT ... RETURNING id`` and commit; returns the new row's id."""
        def go(conn: sqlite3.Connection) -> int:
            with conn:
                return int(conn.execute(sql, params).fetchone()[0])
        return await self.run(go)

    async def _query(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        count_statement()
        async with self._reader_lock:
            try:
                return await trio.to_thread.run_sync(fn, self._reader)
            except sqlite3.Error as exc:
                raise store_failed(self.path, exc) from exc

    async def fetchall(self, sql: str, params: Params = ()) -> list[sqlite3.Row]:
        """Run one query on the query-only connection (never behind a write)."""
        return await self._query(lambda conn: conn.execute(sql, params).fetchall())

    async def fetchone(self, sql: str, params: Params = ()) -> sqlite3.Row | None:
        """Run one query on the query-only connection (never behind a write)."""
        row: sqlite3.Row | None = await self._query(
            lambda conn: conn.execute(sql, params).fetchone())
        return row

    async def schema_version(self) -> int:
        row = await self.fetchone("PRAGMA user_version")
        return int(row[0]) if row else 0

    async def aclose(self) -> None:
        if self.closed:
            return
        self.closed = True
        async with self._reader_lock:
            await trio.to_thread.run_sync(self._reader.close)
        # Queued behind every write already accepted, which all run first.
        await self._submit(lambda conn: conn.close())


def _switch_to_wal(conn: sqlite3.Connection) -> None:
    """`PRAGMA journal_mode=WAL`, retried for up to the busy timeout: while another connection
    (a second server starting on the same fresh home) switches the file, SQLite fails the pragma
    at once with "database is locked" without calling the busy handler. Measured before this:
    4 connections racing on a fresh file, one failed in about half the rounds."""
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            busy = exc.sqlite_errorcode & 0xFF == sqlite3.SQLITE_BUSY  # and its extended codes
            if not busy or time.monotonic() > deadline:
                raise
        time.sleep(0.005)  # in a worker thread (connect_database), never on the trio loop


def _connect(path: Path, migrations: Sequence[Migration]) -> sqlite3.Connection:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    # Created 0600 here, not by SQLite (0644 whatever the umask allows); its -wal and -shm
    # files take the database's mode. A file that cannot be made is SQLite's to report.
    with contextlib.suppress(OSError):
        os.close(os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600))
    # check_same_thread=False: trio's worker threads differ call to call; the lock serializes use.
    conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    try:
        conn.row_factory = sqlite3.Row
        conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        _switch_to_wal(conn)
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA foreign_keys=ON")
        _migrate(conn, migrations)
        # Back to implicit transactions, committed by `with conn:`. "DEFERRED" is what the
        # default "" means (sqlite3 opens them with a plain BEGIN, which is deferred).
        conn.isolation_level = "DEFERRED"
    except BaseException:
        conn.close()
        raise
    return conn


def _connect_reader(path: Path) -> sqlite3.Connection:
    """A second connection to the migrated file that can only query (autocommit: each query
    reads the latest committed state)."""
    conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    try:
        conn.row_factory = sqlite3.Row
        conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        conn.execute("PRAGMA query_only=ON")
    except BaseException:
        conn.close()
        raise
    return conn


def _migrate(conn: sqlite3.Connection, migrations: Sequence[Migration]) -> None:
    """Apply the migrations the file lacks, each in its own write transaction (with its version
    bump: all or nothing), the write lock taken BEFORE the schema version is read. Processes
    starting at once on one fresh home take turns, and each finds the version the previous one
    left (reading it first let two of them both see 0 and both create the tables)."""
    check_versions(migrations)
    while True:
        conn.execute("BEGIN IMMEDIATE")
        try:
            current = int(conn.execute("PRAGMA user_version").fetchone()[0])
            if current > len(migrations):
                raise newer_schema(current, len(migrations), "ASK_ANOTHER_HOME")
            if current == len(migrations):
                conn.execute("COMMIT")
                return
            migration = migrations[current]
            for statement in statements(migration.script("sqlite")):
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {migration.version}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise


def check_versions(migrations: Sequence[Migration]) -> None:
    versions = [m.version for m in migrations]
    if versions != list(range(1, len(versions) + 1)):
        raise StoreError(f"migration versions must be 1, 2, 3, ... in order; got {versions}")


def newer_schema(current: int, known: int, setting: str) -> StoreError:
    return StoreError(
        f"the database is at schema version {current}, newer than this ask-another ({known}); "
        f"upgrade ask-another or point {setting} elsewhere")


def statements(script: str) -> list[str]:
    """A migration script's statements, one by one (both backends run them so)."""
    statements, buffer = [], ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            statements.append(buffer.strip())
            buffer = ""
    if buffer.strip():
        statements.append(buffer.strip())
    return statements


async def _connect_sqlite(path: Path, migrations: Sequence[Migration] | None) -> SqliteDatabase:
    try:
        conn = await trio.to_thread.run_sync(_connect, path, MIGRATIONS if migrations is None
                                             else migrations)
    except sqlite3.Error as exc:
        raise StoreError(f"cannot open the database {path}: {exc}") from exc
    except OSError as exc:
        raise StoreError(f"cannot create the directory for {path}: {exc}") from exc
    try:
        reader = await trio.to_thread.run_sync(_connect_reader, path)
    except BaseException as exc:
        conn.close()
        if isinstance(exc, sqlite3.Error):
            raise StoreError(f"cannot open the database {path}: {exc}") from exc
        raise
    return SqliteDatabase(conn, reader, path)
