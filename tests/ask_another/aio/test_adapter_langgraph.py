"""The LangGraph adapter through real LangGraph (interrupt, checkpointer, resume), the simulator
as ask-another's model: docs/examples/langgraph_adapter.py, its interrupt answered both ways."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from aio_helpers import example
from asyncio_runs import RunAsyncio

from ask_another import Config
from ask_another.adapters.langgraph import decision_of
from ask_another.errors import InvalidArgument
from ask_another.simulator import Reply, Simulator, ToolCalls
from ask_another.simulator import ToolCall as SimCall


@pytest.mark.parametrize("allowed", [True, False])
def test_a_jobs_permission_request_is_a_langgraph_interrupt(
    run: RunAsyncio, make_config: Callable[..., Config], sim: Simulator, allowed: bool
):
    sim.script("m1", [ToolCalls([SimCall("save_note", {"text": "1 is not prime"}, id="p1"),
                                 SimCall("save_note", {"text": "and 2 is"}, id="p2")]),
                      Reply("The report.")])
    module = example("langgraph_adapter")
    module.NOTES.clear()
    asked: list[dict[str, Any]] = []

    async def decide(request: dict[str, Any]) -> object:
        asked.append(request)
        return "allow" if allowed else {"decision": "deny", "message": "not that one"}

    final = run(lambda: module.main(make_config(), "sim", decide))
    assert [(r["tool_call_id"], r["tool"], r["class"], r["arguments"]) for r in asked] == [
        ("p1", "save_note", "effect", {"text": "1 is not prime"}),
        ("p2", "save_note", "effect", {"text": "and 2 is"})]  # one interrupt each, in order
    assert (final["status"], final["report"]) == ("completed", "The report.")
    assert final["answered"] == ["p1", "p2"]
    if allowed:
        assert module.NOTES == ["1 is not prime", "and 2 is"]
    else:
        assert module.NOTES == []
        told = [m["content"] for m in sim.requests_for("m1")[-1].messages if m["role"] == "tool"]
        assert len(told) == 2 and all("not that one" in t for t in told)


def test_a_resume_value_that_is_no_answer_is_refused() -> None:
    assert decision_of({"decision": "deny", "message": "no"}).message == "no"  # type: ignore[union-attr]
    with pytest.raises(InvalidArgument, match="resume a permission request with 'allow' or"):
        decision_of("maybe")
