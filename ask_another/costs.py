"""How a cost reads for people, in one place: dollars, the known sum, and the calls of unknown
price.

Dollars read to the cent from a cent up (`$0.02`, `$1.22`, `$1,234.50`), and to two significant
figures below it (`$0.0012`, `$0.00062`), so a sum of cheap calls is not shown as `$0.00`.

litellm has no price for some models; such a call's cost is unknown, never $0. Every figure a
user sees (a call's usage line, a research job's usage, the usage report, a consensus total, a
budget refusal, an estimate) is worded here, so unknown reads the same everywhere:

    $0.02                               every price known (or no call at all: `$0.00`)
    $0.0012 + 2 calls of unknown price  some prices unknown
    cost unknown                        no price known
"""

from __future__ import annotations

import math

__all__ = ["cost_text", "usd_text"]


def usd_text(usd: float) -> str:
    """`usd` dollars as people read them: to the cent from a cent up, two significant figures
    below (as `format(usd, ".2g")` writes them, but never in exponent notation)."""
    rounded = float(f"{usd:.2g}")  # $0.00999 reads $0.01, not $0.0100
    if rounded >= 0.01 or rounded <= 0:
        return f"${usd:,.2f}"
    return f"${rounded:.{1 - math.floor(math.log10(rounded))}f}".rstrip("0")


def cost_text(known_usd: float, unknown_calls: int, calls: int) -> str:
    """`calls` calls cost `known_usd` plus the price of the `unknown_calls` of them that have no
    known price."""
    if unknown_calls and unknown_calls >= calls:
        return "cost unknown"
    text = usd_text(known_usd)
    if unknown_calls:
        text += f" + {unknown_calls} call{'s' if unknown_calls != 1 else ''} of unknown price"
    return text
