"""One panel seat is a task, not an actor: whatever its call raises, the seat answers (a bug
included, as "the call crashed unexpectedly"), so its siblings are never cancelled by it."""

from __future__ import annotations

from ask_another.config import Config
from ask_another.consensus._seat import CallSpec, panel_call


class _BuggyServices:
    """Services whose gateway lookup raises what no provider error is (a bug): nothing real
    raises it, so this is the one stand-in."""

    async def gateway(self) -> object:
        raise RuntimeError("boom")


async def test_a_bug_in_a_seat_is_that_seats_failure():
    config = Config.from_env({"MODEL_SIM": "openai/m;sk-x"})
    spec = CallSpec(entry=config.models[0], messages=[{"role": "user", "content": "hi"}],
                    timeout=5.0, stance="for")
    answer = await panel_call(spec, _BuggyServices())  # type: ignore[arg-type]
    assert (answer.status, answer.reason, answer.stance) == (
        "failed", "the call crashed unexpectedly", "for")
    assert answer.model == "openai/m"
