"""The store's opener and its actor: `connect_database(target)` picks the backend (the SQLite
file of store/db.py, or the PostgreSQL server of store/postgres.py) and `StoreActor` owns the
open store under the runtime's supervisor.

Here, above both backends, so neither imports the other (store/postgres.py builds on the
`Database` interface and the SQL of store/db.py; store/db.py knows nothing of PostgreSQL).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, overload

import trio

from ask_another.config import DatabaseUrl
from ask_another.store.db import MIGRATIONS, Database, Migration, SqliteDatabase, _connect_sqlite
from supervisors import Actor, Caller, ExitReason

__all__ = ["GetDatabase", "StoreActor", "connect_database", "open_database"]


@overload
async def connect_database(target: Path, migrations: Sequence[Migration] | None = None
                           ) -> SqliteDatabase: ...
@overload
async def connect_database(target: DatabaseUrl, migrations: Sequence[Migration] | None = None
                           ) -> Database: ...
async def connect_database(target: Path | DatabaseUrl,
                           migrations: Sequence[Migration] | None = None) -> Database:
    """Open and migrate the store: the SQLite file at a `Path`, or the PostgreSQL server of a
    `DatabaseUrl` (store/postgres.py); close it with `aclose()`.

    Raises `StoreError` when it cannot be opened or migrated (named, with the reason; a URL's
    password is never shown).
    """
    if isinstance(target, DatabaseUrl):
        from ask_another.store.postgres import connect_postgres  # psycopg only when asked for

        return await connect_postgres(target, MIGRATIONS if migrations is None else migrations)
    return await _connect_sqlite(target, migrations)


@asynccontextmanager
async def open_database(
    target: Path | DatabaseUrl, migrations: Sequence[Migration] | None = None
) -> AsyncIterator[Any]:
    """An open, migrated store for the duration of the block (see `connect_database`)."""
    db = await connect_database(target, migrations)
    try:
        yield db
    finally:
        with trio.CancelScope(shield=True):
            await db.aclose()


@dataclass(frozen=True, slots=True)
class GetDatabase:
    """Ask a `StoreActor` for its `Database` handle."""


class StoreActor(Actor):
    """Owns the store's connections under a supervisor; `call(GetDatabase())` returns the
    handle. `target`: the SQLite file's path or a PostgreSQL `DatabaseUrl`."""

    database: Database

    async def init(self, target: Path | DatabaseUrl,
                   migrations: Sequence[Migration] | None = None) -> None:
        self.database = await connect_database(target, migrations)

    async def handle_call(self, msg: Any, caller: Caller) -> Any:
        if isinstance(msg, GetDatabase):
            return self.database
        return await super().handle_call(msg, caller)

    async def terminate(self, reason: ExitReason) -> None:
        await self.database.aclose()
