"""How a cost reads for people, in one place: the known sum, and the calls of unknown price.

litellm has no price for some models; such a call's cost is unknown, never $0. Every figure a
user sees (a call's usage line, a research job's usage, the usage report, a consensus total, a
budget refusal) is worded here, so unknown reads the same everywhere:

    $0.001200                               every price known (or no call at all)
    $0.001200 + 2 calls of unknown price    some prices unknown
    cost unknown                            no price known
"""

from __future__ import annotations

__all__ = ["cost_text"]


def cost_text(known_usd: float, unknown_calls: int, calls: int) -> str:
    """`calls` calls cost `known_usd` plus the price of the `unknown_calls` of them that have no
    known price."""
    if unknown_calls and unknown_calls >= calls:
        return "cost unknown"
    text = f"${known_usd:.6f}"
    if unknown_calls:
        text += f" + {unknown_calls} call{'s' if unknown_calls != 1 else ''} of unknown price"
    return text
