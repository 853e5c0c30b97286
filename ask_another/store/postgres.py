"""The store on a PostgreSQL server: the `Database` interface (store/db.py) for a team service.

`connect_postgres(url)` connects once to migrate (below), then opens two psycopg connection
pools of up to `url.pool_size` connections each: one for writes (`run`, `execute`, `insert`) and
one whose sessions are read-only (`fetchone`, `fetchall`), as the SQLite store has a writing and
a query-only connection. psycopg's async mode is asyncio-only, so every statement runs on the
sync API in a trio worker thread, never blocking the trio loop.

The store modules' SQL is written once, for both backends: `_Connection` translates the `?`
placeholders to psycopg's `%s`, rows read as `row[0]` and `row["name"]` (`_Row`), and a `run(fn)`
callback's `with conn:` is one transaction (`Connection.transaction()`; on a raw psycopg
connection `with conn:` would close it). Outside such a block each statement commits on its own
(the pool's connections are in autocommit mode).

Cancellation, like the SQLite store's and `trio.to_thread.run_sync`'s: a statement cancelled
while it waits for a connection (a `CapacityLimiter` as large as the pool) never runs; once it
has a connection it runs to completion and its caller gets the result, the cancellation being
raised at its next checkpoint.

Migrations: the same versions as on SQLite (`Migration.postgres` where the SQL differs), the
last one applied recorded in the table `ask_another_schema` (PostgreSQL has no user_version).
Each migration runs in its own transaction after `pg_advisory_xact_lock`, the version read after
the lock is taken, so nodes starting at once on one fresh database take turns and each migration
runs exactly once. A database at a newer version than this ask-another knows is refused.

A pooled connection is checked as it is taken (`check_connection`), so statements after a
database restart run on fresh connections rather than failing once per pooled connection; the
first that fails its check has every idle connection of its pool checked at once (`_Pool`).

Errors are `StoreError`s naming the server by its URL with the password masked; psycopg's own
message is scrubbed of the password too, in case it quotes the connection string.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any, Final, TypeVar

import psycopg
import psycopg_pool
import trio
from psycopg.rows import RowMaker

from ask_another.config import DatabaseUrl
from ask_another.errors import StoreError, StoreFull, StoreUnavailable
from ask_another.store.db import (
    Dialect,
    Migration,
    Params,
    check_versions,
    newer_schema,
    statements,
)
from ask_another.tracing import count_statement

__all__ = ["MIGRATION_LOCK", "PostgresDatabase", "connect_postgres"]

T = TypeVar("T")

MIGRATION_LOCK: Final = 0x61736B2D616E6F74  # "ask-anot": the advisory lock migrations take
CONNECT_TIMEOUT: Final = 10  # seconds to reach the server before "cannot connect"
# Seconds a statement waits in the pool for a connection. The CapacityLimiter in front lets a
# statement in only when a connection is free or can be made, so a longer wait means the server
# cannot be reached: fail the call (and /health) then, not after psycopg_pool's default 30 s.
POOL_WAIT: Final = 5
SCHEMA_TABLE: Final = "ask_another_schema"


class _Row:
    """One result row, by position or by column name (like `sqlite3.Row`)."""

    __slots__ = ("_names", "_values")

    def __init__(self, names: dict[str, int], values: Sequence[Any]) -> None:
        self._names = names
        self._values = values

    def __getitem__(self, key: int | str) -> Any:
        return self._values[self._names[key] if isinstance(key, str) else key]

    def __len__(self) -> int:
        return len(self._values)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._values)

    def keys(self) -> list[str]:
        return list(self._names)

    def __repr__(self) -> str:
        return f"Row({dict(zip(self._names, self._values, strict=True))!r})"


def _rows(cursor: psycopg.Cursor[Any]) -> RowMaker[_Row]:
    names = {column.name: i for i, column in enumerate(cursor.description or ())}
    return functools.partial(_Row, names)


@functools.lru_cache(maxsize=512)
def _placeholders(sql: str) -> str:
    """SQLite's `?` placeholders as psycopg's `%s` (a literal `%` doubled). The store's SQL
    has no `?` or `%` inside string literals."""
    return sql.replace("%", "%%").replace("?", "%s")


class _Connection:
    """A pooled psycopg connection as a `run(fn)` callback sees it (store/db.py `Connection`)."""

    __slots__ = ("_raw", "_transactions")

    def __init__(self, raw: psycopg.Connection[Any]) -> None:
        self._raw = raw
        # What `transaction()` returns: a context manager around the psycopg.Transaction.
        self._transactions: list[AbstractContextManager[psycopg.Transaction]] = []

    def execute(self, sql: str, parameters: Params = (), /) -> psycopg.Cursor[Any]:
        if isinstance(parameters, dict):
            raise TypeError("the store's SQL uses ? placeholders with a sequence of values")
        return self._raw.execute(_placeholders(sql), tuple(parameters))

    def __enter__(self) -> _Connection:
        transaction = self._raw.transaction()
        transaction.__enter__()
        self._transactions.append(transaction)
        return self

    def __exit__(self, *exc: Any) -> bool | None:
        return self._transactions.pop().__exit__(*exc)


class PostgresDatabase:
    """Two psycopg pools (writes, read-only queries) used from trio worker threads."""

    dialect: Dialect = "postgres"

    def __init__(self, url: DatabaseUrl, writer: psycopg_pool.ConnectionPool,
                 reader: psycopg_pool.ConnectionPool) -> None:
        self.url = url
        self._writer = writer
        self._reader = reader
        # As large as each pool: a statement waits here, cancellably, for a free connection.
        self._write_slots = trio.CapacityLimiter(url.pool_size)
        self._read_slots = trio.CapacityLimiter(url.pool_size)
        self.closed = False

    @property
    def where(self) -> str:
        return self.url.shown

    async def _in_thread(self, pool: psycopg_pool.ConnectionPool, slots: trio.CapacityLimiter,
                         fn: Callable[[_Connection], T]) -> T:
        if self.closed:
            await trio.lowlevel.checkpoint()
            raise StoreError(f"the database {self.where} is closed")
        count_statement()

        def go() -> T:
            with pool.connection() as raw:
                return fn(_Connection(raw))

        try:
            return await trio.to_thread.run_sync(go, limiter=slots)
        except psycopg_pool.PoolTimeout:
            raise StoreUnavailable(f"cannot reach the database {self.where}: no connection "
                                   f"within {POOL_WAIT} s; is the server running and "
                                   "reachable?") from None
        except psycopg.errors.DiskFull as exc:  # SQLSTATE 53100: the server's disk
            raise StoreFull(f"the disk of the database {self.where} is full: "
                            f"{_one_line(_scrub(str(exc), self.url))}; free space there: "
                            "background work waits for it and goes on once there is "
                            "room") from None
        except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
            # The connection went away (a restart, a dropped link): worth waiting for.
            raise StoreUnavailable(f"lost the connection to the database {self.where}: "
                                   f"{_one_line(_scrub(str(exc), self.url))}") from None
        except psycopg.Error as exc:
            raise StoreError(f"the database {self.where} failed: "
                             f"{_scrub(str(exc), self.url)}") from None

    async def run(self, fn: Callable[[Any], T]) -> T:
        """Run `fn(connection)` in a worker thread on a connection of its own (see
        `Database.run`); its `with conn:` is one transaction. Raises `StoreError` for any
        database failure, and when the database is closed."""
        return await self._in_thread(self._writer, self._write_slots, fn)

    async def execute(self, sql: str, params: Params = ()) -> int:
        """Run one writing statement (committed); returns the number of rows it changed."""
        return await self.run(lambda conn: conn.execute(sql, params).rowcount)

    async def insert(self, sql: str, params: Params = ()) -> int:
        """Run one ``INSERT ... RETURNING id`` (committed); returns the new row's id."""
        return await self.run(lambda conn: int(conn.execute(sql, params).fetchone()[0]))

    async def fetchall(self, sql: str, params: Params = ()) -> list[Any]:
        """Run one query in a read-only session."""
        return await self._in_thread(self._reader, self._read_slots,
                                     lambda conn: conn.execute(sql, params).fetchall())

    async def fetchone(self, sql: str, params: Params = ()) -> Any:
        """Run one query in a read-only session."""
        return await self._in_thread(self._reader, self._read_slots,
                                     lambda conn: conn.execute(sql, params).fetchone())

    async def schema_version(self) -> int:
        row = await self.fetchone(f"SELECT version FROM {SCHEMA_TABLE}")
        return int(row[0]) if row else 0

    async def aclose(self) -> None:
        """Close both pools; statements already running finish first."""
        if self.closed:
            return
        self.closed = True
        with trio.CancelScope(shield=True):
            for pool in (self._writer, self._reader):
                await trio.to_thread.run_sync(pool.close)


