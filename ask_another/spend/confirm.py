"""Confirmation above `ASK_ANOTHER_CONFIRM_USD`: whether an estimate needs a person's yes, and
what a refusal says.

A research job asks a question of its own kind (research/job.py: a `Question` of kind
``spend``, answered like a permission); a consensus asks through the `Confirm` its caller
passes (the MCP tool elicits it, the command line asks at the terminal). Either way a denial or
an expiry means nothing is spent, and the refusal reads the same.
"""

from __future__ import annotations

from ask_another.errors import AskAnotherError
from ask_another.interaction.types import Deny
from ask_another.services import Services
from ask_another.spend.estimate import Estimate

__all__ = ["SpendNotConfirmed", "needs_confirmation", "not_confirmed_text"]


class SpendNotConfirmed(AskAnotherError):
    """An estimate above ASK_ANOTHER_CONFIRM_USD was not confirmed: nothing was asked or spent."""


def needs_confirmation(services: Services, estimate: Estimate) -> bool:
    """Above the threshold (a price that is unknown cannot be, so it is not held)."""
    return estimate.known_usd > services.config.confirm_usd


def not_confirmed_text(services: Services, estimate: Estimate, decision: Deny) -> str:
    why = ("nobody confirmed it in time" if decision.reason == "expired"
           else "it was not confirmed")
    return (f"not started: its estimated cost ({estimate.describe()}) is above "
            f"ASK_ANOTHER_CONFIRM_USD=${services.config.confirm_usd:.2f} and {why}; nothing was "
            "spent")
