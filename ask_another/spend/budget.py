"""The budget ceilings: `ASK_ANOTHER_BUDGET_DAY_USD` and `ASK_ANOTHER_BUDGET_MONTH_USD`.

The ceilings are per user: each user's own spend (the usage rows they made; the local user's
on stdio) is checked against them, so on a team service one member's spending never stops
another's (docs/deploy.md, "Users and limits").

Periods are UTC: a day from midnight, a month from the first. `check_budget(services,
estimate)` refuses (raises `BudgetExceeded`) a call whose estimate would take the known spend
of a period past its ceiling, naming the ceiling, what was spent and when it resets; with no
estimate (a running job's next step) it refuses once the spend has reached a ceiling. Calls of
unknown price count as nothing here (their price is unknown) but are named in the message.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime

from ask_another.costs import usd_text
from ask_another.errors import AskAnotherError
from ask_another.services import Services
from ask_another.spend.before import stored_estimate
from ask_another.spend.estimate import Estimate
from ask_another.store.db import Database
from ask_another.store.jobs import job_store
from ask_another.store.usage import Spent, spent_since, unpriced_jobs_since

__all__ = ["BudgetExceeded", "Ceiling", "Counted", "ceilings", "check_budget", "counted_since",
           "period_start"]


class BudgetExceeded(AskAnotherError):
    """A call or a job's next step would cross a budget ceiling."""


@dataclass(frozen=True, slots=True)
class Ceiling:
    variable: str
    period: str  # "day" or "month"
    usd: float


@dataclass(frozen=True, slots=True)
class Counted:
    """A user's spend as the ceilings count it: the ledger's known sum (`spent`), plus
    `estimated_usd` for the `estimated_jobs` research jobs of unknown price counted at their
    estimates (see the module docstring)."""

    spent: Spent
    estimated_usd: float = 0.0
    estimated_jobs: int = 0
    estimated_calls: int = 0  # the calls of unknown price the estimates stand for

    @property
    def usd(self) -> float:
        """The amount the ceilings are checked against."""
        return self.spent.known_usd + self.estimated_usd

    def describe(self) -> str:
        """`$1.22`, or `$1.25 (of which $1.22 estimated: 1 job of unknown price at its
        estimate)`, then any other calls of unknown price (`Spent.describe`'s wording)."""
        if not self.estimated_jobs:
            return self.spent.describe()
        jobs = f"{self.estimated_jobs} job{'s' if self.estimated_jobs != 1 else ''}"
        text = (f"{usd_text(self.usd)} (of which {usd_text(self.estimated_usd)} estimated: "
                f"{jobs} of unknown price at {'its' if self.estimated_jobs == 1 else 'their'} "
                "estimate)")
        others = self.spent.unknown_calls - self.estimated_calls
        if others > 0:
            text += f" + {others} call{'s' if others != 1 else ''} of unknown price"
        return text


async def counted_since(db: Database, since: float, user_id: str | None = None) -> Counted:
    """What the user `user_id` (None: the local user) spent from `since` on, as the ceilings
    count it: each research job with calls of unknown price at its stored estimate, where that
    is more than its known sum (see the module docstring)."""
    spent = await spent_since(db, since, user_id)
    if not spent.unknown_calls:
        return Counted(spent)
    extra, jobs, calls = 0.0, 0, 0
    store = job_store(db)
    for job_id, (known, unknown) in (await unpriced_jobs_since(db, since, user_id)).items():
        record = await store.get(job_id)
        estimate = stored_estimate(record.detail) if record is not None else None
        if estimate is None or estimate.known_usd <= known:
            continue
        extra, jobs, calls = extra + estimate.known_usd - known, jobs + 1, calls + unknown
    return Counted(spent, extra, jobs, calls)


def ceilings(services: Services) -> list[Ceiling]:
    config = services.config
    found = []
    if config.budget_day_usd is not None:
        found.append(Ceiling("ASK_ANOTHER_BUDGET_DAY_USD", "day", config.budget_day_usd))
    if config.budget_month_usd is not None:
        found.append(Ceiling("ASK_ANOTHER_BUDGET_MONTH_USD", "month", config.budget_month_usd))
    return found


def period_start(period: str, now: float) -> tuple[float, float]:
    """The UTC start of the `period` ("day" or "month") holding `now`, and when it resets."""
    at = datetime.fromtimestamp(now, UTC)
    if period == "day":
        start = at.replace(hour=0, minute=0, second=0, microsecond=0)
        return start.timestamp(), start.timestamp() + 86400
    start = at.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    year, month = (start.year + 1, 1) if start.month == 12 else (start.year, start.month + 1)
    return start.timestamp(), start.replace(year=year, month=month).timestamp()


def _when(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M UTC")


async def check_budget(services: Services, estimate: Estimate | None = None,
                       what: str = "this call", user_id: str | None = None) -> None:
    """Raise `BudgetExceeded` if `estimate` (None: a running job's next step) would take the
    spend of the user `user_id` (None: the local user) across a ceiling. Only the known part of
    the spend and of `estimate` counts, and each research job of unknown price at its own
    estimate (`counted_since`); the message says what is unknown (never "$0")."""
    found = ceilings(services)
    if not found:
        return
    db = await services.database()
    now = time.time()
    for ceiling in found:
        start, resets = period_start(ceiling.period, now)
        spent = await counted_since(db, start, user_id)
        over = (spent.usd >= ceiling.usd if estimate is None
                else spent.usd + estimate.known_usd > ceiling.usd)
        if not over:
            continue
        this = "this " + ("month" if ceiling.period == "month" else "day")
        estimated = "" if estimate is None else f"; {what} is estimated at {estimate.describe()}"
        raise BudgetExceeded(
            f"Refused: {what} would cross the budget ceiling {ceiling.variable}="
            f"${ceiling.usd:.2f} per {ceiling.period}{'' if user_id is None else ' per user'}; "
            f"spent {this}: {spent.describe()}"
            f"{estimated}. The {ceiling.period}'s spend resets at {_when(resets)}; raise "
            f"{ceiling.variable} to go on now")
