"""Estimates of a running server's calls, before they start: the price map from the gateway.

`estimate_research(services, model, query, method)` is what `start_research` states (and what
the ceilings and the confirmation threshold are checked against) before the job is created.
"""

from __future__ import annotations

from ask_another.research.methods.agent import is_deep_research
from ask_another.services import Services
from ask_another.spend.estimate import Estimate, research_estimate

__all__ = ["estimate_research"]


async def estimate_research(services: Services, model: str, query: str, method: str
                            ) -> Estimate:
    """A research job's estimate (see `spend.estimate.research_estimate`); raises
    `ModelNotAllowed` / `AmbiguousModel` for a model that is not allowed."""
    entry = services.config.resolve(model)
    deep = is_deep_research(entry.model) and method in ("auto", "provider")
    return research_estimate(await services.prices(), entry.model, query, deep)
