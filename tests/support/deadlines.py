"""Time limits for tests that cannot avoid one, scaled for a busy machine.

Tests wait on conditions; a time limit is only a guard against hanging forever (a process that
never answers, a thread that cannot be cancelled). Such a limit, set on an idle laptop, is missed
on a CI machine running two suites at once: `generous(seconds)` is the one place that stretches
it. The factor is ASK_ANOTHER_TEST_SLOWDOWN when set (CI can say how slow it is), else the load
average per core over the last minute, at least 1 and at most 10 (a load of 10 on 2 cores
gives 5 times the limit).
"""

from __future__ import annotations

import os


def slowdown() -> float:
    """How much slower than an idle machine this one runs now (1 at least)."""
    given = os.environ.get("ASK_ANOTHER_TEST_SLOWDOWN", "")
    try:
        return max(1.0, float(given))
    except ValueError:
        pass
    cores = len(os.sched_getaffinity(0)) or 1
    return min(10.0, max(1.0, os.getloadavg()[0] / cores))


def generous(seconds: float) -> float:
    """`seconds` (a limit that holds on an idle machine) times `slowdown()`."""
    return seconds * slowdown()
