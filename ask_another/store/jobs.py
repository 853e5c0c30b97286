"""The research job tables: one row per job (state, result, provider handle), its timeline and
its completed steps.

Every state change of a research job is written here before it is acknowledged to anyone, so the
table is the truth about every job that is not running, and after a crash or a restart.

Terminal states are final at this level too: every update except `insert` carries the guard
``status NOT IN ('completed', 'failed', 'cancelled')`` and reports whether it changed a row, so a
late writer (a result arriving after a cancel, a recovery racing a job) can never flip a finished
job. Times are Unix timestamps (seconds, float); citations are a JSON list of objects (`url`,
`title`, and `query` for the local pipeline; rows from before titles hold bare URLs). What a
running job waits for (`JobRecord.waiting_for`, `Question` values) is kept in the `detail` JSON
under ``waiting_for``, encoded here and nowhere else.

Ownership (docs/research.md, "One owner per job"): a running job belongs to the process named in
its `owner` column until `lease_expires` (wall clock). The owner renews every lease it holds with
ONE statement per heartbeat (`renew`); anyone may take over a job whose lease has expired, and
`claim` does it in one guarded UPDATE, so of two processes racing for one job exactly one wins.
Requests for a job (a cancel, an answer) made in another process are rows of
`research_requests`: the owner takes them (`take_requests`, one UPDATE that marks them taken),
acts, and writes the answer back (`answer_request`), which the asker polls.

A job's completed steps are rows of `research_steps` (one per step, keyed by job and step
name, written once: `save_step`), read back when a job is resumed (`steps`), so a resumed job
skips every step it finds (docs/research.md, "Surviving restarts").

`JobStore` is the one way into these tables: every statement on them is one of its methods,
written once for both backends; `SqliteJobStore` and `PostgresJobStore` differ only in the lease
clock below (and PostgreSQL's advisory lock on a user's running-jobs count), and `job_store(db)`
gives the one for a `Database`.

The lease clock: on SQLite, leases are times on the caller's clock (`now`, `lease_expires`; the
processes sharing a file share a machine, and tests drive the clock). On PostgreSQL the nodes are
different machines, so leases are times on the DATABASE's clock: a lease taken or renewed lasts
`lease_expires - now` seconds from `clock_timestamp()`, and "expired" means expired by it, so a
node whose clock is off cannot steal a live lease or keep a dead one.
"""

from __future__ import annotations

import json
from typing import Any, Final, Literal

import msgspec

from ask_another.interaction.types import Question, question_of
from ask_another.store.db import Connection, Database, Row
from ask_another.store.scope import own, visible
from ask_another.users import LOCAL_USER, User

__all__ = [
    "TERMINAL",
    "JobEvent",
    "JobPage",
    "JobQuery",
    "JobRecord",
    "JobRequest",
    "JobStatus",
    "JobStep",
    "JobStore",
    "PostgresJobStore",
    "RequestKind",
    "SqliteJobStore",
    "job_store",
]

JobStatus = Literal["pending", "in_progress", "completed", "failed", "cancelled"]
TERMINAL: Final = frozenset({"completed", "failed", "cancelled"})


