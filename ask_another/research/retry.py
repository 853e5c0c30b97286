"""The one definition of a retryable provider error and of the backoff between attempts.

Used by the research job's attempt loop (job.py) and by the sequential pipeline's queries
(research/methods/sequential.py): a retry is a loop in the code that does the work, never a
crash and a supervisor restart (that is for bugs).
"""

from __future__ import annotations

from typing import Final

from ask_another.errors import ProviderUnavailable, RateLimited

__all__ = ["MAX_BACKOFF", "TRANSIENT", "backoff"]

MAX_BACKOFF: Final = 60.0
TRANSIENT: Final = (RateLimited, ProviderUnavailable)
"""The provider errors worth another attempt: a rate limit, a 5xx, a dropped connection."""


def backoff(attempt: int, unit: float, cap: float = MAX_BACKOFF) -> float:
    """Seconds to wait before `attempt` (2, 3, ...): `unit` × 2^(attempt-2), at most `cap`
    (`unit`: ASK_ANOTHER_POLL_SECONDS)."""
    # 2.0, not 2: int ** int may be a float (a negative power), so mypy types it Any.
    return min(cap, unit * 2.0 ** max(0, attempt - 2))