def _scrub(text: str, url: DatabaseUrl) -> str:
    password = url.password
    text = text.replace(url.url.reveal(), url.shown)
    return text.replace(password, "****") if password else text


def _migrate(conn: psycopg.Connection[Any], migrations: Sequence[Migration]) -> None:
    """Apply the migrations the database lacks, each in its own transaction with its version
    bump, the advisory lock taken BEFORE the version is read (see the module docstring)."""
    check_versions(migrations)
    while True:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
            conn.execute(f"CREATE TABLE IF NOT EXISTS {SCHEMA_TABLE} (version INTEGER NOT NULL)")
            row = conn.execute(f"SELECT version FROM {SCHEMA_TABLE}").fetchone()
            if row is None:
                conn.execute(f"INSERT INTO {SCHEMA_TABLE} (version) VALUES (0)")
            current = int(row[0]) if row is not None else 0
            if current > len(migrations):
                raise newer_schema(current, len(migrations), "ASK_ANOTHER_DATABASE_URL")
            if current == len(migrations):
                return
            migration = migrations[current]
            for statement in statements(migration.script("postgres")):
                conn.execute(statement)
            conn.execute(f"UPDATE {SCHEMA_TABLE} SET version = %s", (migration.version,))


def _connect_and_migrate(url: DatabaseUrl, migrations: Sequence[Migration]) -> None:
    with psycopg.connect(url.url.reveal(), autocommit=True,
                         connect_timeout=CONNECT_TIMEOUT) as conn:
        _migrate(conn, migrations)


