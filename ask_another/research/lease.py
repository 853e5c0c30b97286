"""This process's ownership of its research jobs: the lease it holds and the heartbeat loop.

`Lease` names the owner (host, pid and a random tag, unique per runtime) and how long a lease
lasts; `heartbeat` is the loop `JobOwner` (supervisor.py) runs: it renews every lease this owner
holds in ONE statement every `lease.seconds / 3` (so a job's lease survives two lost beats), takes
the requests other processes stored for its jobs every `REQUEST_POLL` seconds, and every
`lease.seconds / 2` looks for jobs whose lease has expired. The loop is written against the
`JobStore` interface with trio's clock for its schedule and `lease.wall` for the leases' times,
so its timings are tested on MockClock (tests/ask_another/research/test_lease_timings.py).

A failed store statement (a locked file, a full disk) is logged and the loop goes on: the next
beat retries, and a lease lapses only after `lease.seconds` without any successful renewal.
"""

from __future__ import annotations

import os
import secrets
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Final

import trio

from ask_another.errors import StoreError
from ask_another.logs import get_logger
from ask_another.store.jobs import JobRecord, JobRequest, JobStore

__all__ = ["REQUEST_POLL", "HeartbeatStatistics", "Lease", "heartbeat", "new_owner"]

log = get_logger("ask_another.research")

REQUEST_POLL: Final = 0.5
"""Seconds between two looks for requests made in other processes (they wait ~0.5 s on average)."""


def new_owner() -> str:
    """An owner id unique to this runtime: readable in the store, never reused."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


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


@dataclass(slots=True)
class HeartbeatStatistics:
    """What a heartbeat has done so far (`JobOwner.statistics()`, the benchmark reads it)."""

    renewals: int = 0  # renewal statements run (one per beat, whatever the number of jobs)
    renewed_max: int = 0  # the most leases one renewal statement extended
    renew_seconds_max: float = 0.0  # the slowest renewal, from the call to its commit
    failures: int = 0  # beats whose store statements failed
    requests: int = 0  # requests from other processes taken


RenewedFn = Callable[[set[str]], Awaitable[None]]
RequestsFn = Callable[[list[JobRequest]], Awaitable[None]]
ExpiredFn = Callable[[list[JobRecord]], Awaitable[None]]


async def heartbeat(store: JobStore, lease: Lease, *, on_renewed: RenewedFn,
                    on_requests: RequestsFn, on_expired: ExpiredFn,
                    request_poll: float = REQUEST_POLL,
                    statistics: HeartbeatStatistics | None = None) -> None:
    """Run forever (cancel it to stop): renew, take requests, sweep expired leases, each on its
    own schedule. The first renewal and sweep happen one period after the call (the caller has
    just claimed and swept)."""
    stats = statistics if statistics is not None else HeartbeatStatistics()
    begin = trio.current_time()
    next_renew, next_sweep = begin + lease.renew_every, begin + lease.sweep_every
    while True:
        await trio.sleep_until(min(trio.current_time() + request_poll, next_renew, next_sweep))
        now = trio.current_time()
        try:
            if now >= next_renew:
                next_renew = now + lease.renew_every
                wall = lease.wall()
                held = await store.renew(lease.owner, wall + lease.seconds, wall)
                stats.renewals += 1
                stats.renewed_max = max(stats.renewed_max, len(held))
                stats.renew_seconds_max = max(stats.renew_seconds_max,
                                              trio.current_time() - now)
                await on_renewed(held)
            requests = await store.take_requests(lease.owner, lease.wall())
            if requests:
                stats.requests += len(requests)
                await on_requests(requests)
            if now >= next_sweep:
                next_sweep = now + lease.sweep_every
                expired = await store.expired(lease.wall())
                if expired:
                    await on_expired(expired)
        except StoreError as exc:
            stats.failures += 1
            log.warning("research.heartbeat_failed", owner=lease.owner, error=str(exc))
