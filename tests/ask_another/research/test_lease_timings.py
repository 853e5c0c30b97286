"""Lease and heartbeat timings on MockClock, and the atomic claim on a real SQLite file.

The heartbeat (research/lease.py) is written against the `JobStore` interface, with trio's clock
for its schedule and `Lease.wall` for the leases' times. Its timings run here on `autojump_clock`
against `MemoryJobStore`, an in-memory `JobStore` kept to the same rules as the SQLite one (the
SQLite store runs in worker threads, which autojump_clock cannot wait for). The claim race runs
on both real backends: a SQLite file from two connections, a PostgreSQL database from two pools.
"""

from __future__ import annotations

import functools
import itertools
import time
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio

from ask_another.config import DatabaseUrl
from ask_another.errors import StoreError, StoreUnavailable
from ask_another.research.lease import REQUEST_POLL, Lease, heartbeat
from ask_another.store import open_database
from ask_another.store.jobs import (
    JobEvent,
    JobRecord,
    JobRequest,
    JobStatus,
    JobStore,
    RequestKind,
    job_store,
)


class MemoryJobStore:
    """A `JobStore` in memory; counts statements; `fail_renewals` makes `renew` fail."""

    def __init__(self) -> None:
        self.jobs: dict[str, JobRecord] = {}
        self.requests: dict[int, dict[str, Any]] = {}
        self.renewals: list[tuple[float, int]] = []  # (trio time, jobs renewed)
        self.fail_renewals = False
        # While set, every statement hangs until the database is back (`back.set()`): the
        # hardest outage for a heartbeat, which then cannot even count its failures.
        self.back: trio.Event | None = None
        self.unreachable = False  # every statement fails as a server that is down does

    async def _reachable(self) -> None:
        if self.back is not None:
            await self.back.wait()
        if self.unreachable:
            raise StoreUnavailable("cannot reach the database: no connection within 5 s")

    async def claim(self, job_id: str, owner: str, lease_expires: float, now: float) -> bool:
        await trio.lowlevel.checkpoint()
        await self._reachable()
        now = trio.current_time()  # the database's clock, when the statement runs
        job = self.jobs.get(job_id)
        if job is None or job.finished:
            return False
        if job.owner not in (None, owner) and (job.lease_expires or 0) >= now:
            return False
        job.owner, job.lease_expires = owner, lease_expires
        return True

    async def insert(self, record: JobRecord, now: float) -> None:
        self.jobs[record.id] = record

    async def renew(self, owner: str, lease_expires: float, now: float) -> set[str]:
        await trio.lowlevel.checkpoint()
        await self._reachable()
        if self.fail_renewals:
            raise StoreError("the database is locked")
        held = {j.id for j in self.jobs.values() if j.owner == owner and not j.finished}
        for job_id in held:
            self.jobs[job_id].lease_expires = lease_expires
        self.renewals.append((trio.current_time(), len(held)))
        return held

    async def release(self, job_id: str, owner: str) -> bool:
        job = self.jobs[job_id]
        if job.owner != owner:
            return False
        job.owner = job.lease_expires = None
        return True

    async def finish(self, job_id: str, status: JobStatus, *, ended_at: float,
                     event: JobEvent | None = None, **changes: Any) -> bool:
        job = self.jobs[job_id]
        if job.finished:
            return False
        job.status, job.ended_at = status, ended_at
        return True

    async def expired(self, now: float) -> list[JobRecord]:
        await trio.lowlevel.checkpoint()
        await self._reachable()
        now = trio.current_time()
        return [msgspec.structs.replace(j) for j in self.jobs.values()
                if not j.finished and (j.owner is None or (j.lease_expires or 0) < now)]

    async def request(self, job_id: str, kind: RequestKind, tool_call_id: str | None = None,
                      value: str | None = None, *, now: float) -> int:
        request_id = len(self.requests) + 1
        self.requests[request_id] = {"job_id": job_id, "kind": kind, "taken": None}
        return request_id

    async def take_requests(self, owner: str, now: float) -> list[JobRequest]:
        await trio.lowlevel.checkpoint()
        await self._reachable()
        taken = []
        for request_id, r in self.requests.items():
            if r["taken"] is None and self.jobs[r["job_id"]].owner == owner:
                r["taken"] = now
                taken.append(JobRequest(id=request_id, job_id=r["job_id"], kind=r["kind"]))
        return taken

    async def answer_request(self, request_id: int, answer: dict[str, Any], now: float) -> None:
        self.requests[request_id]["answer"] = answer

    async def request_answer(self, request_id: int) -> dict[str, Any] | None:
        answer: dict[str, Any] | None = self.requests[request_id].get("answer")
        return answer

    async def withdraw_request(self, request_id: int) -> bool:
        return self.requests.pop(request_id, None) is not None

    async def get(self, job_id: str) -> JobRecord | None:
        return self.jobs.get(job_id)


def running_job(job_id: str, owner: str, lease_expires: float) -> JobRecord:
    return JobRecord(id=job_id, model="m", query="q", created_at=0.0, status="in_progress",
                     owner=owner, lease_expires=lease_expires)


