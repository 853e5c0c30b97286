"""Gemini interactions through litellm.interactions (create, poll, cancel) against the simulator."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest

from ask_another.simulator import Drop, Fail, Simulator, Slow

AGENT = "deep-research-pro-preview-12-2025"


def create(litellm: ModuleType, sim: Simulator, prompt: str = "What changed in 2026?") -> Any:
    return litellm.interactions.create(
        agent=AGENT, input=prompt, background=True, api_base=sim.gemini_base, api_key="g-key"
    )


def get(litellm: ModuleType, sim: Simulator, interaction_id: str) -> Any:
    return litellm.interactions.get(interaction_id, api_base=sim.gemini_base, api_key="g-key")


def report_of(interaction: Any) -> tuple[str, list[str]]:
    [output] = [s for s in interaction.steps if s["type"] == "model_output"]
    [text] = [c for c in output["content"] if c["type"] == "text"]
    return text["text"], [a["url"] for a in text.get("annotations", [])]


def test_unscripted_interaction_completes_after_two_polls(
    litellm: ModuleType, sim: Simulator
) -> None:
    created = create(litellm, sim)
    assert created.status == "in_progress"
    assert get(litellm, sim, created.id).status == "in_progress"
    done = get(litellm, sim, created.id)
    assert done.status == "completed"
    report, urls = report_of(done)
    assert report.startswith(f"# [simulated {AGENT}] research report")
    assert "What changed in 2026?" in report
    assert len(urls) == 2 and all(u.startswith(sim.url + "/sources/") for u in urls)
    assert done.usage["total_tokens"] > 0
    # The wire as litellm spoke it.
    first = sim.requests[0]
    assert (first.method, first.path) == ("POST", "/v1beta/interactions")
    assert first.json == {"agent": AGENT, "input": "What changed in 2026?", "background": True}
    assert first.headers["x-goog-api-key"] == "g-key"
    assert first.api_key == "g-key"
    assert [r.path for r in sim.requests[1:]] == [f"/v1beta/interactions/{created.id}"] * 2
    assert sim.requests[1].model == AGENT
    state = sim.interactions[created.id]
    assert (state.status, state.polls, state.cancel_called) == ("completed", 2, False)


def test_scripted_statuses_advance_one_per_poll_and_the_last_stays(
    litellm: ModuleType, sim: Simulator
) -> None:
    sim.script_interaction(
        AGENT,
        statuses=["queued", "in_progress", "completed"],
        report="Deep findings [1].",
        citations=["https://example.org/a"],
    )
    created = create(litellm, sim)
    seen = [created.status] + [get(litellm, sim, created.id).status for _ in range(3)]
    assert seen == ["queued", "in_progress", "completed", "completed"]
    assert report_of(get(litellm, sim, created.id)) == (
        "Deep findings [1].",
        ["https://example.org/a"],
    )
    assert sim.interactions[created.id].polls == 4


@pytest.mark.parametrize("end", ["failed", "incomplete", "budget_exceeded", "requires_action"])
def test_every_end_status_can_be_scripted(litellm: ModuleType, sim: Simulator, end: str) -> None:
    sim.script_interaction(AGENT, statuses=["in_progress", end], error="quota gone")
    created = create(litellm, sim)
    final = get(litellm, sim, created.id)
    assert final.status == end


def test_cancel_stops_an_interaction_for_good(litellm: ModuleType, sim: Simulator) -> None:
    sim.script_interaction(AGENT, statuses=["queued", "in_progress", "completed"])
    created = create(litellm, sim)
    assert get(litellm, sim, created.id).status == "in_progress"
    cancelled = litellm.interactions.cancel(created.id, api_base=sim.gemini_base, api_key="g-key")
    assert (cancelled.id, cancelled.status) == (created.id, "cancelled")
    assert get(litellm, sim, created.id).status == "cancelled"
    state = sim.interactions[created.id]
    assert state.cancel_called and state.status == "cancelled"
    assert sim.requests[-2].path == f"/v1beta/interactions/{created.id}/cancel"


def test_end_interaction_ends_a_running_one_at_its_next_poll(
    litellm: ModuleType, sim: Simulator
) -> None:
    sim.script_interaction(AGENT, statuses=["in_progress"])  # runs until the test ends it
    created = create(litellm, sim)
    for _ in range(3):
        assert get(litellm, sim, created.id).status == "in_progress"
    sim.end_interaction(created.id)
    done = get(litellm, sim, created.id)
    assert done.status == "completed" and report_of(done)[0] == sim.interactions[created.id].report
    sim.end_interaction(created.id, "failed")  # ended already: left as it is
    assert get(litellm, sim, created.id).status == "completed"


def test_cancel_after_completion_is_recorded_but_changes_nothing(
    litellm: ModuleType, sim: Simulator
) -> None:
    sim.script_interaction(AGENT, statuses=["completed"])
    created = create(litellm, sim)
    answer = litellm.interactions.cancel(created.id, api_base=sim.gemini_base, api_key="g-key")
    assert answer.status == "completed"
    assert sim.interactions[created.id].cancel_called


def test_input_directives_choose_polls_and_end_status(litellm: ModuleType, sim: Simulator) -> None:
    created = create(litellm, sim, "Why? [[sim:polls=3]] [[sim:status=failed]]")
    statuses = [get(litellm, sim, created.id).status for _ in range(4)]
    assert statuses == ["in_progress", "in_progress", "failed", "failed"]
    assert sim.interactions[created.id].input_text == "Why?"


def test_scripted_failures_hit_create_and_poll(litellm: ModuleType, sim: Simulator) -> None:
    sim.script(AGENT, [Fail(429, "Resource has been exhausted")])
    with pytest.raises(litellm.RateLimitError, match="Resource has been exhausted"):
        create(litellm, sim)
    created = create(litellm, sim)
    sim.script(AGENT, [Fail(503, "backend unavailable"), Slow(0.01)])
    with pytest.raises(litellm.ServiceUnavailableError, match="backend unavailable"):
        get(litellm, sim, created.id)
    assert get(litellm, sim, created.id).status == "in_progress"  # the poll after a failure
    sim.script(AGENT, [Drop()])
    with pytest.raises(litellm.APIConnectionError):
        get(litellm, sim, created.id)
    assert sim.interactions[created.id].polls == 1  # failed polls never reached the state


def test_unknown_interaction_is_404(litellm: ModuleType, sim: Simulator) -> None:
    with pytest.raises(litellm.NotFoundError, match="not found"):
        get(litellm, sim, "no-such-id")


def test_unknown_scripted_status_is_refused_at_once(sim: Simulator) -> None:
    with pytest.raises(ValueError, match="unknown interaction statuses"):
        sim.script_interaction(AGENT, statuses=["done"])
