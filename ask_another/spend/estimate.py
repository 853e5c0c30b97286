"""Estimates before expensive work, from litellm's price map (`litellm.model_cost`).

A completion's estimate: its input tokens (about four characters a token, the messages as
sent) at the model's input price, plus `ASSUMED_OUTPUT_TOKENS` (or the model's output limit, if
lower) at its output price. A deep-research model's estimate is one task as `RESEARCH_TASK`
describes it, at the model's prices in the same map (its per-search price too, where the map
has one). A model the map has no price for is estimated as unknown (None), never $0.

An `Estimate` keeps a line per model, so an answer can say what it is made of.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from ask_another.costs import usd_text

__all__ = [
    "ASSUMED_OUTPUT_TOKENS",
    "ASSUMED_STEPS",
    "RESEARCH_TASK",
    "Estimate",
    "Line",
    "ResearchTask",
    "allowed_prices",
    "completion_line",
    "research_estimate",
    "research_line",
]

ASSUMED_OUTPUT_TOKENS: Final = 1000


@dataclass(frozen=True, slots=True)
class ResearchTask:
    """The working figure for one deep-research task: tokens read and written, searches run.

    Providers price deep research by the token and the search, not by the task, so the profile
    is ask-another's own assumption (set 2026-12-01); docs/server.md (Estimates) gives the
    published rates it was checked against and an independent measurement that says real
    o3-deep-research tasks often cost more."""

    input_tokens: int
    output_tokens: int
    searches: int
    source: str


RESEARCH_TASK: Final = ResearchTask(
    input_tokens=200_000, output_tokens=10_000, searches=20,
    source="ask-another's own assumption of one task (no provider publishes a per-task "
           "price; docs/server.md, Estimates), priced at the model's rates in litellm's map",
)


@dataclass(frozen=True, slots=True)
class Line:
    model: str
    usd: float | None  # None: the price map has no price for the model
    basis: str


@dataclass(frozen=True, slots=True)
class Estimate:
    lines: tuple[Line, ...]

    @property
    def known_usd(self) -> float:
        return sum(line.usd for line in self.lines if line.usd is not None)

    @property
    def unknown(self) -> tuple[str, ...]:
        """The models without a price, each once (a consensus's synthesiser may also be on the
        panel: two lines, one model)."""
        return tuple(dict.fromkeys(line.model for line in self.lines if line.usd is None))

    def describe(self) -> str:
        """`about $1.22`, `about $0.0012 + unknown for openai/x`, or `unknown (...)` (dollars
        as costs.py writes them)."""
        if self.lines and all(line.usd is None for line in self.lines):
            return f"unknown (no price for {', '.join(self.unknown)} in litellm's price map)"
        text = f"about {usd_text(self.known_usd)}"
        if self.unknown:
            text += f" + unknown for {', '.join(self.unknown)}"
        return text


def _prices(model_cost: Mapping[str, Any], model: str) -> Mapping[str, Any] | None:
    for key in (model, model.split("/", 1)[-1]):
        info = model_cost.get(key)
        if isinstance(info, Mapping) and info.get("input_cost_per_token") is not None:
            return info
    return None


def allowed_prices(models: Sequence[str]) -> dict[str, Mapping[str, Any]]:
    """The price rows of `models` in litellm's bundled model map, by model id (read from its
    JSON file without importing litellm: about 0.1 s, so run it in a thread)."""
    from ask_another.catalog import model_map

    full = model_map()
    found = {model: _prices(full, model) for model in models}
    return {model: row for model, row in found.items() if row is not None}


def _tokens(messages: Sequence[Mapping[str, Any]]) -> int:
    chars = sum(len(str(m.get("content") or "")) for m in messages)
    return max(1, chars // 4)


def completion_line(model_cost: Mapping[str, Any], model: str,
                    messages: Sequence[Mapping[str, Any]], *, extra_input_tokens: int = 0
                    ) -> Line:
    """One completion of `model` with `messages` (plus `extra_input_tokens` not written yet,
    such as the replies a synthesis will read)."""
    tokens_in = _tokens(messages) + extra_input_tokens
    info = _prices(model_cost, model)
    if info is None:
        return Line(model, None, f"~{tokens_in:,} tokens in; no price in litellm's map")
    limit = info.get("max_output_tokens")
    tokens_out = min(ASSUMED_OUTPUT_TOKENS, int(limit)) if isinstance(limit, int) and limit \
        else ASSUMED_OUTPUT_TOKENS
    usd = (tokens_in * float(info["input_cost_per_token"])
           + tokens_out * float(info.get("output_cost_per_token") or 0.0))
    return Line(model, usd, f"~{tokens_in:,} tokens in, {tokens_out:,} out assumed")


def research_line(model_cost: Mapping[str, Any], model: str, query: str,
                  task: ResearchTask = RESEARCH_TASK) -> Line:
    """One deep-research task of `model` (see `RESEARCH_TASK`)."""
    info = _prices(model_cost, model)
    if info is None:
        return Line(model, None, "no price in litellm's map")
    tokens_in = task.input_tokens + len(query) // 4
    search = info.get("search_context_cost_per_query")
    per_search = float(search.get("search_context_size_medium") or 0.0) \
        if isinstance(search, Mapping) else 0.0
    usd = (tokens_in * float(info["input_cost_per_token"])
           + task.output_tokens * float(info.get("output_cost_per_token") or 0.0)
           + task.searches * per_search)
    basis = (f"one task: {tokens_in:,} tokens in, {task.output_tokens:,} out"
             + (f", {task.searches} searches" if per_search else "") + f" ({task.source})")
    return Line(model, usd, basis)


ASSUMED_STEPS: Final = 6
"""Model calls assumed for a research job that is not one deep-research task (an agent turn's
rounds, a sequential pipeline's plan, queries and compile)."""


def research_estimate(model_cost: Mapping[str, Any], model: str, query: str,
                      deep_research: bool) -> Estimate:
    """A research job's estimate: one deep-research task (`research_line`) for a deep-research
    model on its provider's own method, else `ASSUMED_STEPS` completions of the query."""
    if deep_research:
        return Estimate((research_line(model_cost, model, query),))
    one = completion_line(model_cost, model, [{"content": query}])
    usd = None if one.usd is None else one.usd * ASSUMED_STEPS
    return Estimate((Line(model, usd, f"{ASSUMED_STEPS} model calls assumed, each {one.basis}"),))
