"""The usage report: totals for a period, by day, model and tool, and for an admin of a service
by user (the `usage` tool and command).

Periods (UTC): ``today``, ``month`` (this calendar month), ``Nd`` (the last N days, today
included, e.g. ``7d``), ``all``. Every figure says when prices were unknown (`Spent.describe`).
"""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime

from ask_another.errors import InvalidArgument
from ask_another.services import Services
from ask_another.spend.budget import ceilings, counted_since, period_start
from ask_another.store.usage import LOCAL_NAME, Spent, Totals, usage_totals
from ask_another.users import LOCAL_USER, User

__all__ = ["PERIODS", "period_bounds", "usage_report"]

PERIODS = "today, month, Nd (the last N days, e.g. 7d) or all"


def period_bounds(period: str, now: float) -> tuple[float, float, str]:
    """`(since, until, label)` for a period name; raises `InvalidArgument` for a bad one."""
    name = (period or "month").strip().lower()
    until = now + 1
    if name == "today":
        return period_start("day", now)[0], until, "today (UTC)"
    if name == "month":
        return period_start("month", now)[0], until, "this month (UTC)"
    if name == "all":
        return 0.0, until, "all time"
    days = re.fullmatch(r"(\d{1,4})d", name)
    if days and int(days.group(1)) >= 1:
        n = int(days.group(1))
        return period_start("day", now)[0] - (n - 1) * 86400, until, f"the last {n} days (UTC)"
    raise InvalidArgument(f"unknown period {period!r}: use {PERIODS}")


def _line(name: str, spent: Spent) -> str:
    tokens = f"{spent.prompt_tokens:,} tokens in, {spent.completion_tokens:,} out"
    calls = f"{spent.calls} call{'s' if spent.calls != 1 else ''}"
    return f"  {name}: {spent.describe()} · {calls} · {tokens}"


def _table(title: str, rows: dict[str, Spent]) -> list[str]:
    return [f"By {title}:", *(_line(k, v) for k, v in rows.items())] if rows else []


async def usage_report(services: Services, period: str = "month", user: User = LOCAL_USER
                       ) -> str:
    """The report text for `period` (see the module docstring) of the calls `user` may see (an
    admin: everyone's), with the ceilings' state for `user`'s own spend."""
    now = time.time()
    since, until, label = period_bounds(period, now)
    db = await services.database()
    totals: Totals = await usage_totals(db, since, until, user)
    if not totals.total.calls:
        lines = [f"No provider calls recorded for {label}."]
    else:
        lines = [f"Usage for {label}: {totals.total.describe()} over {totals.total.calls} "
                 f"provider call{'s' if totals.total.calls != 1 else ''}",
                 *_table("day", totals.by_day), *_table("model", totals.by_model),
                 *_table("tool", totals.by_tool)]
        if set(totals.by_user) - {LOCAL_NAME}:  # a service's admin: who spent it
            lines += _table("user", totals.by_user)
    for ceiling in ceilings(services):
        start, resets = period_start(ceiling.period, now)
        spent = await counted_since(db, start, user.id)
        when = datetime.fromtimestamp(resets, UTC).strftime("%Y-%m-%d %H:%M UTC")
        lines.append(f"Ceiling {ceiling.variable}: ${ceiling.usd:.2f} per {ceiling.period}, "
                     f"spent: {spent.describe()}, resets at {when}")
    return "\n".join(lines)
