"""The spending page's figures: the ledger by day, model (and, for an admin, user), the budget
ceilings and how much of each is used, a bar chart drawn as SVG on the server, and the same
figures as CSV.

The figures come from the store's usage totals as `ask-another usage` reads them
(spend/report.py), for the calls the user may see (an admin: everyone's); a ceiling's use is the
user's own spend, as `check_budget` counts it (`counted_since`: a research job of unknown price
at its estimate, said as "estimated").
"""

from __future__ import annotations

import csv
import io
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

from markupsafe import Markup, escape

from ask_another.services import Services
from ask_another.spend.budget import Counted, ceilings, counted_since, period_start
from ask_another.spend.report import period_bounds
from ask_another.store.usage import LOCAL_NAME, Spent, Totals, usage_totals
from ask_another.users import User

__all__ = [
    "PERIODS",
    "CeilingUse",
    "Spending",
    "UserUse",
    "ceiling_uses",
    "chart_svg",
    "dollars",
    "spending",
    "spending_csv",
    "usd_text",
]

PERIODS: Final = (("today", "Today"), ("7d", "7 days"), ("30d", "30 days"),
                  ("month", "This month"), ("all", "All time"))


@dataclass(frozen=True, slots=True)
class CeilingUse:
    variable: str
    period: str
    usd: float
    spent: Counted
    resets: str

    @property
    def share(self) -> float:
        return self.spent.usd / self.usd if self.usd > 0 else 1.0

    @property
    def left_usd(self) -> float:
        """What is left of it before calls are refused (never below nothing)."""
        return max(self.usd - self.spent.usd, 0.0)

    @property
    def reached(self) -> bool:
        """Whether calls are refused until it resets (`check_budget` refuses a call once the
        spend has reached the ceiling)."""
        return self.spent.usd >= self.usd


@dataclass(frozen=True, slots=True)
class UserUse:
    """One user's spend against each ceiling (an admin's page)."""

    user_id: str | None
    uses: list[CeilingUse]


@dataclass(frozen=True, slots=True)
class Spending:
    period: str
    label: str
    totals: Totals
    ceilings: list[CeilingUse]
    by_user: list[UserUse]  # for an admin: every user who spent in a ceiling's period


async def ceiling_uses(services: Services, user_id: str | None) -> list[CeilingUse]:
    """The user's own spend against each ceiling now, as `check_budget` counts it for them (a
    spend card says what is left of each)."""
    now = time.time()
    db = await services.database()
    uses = []
    for ceiling in ceilings(services):
        start, resets = period_start(ceiling.period, now)
        uses.append(CeilingUse(ceiling.variable, ceiling.period, ceiling.usd,
                               await counted_since(db, start, user_id),
                               datetime.fromtimestamp(resets, UTC).strftime("%Y-%m-%d %H:%M")))
    return uses


async def spending(services: Services, user: User, period: str) -> Spending:
    """The figures of `period` (a name of `PERIODS`, or Nd; `InvalidArgument` otherwise)."""
    now = time.time()
    since, until, label = period_bounds(period, now)
    db = await services.database()
    totals = await usage_totals(db, since, until, user)
    uses = []
    users: dict[str | None, list[CeilingUse]] = {}
    limits = ceilings(services)
    for ceiling in limits:
        start, resets = period_start(ceiling.period, now)
        reset_text = datetime.fromtimestamp(resets, UTC).strftime("%Y-%m-%d %H:%M")
        spent = await counted_since(db, start, user.id)
        uses.append(CeilingUse(ceiling.variable, ceiling.period, ceiling.usd, spent, reset_text))
        if user.admin:
            # Each user's own spend, as check_budget counts it for them.
            for who in (await usage_totals(db, start, now + 1, user)).by_user:
                user_id = None if who == LOCAL_NAME else who
                users.setdefault(user_id, [])
    for user_id, their in users.items():
        for ceiling in limits:
            start, resets = period_start(ceiling.period, now)
            their.append(CeilingUse(
                ceiling.variable, ceiling.period, ceiling.usd,
                await counted_since(db, start, user_id),
                datetime.fromtimestamp(resets, UTC).strftime("%Y-%m-%d %H:%M")))
    return Spending(period, label, totals, uses,
                    [UserUse(user_id, their) for user_id, their in users.items()])


