"""The one place that runs SQL: a writing and a reading SQLite connection, in worker threads.

`open_database(path)` opens (creating the file and its directory), switches the file to WAL and
brings the schema up to date by applying `MIGRATIONS` in order. `PRAGMA user_version` records the
last migration applied, so each one runs exactly once per file. Later features add their tables by
appending a `Migration` to the list, with the next version number; never edit a released one.

`StoreActor` owns the connections under the runtime's supervisor: it opens the database in
`init`, hands out the `Database` handle (`call(GetDatabase())`) and closes it in `terminate`.
Work is not routed through its mailbox: callers run statements on the handle directly.

Writes (`execute`, `run`) go through one connection, one at a time (a trio lock guards it).
Queries (`fetchone`, `fetchall`) go through a second, query-only connection with its own lock: in
WAL mode a reader never waits for the writer, so a status check does not queue behind a thousand
jobs' updates, and each query sees every write committed before it started. Both run in
`trio.to_thread`, so the trio loop never blocks on the disk. A statement that has started runs to
completion even if the caller is cancelled (SQLite cannot be interrupted half-way safely); the
caller just stops waiting for it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import trio

from ask_another.errors import StoreError
from supervisors import Actor, Caller, ExitReason

T = TypeVar("T")
Params = Sequence[Any] | dict[str, Any]


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    description: str
    sql: str  # one or more statements, run as a script inside one transaction


MIGRATIONS: list[Migration] = [
    Migration(1, "feedback from clients", """
        CREATE TABLE feedback (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
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
    """),
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
    """),
]


class Database:
    """A writing and a query-only SQLite connection used from worker threads, each one statement
    at a time."""

    def __init__(self, connection: sqlite3.Connection, reader: sqlite3.Connection,
                 path: Path) -> None:
        self._connection = connection
        self._lock = trio.Lock()
        self._reader = reader
        self._reader_lock = trio.Lock()
        self.path = path
        self.closed = False

    async def run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run `fn(connection)` in a worker thread, alone on the connection.

        Use it for several statements that must run together; commit is up to `fn`.
        Raises `StoreError` for any SQLite failure.
        """
        async with self._lock:
            try:
                return await trio.to_thread.run_sync(fn, self._connection)
            except sqlite3.Error as exc:
                raise StoreError(f"the database {self.path} failed: {exc}") from exc

    async def execute(self, sql: str, params: Params = ()) -> int:
        """Run one writing statement and commit; returns the last inserted row id."""
        def go(conn: sqlite3.Connection) -> int:
            with conn:
                cursor = conn.execute(sql, params)
                return cursor.lastrowid or 0
        return await self.run(go)

    async def _query(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        async with self._reader_lock:
            try:
                return await trio.to_thread.run_sync(fn, self._reader)
            except sqlite3.Error as exc:
                raise StoreError(f"the database {self.path} failed: {exc}") from exc

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
        async with self._lock:
            await trio.to_thread.run_sync(self._connection.close)


def _connect(path: Path, migrations: Sequence[Migration]) -> sqlite3.Connection:
    path.parent.mkdir(parents=True, exist_ok=True)
    # check_same_thread=False: trio's worker threads differ call to call; the lock serializes use.
    conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    try:
        conn.row_factory = sqlite3.Row
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute("PRAGMA busy_timeout=5000")
        _migrate(conn, migrations)
        conn.isolation_level = ""  # back to implicit transactions, committed by `with conn:`
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
        conn.execute("PRAGMA query_only=ON")
        conn.execute("PRAGMA busy_timeout=5000")
    except BaseException:
        conn.close()
        raise
    return conn


def _migrate(conn: sqlite3.Connection, migrations: Sequence[Migration]) -> None:
    versions = [m.version for m in migrations]
    if versions != list(range(1, len(versions) + 1)):
        raise StoreError(f"migration versions must be 1, 2, 3, ... in order; got {versions}")
    current = int(conn.execute("PRAGMA user_version").fetchone()[0])
    if current > len(migrations):
        raise StoreError(
            f"the database is at schema version {current}, newer than this ask-another "
            f"({len(migrations)}); upgrade ask-another or point ASK_ANOTHER_HOME elsewhere"
        )
    for migration in migrations[current:]:
        # One transaction per migration, including the version bump: all or nothing.
        conn.execute("BEGIN IMMEDIATE")
        try:
            for statement in _statements(migration.sql):
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {migration.version}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise


def _statements(script: str) -> list[str]:
    statements, buffer = [], ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            statements.append(buffer.strip())
            buffer = ""
    if buffer.strip():
        statements.append(buffer.strip())
    return statements


async def connect_database(path: Path, migrations: Sequence[Migration] | None = None) -> Database:
    """Open and migrate the database at `path`; close it with `aclose()`.

    Raises `StoreError` when the file cannot be opened or migrated (named, with SQLite's reason).
    """
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
    return Database(conn, reader, path)


@asynccontextmanager
async def open_database(
    path: Path, migrations: Sequence[Migration] | None = None
) -> AsyncIterator[Database]:
    """An open, migrated database at `path` for the duration of the block (see
    `connect_database`)."""
    db = await connect_database(path, migrations)
    try:
        yield db
    finally:
        with trio.CancelScope(shield=True):
            await db.aclose()


@dataclass(frozen=True, slots=True)
class GetDatabase:
    """Ask a `StoreActor` for its `Database` handle."""


class StoreActor(Actor):
    """Owns the SQLite connections under a supervisor; `call(GetDatabase())` returns the handle."""

    database: Database

    async def init(self, path: Path, migrations: Sequence[Migration] | None = None) -> None:
        self.database = await connect_database(path, migrations)

    async def handle_call(self, msg: Any, caller: Caller) -> Any:
        if isinstance(msg, GetDatabase):
            return self.database
        return await super().handle_call(msg, caller)

    async def terminate(self, reason: ExitReason) -> None:
        await self.database.aclose()