class _Pool(psycopg_pool.ConnectionPool):
    """A pool whose connections are tested (an empty query) as they leave it, so after a
    database restart or a dropped link each statement gets a live connection instead of failing
    once per pooled connection (one round trip more per statement).

    A connection that fails its test means its idle neighbours are dead too (they went through
    the same restart): they are all tested and replaced at once. psycopg_pool's own loop takes
    them one by one and waits 1 s, 2 s, 4 s... between them, so a statement meeting four or more
    dead connections spent its `POOL_WAIT` on them and failed as "cannot reach the database"
    with the server up (a node's first statements after every database restart)."""

    def __init__(self, conninfo: str, **kwargs: Any) -> None:
        super().__init__(conninfo, check=self._check_or_purge, **kwargs)

    def _check_or_purge(self, conn: psycopg.Connection[Any]) -> None:
        try:
            self.check_connection(conn)
        except Exception:
            self.check()  # the idle ones: each dead one dropped, a new one asked for
            raise


def _open_pools(url: DatabaseUrl) -> tuple[psycopg_pool.ConnectionPool,
                                          psycopg_pool.ConnectionPool]:
    def pool(name: str, **kwargs: Any) -> psycopg_pool.ConnectionPool:
        return _Pool(
            url.url.reveal(), min_size=1, max_size=url.pool_size, open=True, name=name,
            timeout=POOL_WAIT,
            kwargs={"autocommit": True, "row_factory": _rows,
                    "connect_timeout": CONNECT_TIMEOUT, **kwargs})

    writer = pool("ask-another-writes")
    try:
        reader = pool("ask-another-queries", options="-c default_transaction_read_only=on")
    except BaseException:
        writer.close()
        raise
    try:
        writer.wait(CONNECT_TIMEOUT)
        reader.wait(CONNECT_TIMEOUT)
    except BaseException:
        writer.close()
        reader.close()
        raise
    return writer, reader


async def connect_postgres(url: DatabaseUrl, migrations: Sequence[Migration]
                           ) -> PostgresDatabase:
    """Connect to the server of `url`, migrate its database and open the pools.

    Raises `StoreError` for a malformed URL (`url.problem`), a server that cannot be reached or
    refuses us, and a failing migration, each named by the URL with its password masked.
    """
    if url.problem is not None:
        await trio.lowlevel.checkpoint()
        raise StoreError(f"ASK_ANOTHER_DATABASE_URL {url.problem}")
    try:
        await trio.to_thread.run_sync(_connect_and_migrate, url, migrations)
    except psycopg.OperationalError as exc:
        raise StoreError(f"cannot connect to the database {url.shown}: "
                         f"{_one_line(_scrub(str(exc), url))}") from None
    except psycopg.errors.InsufficientPrivilege as exc:
        # Since PostgreSQL 15 only the database's owner may create tables in `public`.
        raise StoreError(f"cannot open the database {url.shown}: "
                         f"{_one_line(_scrub(str(exc), url))}; its user must own the database "
                         "(ALTER DATABASE ... OWNER TO ...) or be granted CREATE on schema "
                         "public") from None
    except psycopg.Error as exc:
        raise StoreError(f"cannot open the database {url.shown}: "
                         f"{_one_line(_scrub(str(exc), url))}") from None
    try:
        writer, reader = await trio.to_thread.run_sync(_open_pools, url)
    except (psycopg.Error, psycopg_pool.PoolTimeout) as exc:
        raise StoreError(f"cannot connect to the database {url.shown}: "
                         f"{_one_line(_scrub(str(exc), url))}") from None
    return PostgresDatabase(url, writer, reader)


def _one_line(text: str) -> str:
    return re.sub(r"\s*\n\s*", "; ", text.strip())