_NOT_FINAL: Final = "status NOT IN ('completed', 'failed', 'cancelled')"
_COLUMNS: Final = (
    "id, model, query, method, status, step, created_at, started_at, ended_at, attempts, "
    "provider_handle, report, citations, error, detail, entry, owner, lease_expires, user_id, "
    "traceparent"
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
    waiting_for: list[Question] = msgspec.field(default_factory=list)
    """The questions a running job waits on a person for, oldest first."""
    entry: str | None = None  # the MODEL_* variable it was made with (None: made before v4)
    owner: str | None = None  # the process that runs it (None: made before v5, or finished)
    lease_expires: float | None = None  # the owner's lease, renewed by its heartbeat
    user_id: str | None = None  # the user who made it (None: the local user; users.py)
    traceparent: str | None = None
    """The W3C trace context of the call that started it (None: outside a trace, or made
    before v16): every run of the job, a resumed one too, is a span of that trace (tracing.py)."""

    @property
    def finished(self) -> bool:
        return self.status in TERMINAL

    def elapsed(self, now: float) -> float:
        """Seconds from start (or creation) to the end, or to `now` while it runs."""
        begin = self.started_at if self.started_at is not None else self.created_at
        end = self.ended_at if self.ended_at is not None else now
        return max(0.0, end - begin)


class JobStep(msgspec.Struct, frozen=True, kw_only=True):
    """One completed step of a job (`research_steps`): its name (``plan``, ``query:q1``,
    ``turn:3``, ``seat:<model>``), its value as stored (JSON), the job's attempt that stored it
    and when."""

    name: str
    value: Any
    attempt: int
    at: float


class JobEvent(msgspec.Struct, kw_only=True):
    """One timeline entry: a step the job reported, with its details."""

    job_id: str
    at: float
    step: str
    detail: dict[str, Any] = msgspec.field(default_factory=dict)


_AS_STORED: Final = tuple(c for c in _COLUMNS.split(", ") if c not in ("citations", "detail"))
"""The columns a `JobRecord` field holds as they are (citations and detail are JSON)."""


def _record(row: Row) -> JobRecord:
    detail = json.loads(row["detail"]) if row["detail"] else {}
    return JobRecord(**{column: row[column] for column in _AS_STORED},
                     citations=_citations(row["citations"]),
                     waiting_for=_questions(detail.pop("waiting_for", None)), detail=detail)


def _questions(raw: Any) -> list[Question]:
    # A row written before questions were values holds dicts of another shape: the job asks
    # again when it is taken over, so they are left out.
    found = []
    for item in raw if isinstance(raw, list) else []:
        try:
            found.append(question_of(item))
        except (msgspec.ValidationError, KeyError, TypeError):
            continue
    return found


def _detail_json(detail: dict[str, Any], waiting_for: list[Question] | None = None) -> str:
    if not waiting_for:
        return json.dumps(detail)
    return json.dumps({**detail, "waiting_for": msgspec.to_builtins(waiting_for)})


def _citations(raw: str | None) -> list[dict[str, str]]:
    # Rows written before citations had titles hold bare URLs.
    return [{"url": c, "title": c} if isinstance(c, str) else c
            for c in (json.loads(raw) if raw else [])]


def _encode(column: str, value: Any) -> Any:
    if column in ("citations", "detail"):
        return json.dumps(value)
    return value


class _TooMany(Exception):
    """The user has too many unfinished jobs: the insert is rolled back."""


RequestKind = Literal["cancel", "cancel_call", "permission", "choice"]


class JobRequest(msgspec.Struct, frozen=True, kw_only=True):
    """A request for a job's owner, made by another process (`value`: the decision or option)."""

    id: int
    job_id: str
    kind: RequestKind
    tool_call_id: str | None = None
    value: str | None = None


class JobStore:
    """The one way into the job tables: every statement on `research_jobs`, `research_events`,
    `research_steps` and `research_requests` is a method here, written once for both backends.

    Times are wall-clock Unix seconds given by the caller, so a test can drive them. The two
    subclasses differ only in the lease clock (see the module docstring): `SqliteJobStore`
    writes and compares leases on the caller's clock, `PostgresJobStore` on the database's,
    where a lease given as (`lease_expires`, `now`) lasts `lease_expires - now` seconds.
    """

    def __init__(self, db: Database) -> None:
        self.db = db

    # ----- the dialect's lease clock ------------------------------------------------------------

    def _lease(self, lease_expires: float, now: float) -> tuple[str, float]:
        """How a lease taken at `now` until `lease_expires` is written: SQL and its parameter."""
        raise NotImplementedError

    def _now(self, now: float) -> tuple[str, tuple[float, ...]]:
        """The SQL a lease is found expired against, and its parameters."""
        raise NotImplementedError

    def _lock_user(self, conn: Connection, user_id: str | None) -> None:
        """Serialise the running-jobs count of one user within a transaction (see `insert`)."""

    # ----- the job rows -------------------------------------------------------------------------

    async def insert(self, record: JobRecord, now: float | None = None, *,
                     max_running: int | None = None) -> bool:
        """Store a new job (committed when this returns); True when stored. Its lease, if it has
        one (`record.lease_expires`, taken at `now`, which it then needs), is alive.

        With `max_running`, only while the job's user has fewer unfinished jobs than that, this
        one included: the job is inserted, then the user's unfinished jobs are counted in the
        same transaction, which is rolled back (nothing written, False) when they are too many.
        On SQLite the insert takes the file's write lock before the count, so starts racing on
        one home (several processes included) cannot both pass; on PostgreSQL, whose
        transactions run side by side under READ COMMITTED, the transaction first takes an
        advisory lock on the user for the same guarantee.
        """
        lease_sql, lease = "?", record.lease_expires
        if record.lease_expires is not None:
            if now is None:
                raise ValueError("a job stored with a lease needs the time it was taken at")
            lease_sql, lease = self._lease(record.lease_expires, now)
        values = (record.id, record.model, record.query, record.method, record.status,
                  record.step, record.created_at, record.started_at, record.ended_at,
                  record.attempts, record.provider_handle, record.report,
                  json.dumps(record.citations), record.error,
                  _detail_json(record.detail, record.waiting_for), record.entry, record.owner,
                  lease, record.user_id, record.traceparent)
        marks = ", ".join(lease_sql if column == "lease_expires" else "?"
                          for column in _COLUMNS.split(", "))
        insert = f"INSERT INTO research_jobs ({_COLUMNS}) VALUES ({marks})"
        if max_running is None:
            await self.db.execute(insert, values)
            return True
        mine, params = own(record.user_id)

        def go(conn: Connection) -> bool:
            try:
                with conn:
                    self._lock_user(conn, record.user_id)
                    conn.execute(insert, values)
                    running = conn.execute(
                        f"SELECT COUNT(*) FROM research_jobs WHERE {mine} AND {_NOT_FINAL}",
                        params).fetchone()[0]
                    if running > max_running:
                        raise _TooMany  # `with conn:` rolls the insert back, on both backends
            except _TooMany:
                return False
            return True

        return await self.db.run(go)

    async def running(self, user_id: str | None) -> int:
        """How many unfinished jobs the user `user_id` (None: the local user) has."""
        mine, params = own(user_id)
        row = await self.db.fetchone(
            f"SELECT COUNT(*) FROM research_jobs WHERE {mine} AND {_NOT_FINAL}", params)
        return int(row[0]) if row is not None else 0

    async def update(self, job_id: str, **changes: Any) -> bool:
        """Change columns of a job that has not finished; False if it has finished (or is
        unknown). Use `finish` for the move to a terminal state."""
        if not changes:
            return True
        _check_columns(changes)
        if changes.get("status") in TERMINAL:
            raise ValueError("use finish to move a job to a terminal state")
        return await self._change(job_id, changes)

    async def start(self, job_id: str, *, started_at: float, event: JobEvent) -> bool:
        """Move a pending job to in_progress, attempt 1, with its first event; False (nothing
        written) if it is not pending any more (it was started before: a restart reloads it)."""
        def go(conn: Connection) -> bool:
            with conn:
                cursor = conn.execute(
                    "UPDATE research_jobs SET status = 'in_progress', attempts = 1, "
                    "started_at = ?, step = ? WHERE id = ? AND status = 'pending'",
                    (started_at, event.step, job_id))
                if cursor.rowcount != 1:
                    return False
                _insert_event(conn, event)
                return True
        return await self.db.run(go)

    async def finish(self, job_id: str, status: JobStatus, *, ended_at: float,
                     event: JobEvent | None = None, **changes: Any) -> bool:
        """Move a job to the terminal `status` (with `ended_at` and other columns) in one commit.

        Returns False, changing nothing, if the job had already finished: the first terminal
        state written wins, whatever arrives later.
        """
        if status not in TERMINAL:
            raise ValueError(f"{status!r} is not a terminal state")
        return await self._change(job_id, {**changes, "status": status, "ended_at": ended_at},
                                  event)

    async def _change(self, job_id: str, changes: dict[str, Any],
                      event: JobEvent | None = None) -> bool:
        # The one guarded UPDATE of an unfinished job's columns, with `event` in the same commit.
        _check_columns(changes)
        columns = sorted(changes)
        assignments = ", ".join(f"{c} = ?" for c in columns)
        params = [_encode(c, changes[c]) for c in columns]

        def go(conn: Connection) -> bool:
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

        return await self.db.run(go)

    async def add_event(self, event: JobEvent, **changes: Any) -> bool:
        """Append a timeline event and, with `changes`, update the job's non-terminal columns in
        the same commit. False (nothing written) if the job has finished."""
        unknown = set(changes) - _UPDATABLE
        if unknown or changes.get("status") in TERMINAL:
            raise ValueError(f"cannot change {sorted(changes)} with an event")
        if changes:
            return await self._change(event.job_id, changes, event)

        def go(conn: Connection) -> bool:
            with conn:
                cursor = conn.execute(
                    f"SELECT 1 FROM research_jobs WHERE id = ? AND {_NOT_FINAL}", (event.job_id,)
                )
                if cursor.fetchone() is None:
                    return False
                _insert_event(conn, event)
                return True

        return await self.db.run(go)

    async def add_events(self, job_id: str, events: list[JobEvent],
                         detail: dict[str, Any] | None = None, step: str | None = None,
                         waiting_for: list[Question] | None = None) -> bool:
        """Append several timeline events and set the job's `step` (given, or the last event's)
        and, given, its `detail` with what it waits for, in one commit. False (nothing written)
        if the job has finished."""
        if not events and detail is None and step is None:
            return True
        step = step if step is not None else (events[-1].step if events else None)

        def go(conn: Connection) -> bool:
            with conn:
                cursor = conn.execute(
                    f"UPDATE research_jobs SET step = coalesce(?, step), "
                    f"detail = coalesce(?, detail) WHERE id = ? AND {_NOT_FINAL}",
                    (step, _detail_json(detail, waiting_for) if detail is not None else None,
                     job_id),
                )
                if cursor.rowcount != 1:
                    return False
                for event in events:
                    _insert_event(conn, event)
                return True

        return await self.db.run(go)

    async def get(self, job_id: str) -> JobRecord | None:
        """The job as stored."""
        row = await self.db.fetchone(f"SELECT {_COLUMNS} FROM research_jobs WHERE id = ?",
                                     (job_id,))
        return _record(row) if row is not None else None

    async def recent(self, limit: int = 200, user: User = LOCAL_USER) -> list[JobRecord]:
        """The most recent jobs `user` may see first (an admin: every job; without their
        reports, which can be long)."""
        seen, params = visible(user)
        rows = await self.db.fetchall(
            f"SELECT {_COLUMNS.replace('report', 'NULL AS report')} FROM research_jobs "
            f"WHERE {seen} ORDER BY created_at DESC, rowid DESC LIMIT ?",
            (*params, limit),
        )
        return [_record(r) for r in rows]

    async def unfinished(self, user: User = LOCAL_USER) -> list[JobRecord]:
        """Every job `user` may see (an admin: every job) not in a terminal state, oldest
        first."""
        seen, params = visible(user)
        rows = await self.db.fetchall(
            f"SELECT {_COLUMNS} FROM research_jobs WHERE {_NOT_FINAL} AND {seen} "
            "ORDER BY created_at, rowid", params)
        return [_record(r) for r in rows]

    async def events(self, job_id: str) -> list[JobEvent]:
        """A job's timeline, oldest first."""
        rows = await self.db.fetchall(
            "SELECT job_id, at, step, detail FROM research_events WHERE job_id = ? ORDER BY id",
            (job_id,),
        )
        return [JobEvent(job_id=r["job_id"], at=r["at"], step=r["step"],
                         detail=json.loads(r["detail"]) if r["detail"] else {}) for r in rows]

    # ----- the steps of a job ------------------------------------------------------------------

    async def save_step(self, job_id: str, step: str, value: Any, *, attempt: int,
                        at: float) -> None:
        """Store a completed step of the job (its `value`, JSON) in one statement, committed
        when this returns. Idempotent: a step stored already keeps its first value (a write
        retried after a lost connection, or a step a second run also finished)."""
        await self.db.execute(
            "INSERT INTO research_steps (job_id, step, value, attempt, at) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT (job_id, step) DO NOTHING",
            (job_id, step, json.dumps(value), attempt, at))

    async def steps(self, job_id: str) -> list[JobStep]:
        """The job's completed steps, in the order they were stored."""
        rows = await self.db.fetchall(
            "SELECT step, value, attempt, at FROM research_steps WHERE job_id = ? "
            "ORDER BY at, step", (job_id,))
        return [JobStep(name=r["step"], value=json.loads(r["value"]), attempt=r["attempt"],
                        at=r["at"]) for r in rows]

    # ----- ownership ----------------------------------------------------------------------------

    async def claim(self, job_id: str, owner: str, lease_expires: float, now: float) -> bool:
        """Take the job for `owner` if it is unfinished and unowned, expired at `now`, or
        already `owner`'s; atomic: of several claimers of one expired lease exactly one gets
        True (under PostgreSQL's READ COMMITTED a second claimer of the row waits for the first
        to commit, re-checks the guard on the new row and changes nothing)."""
        lease_sql, lease = self._lease(lease_expires, now)
        now_sql, now_params = self._now(now)

        def go(conn: Connection) -> bool:
            with conn:
                cursor = conn.execute(
                    f"UPDATE research_jobs SET owner = ?, lease_expires = {lease_sql} WHERE id = ? "
                    f"AND {_NOT_FINAL} AND (owner IS NULL OR owner = ? OR lease_expires IS NULL "
                    f"OR lease_expires < {now_sql})",
                    (owner, lease, job_id, owner, *now_params))
                return cursor.rowcount == 1
        return await self.db.run(go)

    async def renew(self, owner: str, lease_expires: float, now: float) -> set[str]:
        """Extend every lease `owner` holds on an unfinished job (to `lease_expires`, renewed at
        `now`), in one statement; returns the ids of the jobs it holds."""
        lease_sql, lease = self._lease(lease_expires, now)

        def go(conn: Connection) -> set[str]:
            with conn:
                return {r[0] for r in conn.execute(
                    f"UPDATE research_jobs SET lease_expires = {lease_sql} WHERE owner = ? "
                    f"AND {_NOT_FINAL} RETURNING id", (lease, owner)).fetchall()}
        return await self.db.run(go)

    async def release(self, job_id: str, owner: str) -> bool:
        """Give the job up (its lease ends now) if `owner` holds it."""
        def go(conn: Connection) -> bool:
            with conn:
                return conn.execute(
                    "UPDATE research_jobs SET owner = NULL, lease_expires = NULL "
                    "WHERE id = ? AND owner = ?", (job_id, owner)).rowcount == 1
        return await self.db.run(go)

    async def expired(self, now: float) -> list[JobRecord]:
        """Unfinished jobs whose lease has expired at `now` (or that have no owner)."""
        now_sql, now_params = self._now(now)
        rows = await self.db.fetchall(
            f"SELECT {_COLUMNS} FROM research_jobs WHERE {_NOT_FINAL} AND (owner IS NULL OR "
            f"lease_expires IS NULL OR lease_expires < {now_sql}) ORDER BY created_at, rowid",
            now_params)
        return [_record(r) for r in rows]

    # ----- requests for a job's owner -----------------------------------------------------------

    async def request(self, job_id: str, kind: RequestKind, tool_call_id: str | None = None,
                      value: str | None = None, *, now: float) -> int:
        """Store a request for the job's owner; returns its id."""
        return await self.db.insert(
            "INSERT INTO research_requests (job_id, kind, tool_call_id, value, created_at) "
            "VALUES (?, ?, ?, ?, ?) RETURNING id", (job_id, kind, tool_call_id, value, now))

    async def take_requests(self, owner: str, now: float) -> list[JobRequest]:
        """The untaken requests for the unfinished jobs `owner` holds, marked taken by it (one
        UPDATE: a request is marked taken once, whoever races)."""
        # A read first (the query-only connection, a partial index): most beats find nothing
        # and then write nothing.
        if await self.db.fetchone(
                "SELECT 1 FROM research_requests WHERE taken_at IS NULL LIMIT 1") is None:
            return []

        def go(conn: Connection) -> list[JobRequest]:
            with conn:
                rows = conn.execute(
                    "UPDATE research_requests SET taken_by = ?, taken_at = ? WHERE taken_at IS "
                    "NULL AND job_id IN (SELECT id FROM research_jobs WHERE owner = ? AND "
                    f"{_NOT_FINAL}) RETURNING id, job_id, kind, tool_call_id, value",
                    (owner, now, owner)).fetchall()
            return sorted((JobRequest(id=r["id"], job_id=r["job_id"], kind=r["kind"],
                                      tool_call_id=r["tool_call_id"], value=r["value"])
                           for r in rows), key=lambda r: r.id)
        return await self.db.run(go)

    async def answer_request(self, request_id: int, answer: dict[str, Any], now: float) -> None:
        """Record what the owner did about a request (a JSON object)."""
        await self.db.execute(
            "UPDATE research_requests SET answer = ?, answered_at = ? WHERE id = ?",
            (json.dumps(answer), now, request_id))

    async def request_answer(self, request_id: int) -> dict[str, Any] | None:
        """The owner's answer, once there is one."""
        row = await self.db.fetchone("SELECT answer FROM research_requests WHERE id = ?",
                                     (request_id,))
        if row is None or row["answer"] is None:
            return None
        answer: dict[str, Any] = json.loads(row["answer"])
        return answer

    async def withdraw_request(self, request_id: int) -> bool:
        """Delete a request nobody has taken yet (the asker gave up); False if it was taken."""
        def go(conn: Connection) -> bool:
            with conn:
                return conn.execute("DELETE FROM research_requests WHERE id = ? AND taken_at IS "
                                    "NULL", (request_id,)).rowcount == 1
        return await self.db.run(go)

    # ----- the console's lists ------------------------------------------------------------------

    async def waiting(self, user: User = LOCAL_USER) -> list[JobRecord]:
        """Every unfinished job `user` may see (an admin: every job) whose stored record waits
        for a person, oldest first, however many jobs exist (without their reports)."""
        seen, params = visible(user)
        rows = await self.db.fetchall(
            f"SELECT {_LISTED} FROM research_jobs WHERE {_NOT_FINAL} AND {seen} "
            "AND detail LIKE ? ORDER BY created_at, rowid", (*params, _WAITING_LIKE))
        return [record for record in map(_record, rows) if record.waiting_for]

    async def listing(self, user: User = LOCAL_USER, query: JobQuery | None = None,
                      limit: int = 50) -> JobPage:
        """One page of the jobs `user` may see, newest first, that match `query`, and the
        cursor of the next (older) page; keyset-paged on (created_at, rowid), so a page costs
        the same however deep it is."""
        query = query or JobQuery()
        seen, params = visible(user)
        where, args = [seen], [*params]
        if query.status == "unfinished":
            where.append(_NOT_FINAL)
        elif query.status is not None:
            where.append("status = ?")
            args.append(query.status)
        if query.model is not None:
            where.append("model = ?")
            args.append(query.model)
        if query.principal is not None:
            condition, extra = own(query.principal or None)
            where.append(condition)
            args.extend(extra)
        if query.search:
            where.append("lower(query) LIKE ? ESCAPE '\\'")
            args.append("%" + _like_escaped(query.search.lower()) + "%")
        if query.before is not None:
            where.append("(created_at < ? OR (created_at = ? AND rowid < ?))")
            args.extend((query.before[0], query.before[0], query.before[1]))
        rows = await self.db.fetchall(
            f"SELECT {_LISTED}, rowid AS seq FROM research_jobs WHERE {' AND '.join(where)} "
            "ORDER BY created_at DESC, rowid DESC LIMIT ?", (*args, limit + 1))
        more = len(rows) > limit
        rows = rows[:limit]
        after = (rows[-1]["created_at"], int(rows[-1]["seq"])) if more and rows else None
        return JobPage([_record(r) for r in rows], after)

    async def facets(self, user: User = LOCAL_USER) -> tuple[list[str], list[str | None]]:
        """The models and the users (None: the local user) of the jobs `user` may see: what
        the jobs list can be filtered by."""
        seen, params = visible(user)
        models = await self.db.fetchall(
            f"SELECT DISTINCT model FROM research_jobs WHERE {seen} ORDER BY model", params)
        users = await self.db.fetchall(
            f"SELECT DISTINCT user_id FROM research_jobs WHERE {seen}", params)
        return ([r["model"] for r in models],
                sorted((r["user_id"] for r in users), key=lambda u: (u is not None, u or "")))


_LISTED: Final = _COLUMNS.replace("report", "NULL AS report")
"""The columns of a listing: a report can be long, and a list shows none."""
_WAITING_LIKE: Final = '%"waiting_for"%'
"""A stored detail that holds questions (`_detail_json` writes the key only when there are)."""


class JobQuery(msgspec.Struct, frozen=True, kw_only=True):
    """What a jobs listing is narrowed to: a status (or "unfinished"), a model, a user
    (`principal`: their id, "" for the local user; None: anyone), words of the question, and
    the cursor of the page (the jobs before it)."""

    status: str | None = None
    model: str | None = None
    principal: str | None = None
    search: str | None = None
    before: tuple[float, int] | None = None


class JobPage(msgspec.Struct, frozen=True):
    records: list[JobRecord]
    after: tuple[float, int] | None  # the next page's cursor (None: this is the last)


def _like_escaped(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _check_columns(changes: dict[str, Any]) -> None:
    unknown = set(changes) - _UPDATABLE
    if unknown:
        raise ValueError(f"not research_jobs columns: {sorted(unknown)}")


def _insert_event(conn: Connection, event: JobEvent) -> None:
    conn.execute(
        "INSERT INTO research_events (job_id, at, step, detail) VALUES (?, ?, ?, ?)",
        (event.job_id, event.at, event.step, json.dumps(event.detail) if event.detail else None),
    )


class SqliteJobStore(JobStore):
    """`JobStore` on the SQLite file: leases are times on the caller's clock."""

    def _lease(self, lease_expires: float, now: float) -> tuple[str, float]:
        return "?", lease_expires

    def _now(self, now: float) -> tuple[str, tuple[float, ...]]:
        return "?", (now,)


_DB_CLOCK: Final = "extract(epoch from clock_timestamp())::double precision"
"""The database server's clock, in Unix seconds: what PostgreSQL's leases are counted on."""


class PostgresJobStore(JobStore):
    """`JobStore` on PostgreSQL: leases are taken, renewed and found expired on the database's
    clock (see the module docstring), and a user's running-jobs count is serialised by an
    advisory lock."""

    def _lease(self, lease_expires: float, now: float) -> tuple[str, float]:
        return f"{_DB_CLOCK} + ?", lease_expires - now

    def _now(self, now: float) -> tuple[str, tuple[float, ...]]:
        return _DB_CLOCK, ()

    def _lock_user(self, conn: Connection, user_id: str | None) -> None:
        conn.execute("SELECT pg_advisory_xact_lock(hashtext(?))",
                     (f"ask-another.jobs.{user_id}",))


def job_store(db: Database) -> JobStore:
    """The `JobStore` of `db`'s backend."""
    return PostgresJobStore(db) if db.dialect == "postgres" else SqliteJobStore(db)
