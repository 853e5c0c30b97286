"""Per-user rate limits of a shared service: tool calls a minute, counted on this node.

`RequestRate` keeps, per named user, the times of their calls in the last 60 s (trio's clock,
so tests run on `MockClock`) and refuses a call that would make more than
`ASK_ANOTHER_RATE_PER_MINUTE` with `LimitReached`, saying when to retry. A refused call is not
counted. The local user of stdio is never limited. It lives in the runtime (one per server
process), not in a module global; each node counts its own calls, so behind a load balancer
that spreads one user over N nodes the user may make up to N times the limit.

The other limit, jobs (research or consensus) running at once per user
(`ASK_ANOTHER_MAX_JOBS_PER_USER`), is counted in the store so it holds across nodes
(research/jobs.py, store/jobs.py `JobStore.insert`).
"""

from __future__ import annotations

import math
from collections import deque
from typing import Final

import trio

from ask_another.errors import LimitReached
from ask_another.users import User

__all__ = ["WINDOW", "RequestRate"]

WINDOW: Final = 60.0
"""Seconds over which tool calls are counted."""


class RequestRate:
    """Tool calls per user in a sliding window of `WINDOW` seconds (see the module docstring)."""

    def __init__(self, per_minute: int, what: str = "tool calls",
                 setting: str = "ASK_ANOTHER_RATE_PER_MINUTE") -> None:
        self.per_minute = per_minute  # 0: no limit
        self.what = what  # what is counted, and the setting that says so, for the refusal
        self.setting = setting
        self._calls: dict[str, deque[float]] = {}

    def check(self, user: User) -> None:
        """Count one call of `user`, or raise `LimitReached` (counting nothing) if they have
        made `per_minute` calls in the last `WINDOW` seconds."""
        if self.per_minute <= 0 or user.id is None:
            return
        now = trio.current_time()
        calls = self._calls.get(user.id)
        if calls is None:
            self._drop_idle(now)
            calls = self._calls[user.id] = deque()
        while calls and calls[0] <= now - WINDOW:
            calls.popleft()
        if len(calls) >= self.per_minute:
            retry = calls[0] + WINDOW - now
            raise LimitReached(
                f"Rate limit reached: at most {self.per_minute} {self.what} a minute per user "
                f"({self.setting}); you made {len(calls)} in the last "
                f"{WINDOW:g} s. Retry in {math.ceil(retry)} s", retry_after=retry)
        calls.append(now)

    def _drop_idle(self, now: float) -> None:
        # A user with no call in the window needs no entry: forget them when a new user comes,
        # so the table holds only the users of the last minute.
        for name in [n for n, c in self._calls.items() if not c or c[-1] <= now - WINDOW]:
            del self._calls[name]
