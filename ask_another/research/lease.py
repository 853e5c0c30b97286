"""This process's ownership of its research jobs: the lease it holds and the heartbeat loop.

`Lease` names the owner (host, pid and a random tag, unique per runtime) and how long a lease
lasts; `heartbeat` is the loop `JobOwner` (supervisor.py) runs: it renews every lease this owner
holds in ONE statement every `lease.seconds / 3` (so a job's lease survives two lost beats), takes
the requests other processes stored for its jobs every `REQUEST_POLL` seconds, and every
`lease.seconds / 2` looks for jobs whose lease has expired. The loop is written against
`Leases`, the three `JobStore` methods it needs, with trio's clock for its schedule and
`lease.wall` for the leases' times, so its timings are tested on MockClock against a store in
memory (tests/ask_another/research/test_lease_timings.py).

A failed store statement (a locked file, a full disk) is logged and the loop goes on: the next
beat retries, and a lease lapses only after `lease.seconds` without any successful renewal.

Fencing: a lease that has not been renewed for `lease.fence_after` seconds (`FENCE` of the lease,
counted from the start of the last renewal that went through, so before the database could count
its expiry) is about to lapse, and another node may then take the jobs over. A watchdog beside
the loop calls `on_fenced` then, once, whatever the loop is blocked on (a statement waiting for a
database that went away): the owner stops its jobs' work, so two nodes never run one job. Before
this, a 10 s outage let a live node's jobs be taken over while it still ran them. The next
renewal that goes through in time (it returns within `fence_after` of its start, so the expiry it
set is still ahead) ends the fence: `on_unfenced(held)` starts again what was stopped.

The fence needs a sign that the database is away, not just slow: a statement that failed as
unreachable (`StoreUnavailable`) since the last renewal, or, with `slow_is_away` (PostgreSQL, a
server over a network, where a dropped link can hang a statement without an error), a renewal
that has not returned. On SQLite the processes share one machine and its file cannot be
unreachable: a renewal queued behind a burst of writes is load, and stopping jobs for it would
only fail the ones that cannot resume (measured: a 1,300-job burst with 3 s leases fenced twice).
"""

from __future__ import annotations

import os
import secrets
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Final, Protocol

import trio

from ask_another.errors import StoreError, StoreUnavailable
from ask_another.logs import get_logger
from ask_another.store.jobs import JobRecord, JobRequest

__all__ = ["FENCE", "REQUEST_POLL", "HeartbeatStatistics", "Lease", "Leases", "heartbeat",
           "new_owner", "owner_prefix"]

log = get_logger("ask_another.research")

REQUEST_POLL: Final = 0.5
"""Seconds between two looks for requests made in other processes (they wait ~0.5 s on average)."""
FENCE: Final = 0.6
"""The part of a lease after which an owner that could not renew stops its jobs (fencing): just
after the second failed renewal, with 40 % of the lease left to stop in and for clocks to
differ."""


class Leases(Protocol):
    """What the heartbeat asks of the job store (`store.jobs.JobStore` has each of these)."""

    async def renew(self, owner: str, lease_expires: float, now: float) -> set[str]: ...

    async def take_requests(self, owner: str, now: float) -> list[JobRequest]: ...

    async def expired(self, now: float) -> list[JobRecord]: ...


def new_owner() -> str:
    """An owner id unique to this runtime: readable in the store, never reused."""
    return f"{owner_prefix(os.getpid())}{secrets.token_hex(4)}"


def owner_prefix(pid: int) -> str:
    """How the owner ids of process `pid` on this machine begin (`doctor` finds the job host's
    jobs by it)."""
    return f"{socket.gethostname()}:{pid}:"


@dataclass(frozen=True, slots=True)
class Lease:
    """The lease this process's runtime holds on each of its running jobs."""

    owner: str
    seconds: float
    wall: Callable[[], float] = field(default=time.time, repr=False)

    def until(self) -> float:
        """The expiry of a lease taken or renewed now."""
        return self.wall() + self.seconds

    @property
    def renew_every(self) -> float:
        return self.seconds / 3

    @property
    def sweep_every(self) -> float:
        return self.seconds / 2

    @property
    def fence_after(self) -> float:
        return self.seconds * FENCE


@dataclass(slots=True)
class HeartbeatStatistics:
    """What a heartbeat has done so far (`JobOwner.statistics()`, the benchmark reads it)."""

    renewals: int = 0  # renewal statements run (one per beat, whatever the number of jobs)
    renewed_max: int = 0  # the most leases one renewal statement extended
    renew_seconds_max: float = 0.0  # the slowest renewal, from the call to its commit
    failures: int = 0  # beats whose store statements failed
    requests: int = 0  # requests from other processes taken
    fences: int = 0  # times the jobs were stopped for want of a renewal