async def nothing(_: Any) -> None:
    await trio.lowlevel.checkpoint()


async def test_one_renewal_per_beat_for_a_thousand_jobs_and_no_lease_ever_lapses(
    autojump_clock: trio.testing.MockClock
):
    store = MemoryJobStore()
    lease = Lease("a", 15.0, wall=trio.current_time)
    for n in range(1000):
        store.jobs[f"j{n}"] = running_job(f"j{n}", "a", lease.until())
    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: heartbeat(store, lease, on_renewed=nothing,
                                             on_requests=nothing, on_expired=nothing))
        begin = trio.current_time()
        await trio.sleep(62.0)
        # Every lease is alive at every instant: never more than a lease between renewals.
        assert all(j.lease_expires is not None and j.lease_expires > trio.current_time()
                   for j in store.jobs.values())
        nursery.cancel_scope.cancel()
    times = [begin] + [t for t, _ in store.renewals]
    assert len(store.renewals) == 12  # 62 s / (15 s / 3): ONE statement per beat...
    assert all(count == 1000 for _, count in store.renewals)  # ...for all 1,000 jobs
    assert max(b - a for a, b in itertools.pairwise(times)) == pytest.approx(5.0)


async def test_a_dead_owners_job_is_taken_over_after_its_lease_expires_and_not_before(
    autojump_clock: trio.testing.MockClock
):
    store = MemoryJobStore()
    lease_a = Lease("a", 15.0, wall=trio.current_time)
    lease_b = Lease("b", 15.0, wall=trio.current_time)
    store.jobs["j"] = running_job("j", "a", lease_a.until())
    taken_at: list[float] = []

    async def b_takes_over(records: list[JobRecord]) -> None:
        for record in records:
            won = await store.claim(record.id, "b", lease_b.until(), lease_b.wall())
            if won:
                taken_at.append(trio.current_time())

    async with trio.open_nursery() as nursery:
        a_scope = trio.CancelScope()

        async def run_a() -> None:
            with a_scope:
                await heartbeat(store, lease_a, on_renewed=nothing, on_requests=nothing,
                                on_expired=nothing)

        nursery.start_soon(run_a)
        nursery.start_soon(lambda: heartbeat(store, lease_b, on_renewed=nothing,
                                             on_requests=nothing, on_expired=b_takes_over))
        await trio.sleep(100.0)
        assert taken_at == []  # A alive: its job is left alone, however long
        died = trio.current_time()
        a_scope.cancel()  # A dies (kill -9): no more renewals
        await trio.sleep(30.0)
        nursery.cancel_scope.cancel()
    assert store.jobs["j"].owner == "b" and len(taken_at) == 1
    # Its last renewal was at most 5 s before it died; expiry 15 s after that; B's sweep runs
    # every 7.5 s.
    assert died + 10.0 - 1e-6 <= taken_at[0] <= died + 15.0 + 7.5 + 1e-6


async def test_failing_renewals_do_not_stop_the_heartbeat_and_requests_are_taken_each_poll(
    autojump_clock: trio.testing.MockClock
):
    store = MemoryJobStore()
    lease = Lease("a", 15.0, wall=trio.current_time)
    store.jobs["j"] = running_job("j", "a", lease.until())
    delivered: list[tuple[float, int]] = []

    async def deliver(requests: list[JobRequest]) -> None:
        delivered.extend((trio.current_time(), r.id) for r in requests)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: heartbeat(store, lease, on_renewed=nothing,
                                             on_requests=deliver, on_expired=nothing))
        store.fail_renewals = True
        await trio.sleep(8.0)  # one failed renewal (at 5 s)
        store.fail_renewals = False
        asked = trio.current_time()
        request_id = await store.request("j", "cancel", now=lease.wall())
        await trio.sleep(12.0)
        nursery.cancel_scope.cancel()
    assert store.renewals and store.renewals[0][0] == pytest.approx(10.0)  # the next beat
    assert [i for _, i in delivered] == [request_id]
    assert delivered[0][0] - asked <= REQUEST_POLL + 1e-6  # within one poll


async def test_of_two_processes_claiming_one_expired_job_exactly_one_wins(
    store_target: Path | DatabaseUrl
):
    # Two connections to one SQLite file; two connection pools on one PostgreSQL database.
    async with open_database(store_target) as one, open_database(store_target) as two:
        now = time.time()
        for n in range(20):
            await job_store(one).insert(running_job(f"r-{n:010d}", "dead", now - 1.0), now)
        wins: dict[str, list[str]] = {"x": [], "y": []}

        async def claim_all(store: JobStore, owner: str) -> None:
            for n in range(20):
                if await store.claim(f"r-{n:010d}", owner, now + 15.0, now):
                    wins[owner].append(f"r-{n:010d}")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(claim_all, job_store(one), "x")
            nursery.start_soon(claim_all, job_store(two), "y")
        assert sorted(wins["x"] + wins["y"]) == [f"r-{n:010d}" for n in range(20)]
        assert not set(wins["x"]) & set(wins["y"])
        # A live lease is not taken; its own owner may re-claim it.
        store = job_store(one)
        job = wins["x"][0] if wins["x"] else wins["y"][0]
        holder = "x" if wins["x"] else "y"
        assert not await store.claim(job, "z", now + 15.0, now)
        assert await store.claim(job, holder, now + 30.0, now)
        assert await store.renew(holder, now + 45.0, now) == set(wins[holder])


