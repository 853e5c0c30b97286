"""The research job tables: one row per job (state, result, provider handle) and its timeline.

Every state change of a research job is written here before it is acknowledged to anyone, so the
table is the truth about every job that is not running, and after a crash or a restart.

Terminal states are final at this level too: every update except `insert_job` carries the guard
``status NOT IN ('completed', 'failed', 'cancelled')`` and reports whether it changed a row, so a
late writer (a result arriving after a cancel, a recovery racing a job) can never flip a finished
job. Times are Unix timestamps (seconds, float); citations are a JSON list of objects (`url`,
`title`, and `query` for the local pipeline; rows from before titles hold bare URLs).
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any, Final, Literal

import msgspec

from ask_another.store.db import Database

__all__ = [
    "TERMINAL",
    "JobEvent",
    "JobRecord",
    "JobStatus",
    "add_event",
    "add_events",
    "finish_job",
    "get_job",
    "insert_job",
    "job_events",
    "list_jobs",
    "unfinished_jobs",
    "update_job",
]

JobStatus = Literal["pending", "in_progress", "completed", "failed", "cancelled"]
TERMINAL: Final = frozenset({"completed", "failed", "cancelled"})


_NOT_FINAL: Final = "status NOT IN ('completed', 'failed', 'cancelled')"
_COLUMNS: Final = (
    "id, model, query, method, status, step, created_at, started_at, ended_at, attempts, "
    "provider_handle, report, citations, error, detail, entry"
)
_UPDATABLE: Final = frozenset({
    "status", "step", "started_at", "ended_at", "attempts", "provider_handle", "report",
    "citations", "error", "detail",
})


class JobRecord(msgspec.Struct, kw_only=True):
    """One research job as stored (and as the job actor reports it)."""

    id: str
    model: str
    query: str
    method: str = "provider"
    status: JobStatus = "pending"
    step: str | None = None
    created_at: float
    started_at: float | None = None
    ended_at: float | None = None
    attempts: int = 0
    provider_handle: str | None = None
    report: str | None = None
    citations: list[dict[str, str]] = msgspec.field(default_factory=list)
    """Each cited source: ``url``, ``title`` and, for the local pipeline, the ``query`` it
    supports."""
    error: str | None = None
    detail: dict[str, Any] = msgspec.field(default_factory=dict)
    entry: str | None = None  # the MODEL_* variable it was made with (None: made before v4)

    @property
    def finished(self) -> bool:
        return self.status in TERMINAL

    def elapsed(self, now: float) -> float:
        """Seconds from start (or creation) to the end, or to `now` while it runs."""
        begin = self.started_at if self.started_at is not None else self.created_at
        end = self.ended_at if self.ended_at is not None else now
        return max(0.0, end - begin)


class JobEvent(msgspec.Struct, kw_only=True):
    """One timeline entry: a step the job reported, with its details."""

    job_id: str
    at: float
    step: str
    detail: dict[str, Any] = msgspec.field(default_factory=dict)


def _record(row: sqlite3.Row) -> JobRecord:
    return JobRecord(
        id=row["id"],
        model=row["model"],
        query=row["query"],
        method=row["method"],
        status=row["status"],
        step=row["step"],
        created_at=row["created_at"],
        started_at=row["started_at"],
        ended_at=row["ended_at"],
        attempts=row["attempts"],
        provider_handle=row["provider_handle"],
        report=row["report"],
        citations=_citations(row["citations"]),
        error=row["error"],
        detail=json.loads(row["detail"]) if row["detail"] else {},
        entry=row["entry"],
    )


def _citations(raw: str | None) -> list[dict[str, str]]:
    # Rows written before citations had titles hold bare URLs.
    return [{"url": c, "title": c} if isinstance(c, str) else c
            for c in (json.loads(raw) if raw else [])]


def _encode(column: str, value: Any) -> Any:
    if column in ("citations", "detail"):
        return json.dumps(value)
    return value


async def insert_job(db: Database, record: JobRecord) -> None:
    """Store a new job (committed when this returns)."""
    await db.execute(
        f"INSERT INTO research_jobs ({_COLUMNS}) VALUES "
        "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (record.id, record.model, record.query, record.method, record.status, record.step,
         record.created_at, record.started_at, record.ended_at, record.attempts,
         record.provider_handle, record.report, json.dumps(record.citations), record.error,
         json.dumps(record.detail), record.entry),
    )


async def update_job(db: Database, job_id: str, **changes: Any) -> bool:
    """Change columns of a job that has not finished; False if it has finished (or is unknown).

    Use `finish_job` for the move to a terminal state.
    """
    if not changes:
        return True
    unknown = set(changes) - _UPDATABLE
    if unknown:
        raise ValueError(f"not research_jobs columns: {sorted(unknown)}")
    if changes.get("status") in TERMINAL:
        raise ValueError("use finish_job to move a job to a terminal state")
    columns = sorted(changes)
    assignments = ", ".join(f"{c} = ?" for c in columns)
    params = [_encode(c, changes[c]) for c in columns]

    def go(conn: sqlite3.Connection) -> bool:
        with conn:
            cursor = conn.execute(
                f"UPDATE research_jobs SET {assignments} WHERE id = ? AND {_NOT_FINAL}",
                (*params, job_id),
            )
            return cursor.rowcount == 1

    return await db.run(go)


async def finish_job(
    db: Database,
    job_id: str,
    status: JobStatus,
    *,
    ended_at: float,
    event: JobEvent | None = None,
    **changes: Any,
) -> bool:
    """Move a job to the terminal `status` (with `ended_at` and other columns) in one commit.

    Returns False, changing nothing, if the job had already finished: the first terminal state
    written wins, whatever arrives later.
    """
    if status not in TERMINAL:
        raise ValueError(f"{status!r} is not a terminal state")
    unknown = set(changes) - _UPDATABLE
    if unknown:
        raise ValueError(f"not research_jobs columns: {sorted(unknown)}")
    values = {**changes, "status": status, "ended_at": ended_at}
    columns = sorted(values)
    assignments = ", ".join(f"{c} = ?" for c in columns)
    params = [_encode(c, values[c]) for c in columns]

    def go(conn: sqlite3.Connection) -> bool:
        with conn:
            cursor = conn.execute(
                f"UPDATE research_jobs SET {assignments} WHERE id = ? AND {_NOT_FINAL}",
                (*params, job_id),
            )
            if cursor.rowcount != 1:
                return False
            if event is not None:
                _insert_event(conn, event)
            return True

    return await db.run(go)


def _insert_event(conn: sqlite3.Connection, event: JobEvent) -> None:
    conn.execute(
        "INSERT INTO research_events (job_id, at, step, detail) VALUES (?, ?, ?, ?)",
        (event.job_id, event.at, event.step, json.dumps(event.detail) if event.detail else None),
    )


async def add_event(db: Database, event: JobEvent, **changes: Any) -> bool:
    """Append a timeline event and, with `changes`, update the job's non-terminal columns in the
    same commit. False (nothing written) if the job has finished."""
    unknown = set(changes) - _UPDATABLE
    if unknown or changes.get("status") in TERMINAL:
        raise ValueError(f"cannot change {sorted(changes)} with an event")
    columns = sorted(changes)
    assignments = ", ".join(f"{c} = ?" for c in columns)
    params = [_encode(c, changes[c]) for c in columns]

    def go(conn: sqlite3.Connection) -> bool:
        with conn:
            if columns:
                cursor = conn.execute(
                    f"UPDATE research_jobs SET {assignments} WHERE id = ? AND {_NOT_FINAL}",
                    (*params, event.job_id),
                )
            else:
                cursor = conn.execute(
                    f"SELECT 1 FROM research_jobs WHERE id = ? AND {_NOT_FINAL}", (event.job_id,)
                )
                if cursor.fetchone() is None:
                    return False
            if columns and cursor.rowcount != 1:
                return False
            _insert_event(conn, event)
            return True

    return await db.run(go)


async def add_events(db: Database, job_id: str, events: list[JobEvent]) -> bool:
    """Append several timeline events and set the job's `step` to the last one's, in one commit.
    False (nothing written) if the job has finished."""
    if not events:
        return True

    def go(conn: sqlite3.Connection) -> bool:
        with conn:
            cursor = conn.execute(
                f"UPDATE research_jobs SET step = ? WHERE id = ? AND {_NOT_FINAL}",
                (events[-1].step, job_id),
            )
            if cursor.rowcount != 1:
                return False
            for event in events:
                _insert_event(conn, event)
            return True

    return await db.run(go)


async def get_job(db: Database, job_id: str) -> JobRecord | None:
    row = await db.fetchone(f"SELECT {_COLUMNS} FROM research_jobs WHERE id = ?", (job_id,))
    return _record(row) if row is not None else None


async def list_jobs(db: Database, limit: int = 200) -> list[JobRecord]:
    """The most recent jobs first (without their reports, which can be long)."""
    rows = await db.fetchall(
        f"SELECT {_COLUMNS.replace('report', 'NULL AS report')} FROM research_jobs "
        "ORDER BY created_at DESC, rowid DESC LIMIT ?",
        (limit,),
    )
    return [_record(r) for r in rows]


async def unfinished_jobs(db: Database) -> list[JobRecord]:
    """Every job not in a terminal state, oldest first."""
    rows = await db.fetchall(
        f"SELECT {_COLUMNS} FROM research_jobs WHERE {_NOT_FINAL} ORDER BY created_at, rowid"
    )
    return [_record(r) for r in rows]


async def job_events(db: Database, job_id: str) -> list[JobEvent]:
    """A job's timeline, oldest first."""
    rows = await db.fetchall(
        "SELECT job_id, at, step, detail FROM research_events WHERE job_id = ? ORDER BY id",
        (job_id,),
    )
    return [JobEvent(job_id=r["job_id"], at=r["at"], step=r["step"],
                     detail=json.loads(r["detail"]) if r["detail"] else {}) for r in rows]
