"""The price of a chat completion, from its model's entry in litellm's map, read once per model.

litellm prices every response itself (`completion_cost`): it resolves the model's entry again,
walks its fallbacks for a model it does not know, and weighs every token kind and pricing tier,
about a millisecond of CPU per call and a fifth of the worker's samples under load. Most calls
are plain: input and output tokens of a model with one price for each. Those are priced here
from the entry read at the model's first call (`PriceBook`), with the same arithmetic litellm
does; anything else (cached or reasoning tokens, audio, a pricing tier, a service tier, web
search, a model entry with prices this module does not know) goes to litellm's
`completion_cost`, so the figure is always litellm's.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Any, Final

# Price keys of a chat model's entry that a plain call does not use: each applies only to what
# `_plain()` rules out (cached prompts, the batch API, a service tier, web search, maps).
_UNUSED_BY_PLAIN_CALLS: Final = frozenset({
    "cache_read_input_token_cost", "cache_creation_input_token_cost",
    "cache_creation_input_token_cost_above_1hr",
    "input_cost_per_token_batches", "output_cost_per_token_batches",
    "cache_read_input_token_cost_batches", "cache_creation_input_token_cost_batches",
    "search_context_cost_per_query", "google_maps_grounding_cost_per_query",
})
_TIERS: Final = ("_priority", "_flex")

# Request parameters that change what litellm charges for the same tokens.
_PRICED_PARAMETERS: Final = ("service_tier", "web_search_options")


@dataclass(frozen=True, slots=True)
class Price:
    input_per_token: float
    output_per_token: float


class PriceBook:
    """Each model's plain price (or None: unpriced, or priced in ways only litellm computes),
    looked up once per model name."""

    def __init__(self, litellm: ModuleType) -> None:
        self._litellm = litellm
        self._prices: dict[str, Price | None] = {}
        self._unmapped: set[str] = set()

    def cost(self, response: Any, model: str, kwargs: dict[str, Any]) -> float | None:
        """The call's price in USD, None when litellm does not know the model's price."""
        if model in self._unmapped:
            return None
        if model not in self._prices:
            self._prices[model] = self._read(model)
        price = self._prices.get(model)
        usage = getattr(response, "usage", None)
        tokens = _plain(usage, kwargs, response) if price is not None else None
        if price is not None and tokens is not None:
            prompt, completion = tokens
            return prompt * price.input_per_token + completion * price.output_per_token
        try:
            return float(self._litellm.completion_cost(completion_response=response, model=model))
        except Exception:  # unmapped model: the price is unknown, which is not an error
            return None

    def _read(self, model: str) -> Price | None:
        try:
            info = self._litellm.get_model_info(model=model)
        except Exception:  # not in litellm's map: completion_cost cannot price it either
            self._unmapped.add(model)
            return None
        priced = {key for key, value in info.items() if "cost" in key and value is not None}
        inputs, outputs = info.get("input_cost_per_token"), info.get("output_cost_per_token")
        unusual = {key for key in priced - _UNUSED_BY_PLAIN_CALLS
                   - {"input_cost_per_token", "output_cost_per_token"}
                   if not key.endswith(_TIERS)}
        if (unusual or not isinstance(inputs, int | float)
                or not isinstance(outputs, int | float)):
            return None  # litellm prices it, each call
        return Price(float(inputs), float(outputs))


def _plain(usage: Any, kwargs: dict[str, Any], response: Any) -> tuple[int, int] | None:
    """(prompt tokens, completion tokens) when they are all there is to price, else None."""
    if usage is None or any(kwargs.get(name) for name in _PRICED_PARAMETERS):
        return None
    if getattr(response, "service_tier", None) in ("priority", "flex"):
        return None
    prompt = getattr(usage, "prompt_tokens", None)
    completion = getattr(usage, "completion_tokens", None)
    if not isinstance(prompt, int) or not isinstance(completion, int):
        return None
    for name in ("cache_creation_input_tokens", "cache_read_input_tokens"):
        if getattr(usage, name, None):
            return None
    if getattr(usage, "server_tool_use", None) is not None:
        return None
    for name in ("prompt_tokens_details", "completion_tokens_details"):
        details = getattr(usage, name, None)
        if details is None:
            continue
        fields = details if isinstance(details, dict) else getattr(details, "__dict__", {})
        if any(value for key, value in fields.items() if key != "text_tokens"):
            return None  # cached, reasoning, audio or image tokens: priced apart
    return prompt, completion
