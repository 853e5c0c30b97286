"""One wording of unknown cost for every figure a user sees (costs.py): a call's usage line, a
research job's usage, a ledger total and a consensus total read the same."""

from __future__ import annotations

from ask_another.consensus import Answer
from ask_another.consensus._text import total_cost
from ask_another.costs import cost_text, usd_text
from ask_another.gateway import CompletionResult, Usage
from ask_another.research.usage import JobUsage, usage_text
from ask_another.spend.estimate import Estimate, Line
from ask_another.store.usage import Spent


def test_the_three_forms():
    assert cost_text(0.0012, 0, 3) == "$0.0012"
    assert cost_text(0.0, 0, 0) == "$0.00"  # nothing spent is $0, not unknown
    assert cost_text(0.0012, 2, 5) == "$0.0012 + 2 calls of unknown price"
    assert cost_text(0.0012, 1, 5) == "$0.0012 + 1 call of unknown price"
    assert cost_text(0.0, 2, 2) == "cost unknown"


def test_dollars_read_to_the_cent_from_a_cent_up_and_to_two_figures_below():
    # The demo's research usage read "$0.024000"; an estimate read "about $1.2200".
    assert cost_text(0.024, 8, 11) == "$0.02 + 8 calls of unknown price"
    assert [usd_text(usd) for usd in (1.22, 0.0125, 1234.5, 0.00999)] == [
        "$1.22", "$0.01", "$1,234.50", "$0.01"]
    assert [usd_text(usd) for usd in (0.0012, 0.00062, 0.005, 0.000012)] == [
        "$0.0012", "$0.00062", "$0.005", "$0.000012"]  # never "1.2e-05"
    estimate = Estimate((Line("gemini/x", 1.2215, "one task"),
                         Line("openai/m1", None, "no price")))
    assert estimate.describe() == "about $1.22 + unknown for openai/m1"


def answered(cost: float | None) -> Answer:
    return Answer(model="m", status="answered", latency=0.1,
                  result=CompletionResult(text="x", model="m", usage=Usage(1, 1, cost)))


def test_every_figure_uses_it():
    job = JobUsage()
    job.add(Usage(10, 5, 0.0012))
    job.add(Usage(10, 5, None))
    job.add(Usage(10, 5, None), search=True)
    mixed = "$0.0012 + 2 calls of unknown price"
    assert usage_text(job.as_dict()).endswith(f", {mixed}")
    assert Spent(known_usd=0.0012, unknown_calls=2, calls=3).describe() == mixed
    assert total_cost([answered(0.0012), answered(None), answered(None)]) == mixed

    unknown = JobUsage()
    unknown.add(Usage(10, 5, None))
    assert usage_text(unknown.as_dict()).endswith(", cost unknown")
    assert Spent(unknown_calls=1, calls=1).describe() == "cost unknown"
    assert total_cost([answered(None)]) == "cost unknown"
    assert Usage(1, 1, None).describe() == "1 tokens in, 1 out, cost unknown"
    assert usage_text(JobUsage().as_dict()).endswith(", $0.00")


def test_a_gemini_interactions_usage_has_the_same_call_id_in_every_attempt():
    # A job taken over after the first owner counted the interaction's usage counts it under the
    # same ledger id: the ledger then writes it once (store/usage.py).
    from ask_another.research.usage import JobUsage

    first, second = JobUsage(), JobUsage()
    for usage in (first, second):
        usage.add_reported({"total_input_tokens": 10}, call_id="gemini-interaction:i-1")
        usage.add_reported({"total_input_tokens": 10})
    (a, b), (c, d) = first.take_unrecorded(), second.take_unrecorded()
    assert a[2] == c[2] == "gemini-interaction:i-1"
    assert len({b[2], d[2], a[2]}) == 3  # a call without its own id gets a random one