def usd_text(usd: float) -> str:
    """Dollars to the cent from a cent up (`$1,234.50`), two significant figures below."""
    return f"${usd:,.2f}" if usd >= 0.01 or usd == 0 else f"${usd:.2g}"


def dollars(spent: Spent | Counted) -> str:
    """A spend as people read it: dollars to the cent from a cent up (`$1.22`), two
    significant figures below (`$0.0012`), and the calls of unknown price beside it (a ceiling's
    use: with what of it is estimated, `Counted.describe`)."""
    if isinstance(spent, Counted):
        return spent.describe()
    amount = usd_text(spent.known_usd)
    if spent.unknown_calls and spent.unknown_calls >= spent.calls:
        return "cost unknown"
    if spent.unknown_calls:
        calls = spent.unknown_calls
        amount += f" + {calls} call{'s' if calls != 1 else ''} of unknown price"
    return amount


def spending_csv(figures: Spending) -> str:
    """One row per (table, key): what the page shows, for a spreadsheet."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["by", "key", "known_usd", "calls_of_unknown_price", "calls",
                     "prompt_tokens", "completion_tokens", "calls_unanswered"])
    tables = [("day", figures.totals.by_day), ("model", figures.totals.by_model),
              ("tool", figures.totals.by_tool), ("user", figures.totals.by_user)]
    for name, rows in tables:
        for key, spent in rows.items():
            writer.writerow([name, key, f"{spent.known_usd:.6f}", spent.unknown_calls,
                             spent.calls, spent.prompt_tokens, spent.completion_tokens,
                             spent.unanswered_calls])
    return out.getvalue()


def chart_svg(by_day: dict[str, Spent], title: str) -> Markup:
    """A bar per UTC day of the known spend, with its scale: readable at a glance, no script.
    When no call of the period has a known price, the bars count the calls instead (a chart
    of $0 would say nothing was spent)."""
    width, height, left, bottom, top = 720, 240, 84, 36, 16
    days = list(by_day.items())[-31:]
    if not days:
        return Markup("")
    priced = any(spent.known_usd > 0 for _, spent in days)

    def value(spent: Spent) -> float:
        return spent.known_usd if priced else float(spent.calls)

    def scale(amount: float) -> str:
        return f"${amount:.4g}" if priced else f"{amount:.4g} calls"

    if not priced:
        title = title.replace("Known spend", "Provider calls (no known prices)")
    peak = max(value(spent) for _, spent in days) or 1.0
    plot_w, plot_h = width - left - 12, height - top - bottom
    step = plot_w / len(days)
    bar = min(40.0, max(2.0, step * 0.7))
    parts = [f'<svg class="chart" viewBox="0 0 {width} {height}" role="img" '
             f'aria-label="{escape(title)}" xmlns="http://www.w3.org/2000/svg">',
             f"<title>{escape(title)}</title>"]
    for fraction in (0.0, 0.5, 1.0):
        y = top + plot_h * (1 - fraction)
        parts.append(f'<line x1="{left}" x2="{width - 12}" y1="{y:.1f}" y2="{y:.1f}" '
                     'stroke="#d9dde5"/>')
        parts.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end" font-size="11" '
                     f'fill="#5b6475">{scale(peak * fraction)}</text>')
    label_every = max(1, len(days) // 8)
    for i, (day, spent) in enumerate(days):
        h = plot_h * value(spent) / peak
        x = left + i * step + (step - bar) / 2
        parts.append(f'<rect x="{x:.1f}" y="{top + plot_h - h:.1f}" width="{bar:.1f}" '
                     f'height="{h:.1f}" fill="#2456c9"><title>{escape(day)}: '
                     f'{escape(spent.describe())}, {spent.calls} calls</title></rect>')
        if i % label_every == 0:
            parts.append(f'<text x="{x + bar / 2:.1f}" y="{height - bottom + 16}" '
                         f'text-anchor="middle" font-size="11" fill="#5b6475">'
                         f"{escape(day[5:])}</text>")
    parts.append("</svg>")
    return Markup("".join(parts))
