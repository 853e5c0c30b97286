"""What a one-shot completion (no conversation_id) costs the store, counted by the database
engines themselves: SQLite's statement trace on both of the store's connections, PostgreSQL's
own statement log (`log_statement = all` for the test's database) on the session's server.

The ledger row's intent, written before the provider call (one statement, its own commit), then
one transaction of three statements on both backends (the ledger row completed, the
conversation row, one INSERT of its two messages) and no query, and a follow-up still finds
everything it needs."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest

from ask_another.config import Config
from ask_another.runtime import open_runtime
from ask_another.simulator import Simulator

OURS = re.compile(r"\b(usage|conversations|messages)\b")


def _sqlite_counting(db: Any) -> list[str]:
    """Every statement either SQLite connection of the store runs from now on."""
    seen: list[str] = []
    db._connection.set_trace_callback(seen.append)
    db._reader.set_trace_callback(seen.append)
    return seen


def _postgres_statements(log: str) -> list[str]:
    """The statements of the turn in a slice of PostgreSQL's log: those on our tables, and every
    other statement of the same server processes between their BEGIN and COMMIT (a transaction
    keeps its connection, so whatever runs on it meanwhile is the turn's)."""
    lines = [m.groups() for m in re.finditer(
        r"\[(\d+)\] LOG:  (?:statement|execute [^:]*): (.*)", log)]
    pids = {pid for pid, sql in lines if OURS.search(sql)}
    picked: list[str] = []
    for pid in pids:
        mine = [sql.strip() for p, sql in lines if p == pid]
        first = next(i for i, sql in enumerate(mine) if OURS.search(sql))
        last = max(i for i, sql in enumerate(mine) if OURS.search(sql))
        begin = max((i for i in range(first) if mine[i] == "BEGIN"), default=first)
        end = min((i for i in range(last, len(mine)) if mine[i] == "COMMIT"), default=last)
        picked += mine[begin:end + 1]
    return picked


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_a_one_shot_completion_is_its_intent_then_one_transaction_of_three_statements(
    backend: str, make_config: Callable[..., Config], sim: Simulator,
    request: pytest.FixtureRequest,
):
    extra: dict[str, str] = {}
    log_path: Path | None = None
    if backend == "postgres":
        url = request.getfixturevalue("postgres_url")
        log_path = request.getfixturevalue("postgres_server").log_path
        with psycopg.connect(url, autocommit=True) as conn:
            name = conn.execute("SELECT current_database()").fetchone()[0]
            conn.execute(f'ALTER DATABASE "{name}" SET log_statement = \'all\'')
        extra["ASK_ANOTHER_DATABASE_URL"] = url
    async with open_runtime(make_config(**extra), prewarm_after=0) as runtime:
        conversations = runtime.conversations
        await conversations.turn("sim", "warm up")  # connections opened, handles found
        db = await runtime.database()
        if log_path is None:
            seen = _sqlite_counting(db)
        else:
            offset = log_path.stat().st_size
        outcome = await conversations.turn("sim", "one question")
        if log_path is None:
            statements = [s.strip() for s in seen]
        else:
            statements = _postgres_statements(log_path.read_bytes()[offset:].decode())
        words = [s.split()[0].upper() + (" " + s.split()[2] if s.upper().startswith("INSERT")
                                         else "") for s in statements if s.split()]
        # The intent: a write of its own (SQLite's writer commits it; PostgreSQL autocommits).
        intent = ["BEGIN", "INSERT usage", "COMMIT"] if log_path is None else ["INSERT usage"]
        assert words == [*intent, "BEGIN", "INSERT usage", "INSERT conversations",
                         "INSERT messages", "COMMIT"], statements
        # What a follow-up needs is there: it continues with the history.
        again = await conversations.turn("sim", "and then?", outcome.conversation_id)
        assert [m.role for m in again.stored] == ["user", "assistant"]
        assert [m.seq for m in again.stored] == [3, 4]
        assert sim.requests_for("m1")[-1].messages[0]["content"] == "one question"
        rows = await db.fetchall("SELECT conversation_id, tool FROM usage ORDER BY id")
        assert [tuple(r) for r in rows][-2:] == [(outcome.conversation_id, "completion")] * 2
