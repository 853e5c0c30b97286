"""Estimates of a running server's calls, before they start: the price map from the gateway.

`estimate_research(services, entry, query, method)` is made once per job, by
`ResearchJobs.start`, before the job is created: the ceilings are checked against it, it is
stored with the job (`detail["estimate"]`, `estimate_json`), `start_research` states it and the
job's spend confirmation asks it (`stored_estimate`).
"""

from __future__ import annotations

from typing import Any

from ask_another.catalog import is_deep_research
from ask_another.config import ModelEntry
from ask_another.services import Services
from ask_another.spend.estimate import Estimate, Line, research_estimate
from ask_another.spend.prices import prices

__all__ = ["estimate_json", "estimate_research", "stored_estimate"]


async def estimate_research(services: Services, entry: ModelEntry, query: str, method: str
                            ) -> Estimate:
    """A research job's estimate with the allowed model `entry` (see
    `spend.estimate.research_estimate`)."""
    deep = is_deep_research(entry.model) and method in ("auto", "provider")
    return research_estimate(await prices(services), entry.model, query, deep)


def estimate_json(estimate: Estimate) -> dict[str, Any]:
    """`estimate` as the job's detail keeps it."""
    return {"lines": [{"model": line.model, "usd": line.usd, "basis": line.basis}
                      for line in estimate.lines]}


def stored_estimate(detail: dict[str, Any]) -> Estimate | None:
    """The estimate stored with a job (`detail["estimate"]`), or None (a job stored before
    estimates were kept, or a detail of another shape)."""
    raw: Any = detail.get("estimate")
    try:
        return Estimate(tuple(Line(str(line["model"]), line["usd"], str(line["basis"]))
                              for line in raw["lines"]))
    except (KeyError, TypeError):
        return None
