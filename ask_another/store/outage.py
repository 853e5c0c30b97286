"""Riding out a database outage: a write that cannot reach the database waits for it.

A PostgreSQL server restarting, or a link dropped for a few seconds, made every statement of
that moment fail with `StoreError`: a usage row was lost though the provider billed the call,
and a research job's write failed the job or spent one of its attempts. `until_stored(fn)` runs
`fn` again while it raises `StoreUnavailable` (the database cannot be reached; a statement the
database refused is raised at once), waiting `FIRST_WAIT` seconds, doubling up to `MOST_WAIT`,
for at most `patience` seconds; then the last `StoreUnavailable` is raised. The first wait is
logged (`store.waiting`), the recovery too (`store.reachable`).

A full disk (`StoreFull`) is waited for the same way by the work that runs in the background
(`waits_for=WAITS_FOR_SPACE`: a research job's writes and its calls' ledger rows), so that such
a job pauses until space returns rather than failing or crashing (a crash was restarted at once
by its supervisor: thousands of restarts and log lines a second while the disk stayed full); a
person's call (a completion's row, a conversation's turn) is told at once instead.

A write retried after a lost connection may have been committed the first time: the writes
retried here are idempotent (a usage row's `call_id` is unique; a job's updates are guarded by
its state). Cancellation interrupts a wait at once.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Final, TypeVar

import trio

from ask_another.errors import StoreFull, StoreUnavailable
from ask_another.logs import get_logger

__all__ = ["FIRST_WAIT", "MOST_WAIT", "WAITS_FOR_SPACE", "until_stored"]

log = get_logger("ask_another.store")

T = TypeVar("T")

FIRST_WAIT: Final = 0.25
MOST_WAIT: Final = 2.0
WAITS_FOR_SPACE: Final = (StoreUnavailable, StoreFull)
"""What background work waits out: an outage and a full disk."""


async def until_stored(fn: Callable[[], Awaitable[T]], *, patience: float, what: str,
                       waits_for: tuple[type[Exception], ...] = (StoreUnavailable,),
                       **context: Any) -> T:
    """`await fn()`, again after each error of `waits_for` (`StoreUnavailable`; with
    `WAITS_FOR_SPACE`, `StoreFull` too) until `patience` seconds have passed (see the module
    docstring). `what` and `context` name the write in the log."""
    deadline = trio.current_time() + patience
    wait, waited = FIRST_WAIT, False
    while True:
        try:
            result = await fn()
        except waits_for as exc:
            if trio.current_time() + wait > deadline:
                log.error("store.gave_up", what=what, patience=patience, error=str(exc),
                          **context)
                raise
            if not waited:
                log.warning("store.waiting", what=what, error=str(exc), **context)
                waited = True
            await trio.sleep(wait)
            wait = min(wait * 2, MOST_WAIT)
            continue
        if waited:
            log.info("store.reachable", what=what, **context)
        return result