RenewedFn = Callable[[set[str]], Awaitable[None]]
RequestsFn = Callable[[list[JobRequest]], Awaitable[None]]
ExpiredFn = Callable[[list[JobRecord]], Awaitable[None]]
FencedFn = Callable[[], Awaitable[None]]


async def _nothing() -> None:
    await trio.lowlevel.checkpoint()


@dataclass(slots=True)
class _Renewal:
    at: float  # trio time at which the last renewal that went through started
    fenced: bool = False
    away: bool = False  # a statement failed as unreachable since that renewal


async def _watchdog(lease: Lease, renewal: _Renewal, on_fenced: FencedFn,
                    stats: HeartbeatStatistics, poll: float, slow_is_away: bool) -> None:
    while True:
        deadline = renewal.at + lease.fence_after
        now = trio.current_time()
        if now < deadline and not renewal.fenced:
            await trio.sleep_until(deadline)
            continue
        if renewal.fenced or not (renewal.away or slow_is_away):
            await trio.sleep_until(now + poll)
            continue
        renewal.fenced = True
        stats.fences += 1
        log.warning("research.fenced", owner=lease.owner,
                    unrenewed_for=round(trio.current_time() - renewal.at, 3),
                    lease_seconds=lease.seconds)
        await on_fenced()


async def _none(_: set[str]) -> None:
    await trio.lowlevel.checkpoint()


async def heartbeat(store: Leases, lease: Lease, *, on_renewed: RenewedFn,
                    on_requests: RequestsFn, on_expired: ExpiredFn,
                    on_fenced: FencedFn = _nothing, on_unfenced: RenewedFn = _none,
                    slow_is_away: bool = True, request_poll: float = REQUEST_POLL,
                    sweep_every: float | None = None,
                    statistics: HeartbeatStatistics | None = None) -> None:
    """Run forever (cancel it to stop): renew, take requests, sweep expired leases, each on its
    own schedule, with the fencing watchdog beside them (see the module docstring;
    `slow_is_away`: a renewal that does not return counts as the database being away;
    `sweep_every`: seconds between sweeps, `lease.sweep_every` unless given: the job host sweeps
    at every request poll, so a job a session handed back as it ended moves within a second).
    The first renewal and sweep happen one period after the call (the caller has just claimed
    and swept)."""
    stats = statistics if statistics is not None else HeartbeatStatistics()
    begin = trio.current_time()
    renewal = _Renewal(begin)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_watchdog, lease, renewal, on_fenced, stats, request_poll,
                           slow_is_away)
        await _beat(store, lease, renewal, stats, on_renewed, on_unfenced, on_requests,
                    on_expired, request_poll, sweep_every or lease.sweep_every, begin)


async def _beat(store: Leases, lease: Lease, renewal: _Renewal, stats: HeartbeatStatistics,
                on_renewed: RenewedFn, on_unfenced: RenewedFn, on_requests: RequestsFn,
                on_expired: ExpiredFn, request_poll: float, sweep_every: float,
                begin: float) -> None:
    next_renew, next_sweep = begin + lease.renew_every, begin + sweep_every
    while True:
        await trio.sleep_until(min(trio.current_time() + request_poll, next_renew, next_sweep))
        now = trio.current_time()
        # Both schedules move on before their statements run: a sweep put off by a failed
        # statement before it left its time in the past, and the loop spun (a warning a turn)
        # while the database was away.
        sweep = now >= next_sweep
        if sweep:
            next_sweep = now + sweep_every
        try:
            if now >= next_renew:
                next_renew = now + lease.renew_every
                wall = lease.wall()
                held = await store.renew(lease.owner, wall + lease.seconds, wall)
                renewal.at, renewal.away = now, False
                unfenced = renewal.fenced and trio.current_time() < now + lease.fence_after
                if unfenced:
                    renewal.fenced = False
                    log.info("research.unfenced", owner=lease.owner)
                stats.renewals += 1
                stats.renewed_max = max(stats.renewed_max, len(held))
                stats.renew_seconds_max = max(stats.renew_seconds_max,
                                              trio.current_time() - now)
                await on_renewed(held)
                if unfenced:
                    await on_unfenced(held)
            requests = await store.take_requests(lease.owner, lease.wall())
            if requests:
                stats.requests += len(requests)
                await on_requests(requests)
            if sweep:
                expired = await store.expired(lease.wall())
                if expired:
                    await on_expired(expired)
        except StoreError as exc:
            renewal.away = renewal.away or isinstance(exc, StoreUnavailable)
            stats.failures += 1
            log.warning("research.heartbeat_failed", owner=lease.owner, error=str(exc))
