"""A consensus as text for people: the panel side by side, the synthesis, the thread to continue."""

from __future__ import annotations

from ask_another.consensus._panel import Answer, ConsensusResult
from ask_another.costs import cost_text

__all__ = ["answer_heading", "consensus_text", "total_cost"]


def answer_heading(answer: Answer) -> str:
    """One line per seat: model, stance, latency, and tokens and cost or why it has no answer."""
    stance = f" (stance: {answer.stance})" if answer.stance else ""
    head = f"{answer.model}{stance} · {answer.latency:.2f} s"
    if answer.result is None:
        return f"{head} · {answer.status}: {answer.reason}"
    return f"{head} · {answer.result.usage.describe()}"


def total_cost(answers: list[Answer]) -> str:
    """The panel's cost: the sum of the known prices, and how many were unknown (never 0)."""
    known = [a.result.usage.cost_usd for a in answers
             if a.result is not None and a.result.usage.cost_usd is not None]
    unknown = sum(1 for a in answers if a.result is not None and a.result.usage.cost_usd is None)
    return cost_text(sum(known), unknown, len(known) + unknown)


def consensus_text(result: ConsensusResult) -> str:
    """The whole answer: a summary line, each seat under its heading, the synthesis, the id."""
    answers = list(result.answers)
    counts = {status: sum(1 for a in answers if a.status == status)
              for status in ("answered", "failed", "timed out")}
    summary = ", ".join(f"{n} {status}" for status, n in counts.items() if n)
    calls = [*answers, *([result.synthesis] if result.synthesis is not None else [])]
    parts = [f"Consensus of {len(answers)} models ({summary}) in {result.wall:.2f} s · "
             f"{total_cost(calls)}"]
    if result.estimate is not None:
        parts[0] += f"\nEstimated before it started: {result.estimate.describe()}"
    for n, answer in enumerate(answers, 1):
        body = answer.result.text.strip() if answer.result is not None else ""
        block = f"## {n}. {answer_heading(answer)}"
        parts.append(f"{block}\n{body or '(the model returned an empty answer)'}"
                     if answer.result is not None else block)
    if result.synthesis is not None:
        synthesis = result.synthesis
        block = f"## Synthesis by {answer_heading(synthesis)}"
        if synthesis.result is not None:
            block += "\n" + (synthesis.result.text.strip() or "(the model returned an empty "
                                                               "answer)")
        parts.append(block)
    if result.conversation_id is not None:
        parts.append(f"conversation_id: {result.conversation_id}")
    else:
        parts.append("No model answered, so nothing was stored.")
    return "\n\n".join(parts)
