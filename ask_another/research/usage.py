"""What a research job spent: every provider call it made, summed.

A method adds the `Usage` of each call it makes (the plan, each query turn's rounds, repairs,
searches, the compile, a Gemini interaction's reported usage) to its context's `JobUsage`; the job
shows the sum while it runs (check_research: "so far") and stores it with the result ("total").
The price is litellm's (`Usage.cost_usd`); a call whose price litellm does not know is counted in
`unpriced_calls`, so a total is never presented as complete when it is not.

The ledger rows are not written from here: every completion and search of a job goes through the
job's `PaidGateway` (spend/ledger.py), which writes the call's row before the call and completes
it after, and counts it here (`add`). Only a Gemini interaction's usage, reported by the provider
when it completes, is queued here for the ledger (`add_reported`), under the provider's id of the
call (`gemini-interaction:ID`), so another attempt or node that counts it again writes no second
row.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ask_another.costs import cost_text
from ask_another.gateway import Usage

__all__ = ["JobUsage", "usage_text"]


@dataclass(slots=True)
class JobUsage:
    """The running sum of one job's provider calls (mutated by the job's own tasks only)."""

    provider_calls: int = 0
    searches: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    unpriced_calls: int = 0
    # Reported calls (a Gemini interaction's) not yet written to the usage ledger: the job
    # writes them at each budget check and when its method returns (spend/).
    unrecorded: list[tuple[Usage, bool, str]] = field(default_factory=list)

    @classmethod
    def so_far(cls, calls: int, searches: int, prompt_tokens: int, completion_tokens: int,
               known_usd: float, unknown_calls: int) -> JobUsage:
        """The usage of a job resumed after a kill, from its ledger rows so far."""
        return cls(provider_calls=calls, searches=searches, prompt_tokens=prompt_tokens,
                   completion_tokens=completion_tokens, cost_usd=known_usd,
                   unpriced_calls=unknown_calls)

    def add(self, usage: Usage, *, search: bool = False) -> None:
        """Count one provider call (a completion, or a web search when `search`) whose ledger
        row its gateway wrote (see the module docstring)."""
        self.provider_calls += 1
        self.searches += int(search)
        self.prompt_tokens += usage.prompt_tokens or 0
        self.completion_tokens += usage.completion_tokens or 0
        if usage.cost_usd is None:
            self.unpriced_calls += 1
        else:
            self.cost_usd += usage.cost_usd

    def add_reported(self, reported: Mapping[str, Any], call_id: str | None = None,
                     cost_usd: float | None = None) -> None:
        """Count one call whose provider reported its usage as a mapping (a Gemini
        interaction: ``total_input_tokens`` / ``total_output_tokens``, or OpenAI's names) and
        litellm priced at `cost_usd` (None: unknown)."""
        def number(*names: str) -> int:
            for name in names:
                value = reported.get(name)
                if isinstance(value, int | float) and not isinstance(value, bool):
                    return int(value)
            return 0

        usage = Usage(prompt_tokens=number("total_input_tokens", "input_tokens",
                                           "prompt_tokens"),
                      completion_tokens=number("total_output_tokens", "output_tokens",
                                               "completion_tokens"),
                      cost_usd=cost_usd)
        self.add(usage)
        self.unrecorded.append((usage, False, call_id or secrets.token_hex(12)))

    def take_unrecorded(self) -> list[tuple[Usage, bool, str]]:
        """The calls not yet in the usage ledger (and forget them): `(usage, search, call_id)`
        each."""
        taken, self.unrecorded = self.unrecorded, []
        return taken

    def as_dict(self) -> dict[str, Any]:
        """The sum as stored and shown: `cost_usd` is None when no call had a known price."""
        priced = self.provider_calls - self.unpriced_calls
        return {"provider_calls": self.provider_calls, "searches": self.searches,
                "prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
                "cost_usd": round(self.cost_usd, 8) if priced else None,
                "unpriced_calls": self.unpriced_calls}


def usage_text(usage: Mapping[str, Any]) -> str:
    """One line for people: calls, tokens, cost (and how many calls had no known price)."""
    calls = int(usage.get("provider_calls") or 0)
    searches = int(usage.get("searches") or 0)
    text = f"{calls} provider call{'s' if calls != 1 else ''}"
    if searches:
        text += f" ({searches} web search{'es' if searches != 1 else ''})"
    text += (f", {int(usage.get('prompt_tokens') or 0):,} tokens in, "
             f"{int(usage.get('completion_tokens') or 0):,} out")
    cost = usage.get("cost_usd")
    unpriced = int(usage.get("unpriced_calls") or 0)
    known = float(cost) if cost is not None else 0.0
    return f"{text}, {cost_text(known, unpriced if cost is not None else calls, calls)}"