@pytest.mark.parametrize("outage", [4.0, 10.0, 30.0])
async def test_an_owner_that_cannot_renew_stops_its_jobs_before_another_can_take_them(
    autojump_clock: trio.testing.MockClock, outage: float
):
    # Two nodes on one database, which goes away for `outage` seconds just after A's renewal.
    # Before fencing, an outage longer than the lease let B take over A's job while A still ran
    # it. A now stops its job's work (on_fenced) before its lease can lapse, whatever its
    # heartbeat is blocked on, and starts it again only on a renewal made in time.
    store = MemoryJobStore()
    lease_a = Lease("a", 15.0, wall=trio.current_time)
    lease_b = Lease("b", 15.0, wall=trio.current_time)
    store.jobs["j"] = running_job("j", "a", lease_a.until())
    runs: list[list[Any]] = [["a", 0.0, None]]  # who ran the job, from when, until when

    def stop(node: str) -> None:
        assert runs[-1][0] == node and runs[-1][2] is None
        runs[-1][2] = trio.current_time()

    async def fenced() -> None:
        # A stops at once; its lease, counted from its last renewal, must still hold.
        assert store.jobs["j"].lease_expires is not None
        assert trio.current_time() < store.jobs["j"].lease_expires
        stop("a")

    async def unfenced(held: set[str]) -> None:
        if "j" in held:
            runs.append(["a", trio.current_time(), None])

    async def a_renewed(held: set[str]) -> None:
        if "j" not in held and runs[-1][0] == "a" and runs[-1][2] is None:
            stop("a")  # lost to B: relinquished

    async def b_takes_over(records: list[JobRecord]) -> None:
        for record in records:
            won = await store.claim(record.id, "b", lease_b.until(), lease_b.wall())
            if won:
                runs.append(["b", trio.current_time(), None])

    async with trio.open_nursery() as nursery:
        for lease, kwargs in ((lease_a, {"on_renewed": a_renewed, "on_expired": nothing,
                                         "on_fenced": fenced, "on_unfenced": unfenced}),
                              (lease_b, {"on_renewed": nothing, "on_expired": b_takes_over})):
            nursery.start_soon(functools.partial(heartbeat, store, lease, on_requests=nothing,
                                                 **kwargs))
        await trio.sleep(10.5)  # A renewed at 5 and 10
        store.back = trio.Event()
        await trio.sleep(outage)
        store.back.set()
        store.back = None
        await trio.sleep(40.0)
        nursery.cancel_scope.cancel()
    spans = [(node, start, end if end is not None else float("inf"))
             for node, start, end in runs]
    for (_, _, first_end), (_, second_start, _) in itertools.pairwise(spans):
        assert first_end <= second_start, runs  # never two runs at once
    if outage < lease_a.fence_after - 0.5:
        assert runs == [["a", 0.0, None]]  # a short outage stops nothing
    else:
        assert runs[0][0] == "a" and runs[0][2] == pytest.approx(10.0 + lease_a.fence_after)
        assert runs[-1][2] is None  # the job runs again, on one node


async def test_a_slow_renewal_on_sqlite_is_load_and_fences_nothing_an_unreachable_one_does(
    autojump_clock: trio.testing.MockClock
):
    # A renewal queued behind a burst of writes (SQLite: one machine, a file that cannot be
    # unreachable) fenced a 1,300-job burst twice with 3 s leases, failing every job that cannot
    # resume. Without `slow_is_away`, only a database that fails as unreachable is fenced.
    store = MemoryJobStore()
    lease = Lease("a", 15.0, wall=trio.current_time)
    store.jobs["j"] = running_job("j", "a", lease.until())
    fenced_at: list[float] = []

    async def fenced() -> None:
        fenced_at.append(trio.current_time())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(functools.partial(
            heartbeat, store, lease, on_renewed=nothing, on_requests=nothing,
            on_expired=nothing, on_fenced=fenced, slow_is_away=False))
        await trio.sleep(10.5)
        store.back = trio.Event()  # every statement hangs for 20 s: slow, not away
        await trio.sleep(20.0)
        store.back.set()
        store.back = None
        await trio.sleep(10.0)
        assert fenced_at == []
        renewed = store.renewals[-1][0]
        store.unreachable = True
        await trio.sleep(20.0)
        nursery.cancel_scope.cancel()
    assert len(fenced_at) == 1  # once, by the fence rule: before the lease could lapse
    assert renewed + lease.fence_after <= fenced_at[0] < renewed + lease.seconds
