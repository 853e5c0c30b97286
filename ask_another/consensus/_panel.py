"""The values of a consensus: who sits on the panel, what each one answered, the whole outcome.

A `Seat` is one model with its optional stance. An `Answer` is what became of one seat's call:
answered (with the `CompletionResult`), failed or timed out (with a one-line reason); a partial
panel is a result, not an error. `ConsensusResult` keeps the answers in the order the models
were named, the synthesis (an `Answer` too) when one was asked for, and the conversation the
panel's replies were stored in.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from ask_another.config import ModelEntry
from ask_another.errors import AskAnotherError, ProviderError
from ask_another.gateway import CompletionResult
from ask_another.spend.estimate import Estimate

__all__ = [
    "MAX_MODELS",
    "MIN_MODELS",
    "STANCES",
    "Answer",
    "ConsensusResult",
    "Seat",
    "Status",
    "one_line_reason",
    "stance_instruction",
]

MIN_MODELS: Final = 2
MAX_MODELS: Final = 8

STANCES: Final = {
    "for": "Take the supportive side: make the strongest honest case for the proposal or "
           "claim in question, and say where the evidence for it is weak.",
    "against": "Take the critical side: make the strongest honest case against the proposal or "
               "claim in question, looking for flaws, risks and counter-examples.",
    "neutral": "Stay neutral: weigh the arguments on every side evenly before you conclude.",
}

Status = Literal["answered", "failed", "timed out"]


def stance_instruction(stance: str) -> str:
    """The system-prompt line for a stance: one of `STANCES`, or the caller's own words."""
    known = STANCES.get(stance.strip().lower())
    return known if known is not None else f"Your stance for this question: {stance.strip()}"


@dataclass(frozen=True, slots=True)
class Seat:
    entry: ModelEntry
    stance: str | None = None


@dataclass(frozen=True, slots=True)
class Answer:
    """One seat's outcome. `result` is set when `status` is "answered", `reason` otherwise."""

    model: str
    status: Status
    latency: float
    stance: str | None = None
    result: CompletionResult | None = None
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class ConsensusResult:
    answers: tuple[Answer, ...]
    synthesis: Answer | None = None
    conversation_id: str | None = None
    wall: float = 0.0
    estimate: Estimate | None = None  # made before any call started

    @property
    def answered(self) -> tuple[Answer, ...]:
        return tuple(a for a in self.answers if a.status == "answered")


def one_line_reason(exc: BaseException) -> str:
    """Why a seat has no answer, in one line a person can read (keys already scrubbed)."""
    if isinstance(exc, ProviderError):
        text = f"{exc.kind}: {exc.provider_message}"
    elif isinstance(exc, AskAnotherError):
        text = str(exc)
    else:
        text = f"internal error ({type(exc).__name__})"
    line = " ".join(text.split())
    return line if len(line) <= 240 else line[:239] + "…"
