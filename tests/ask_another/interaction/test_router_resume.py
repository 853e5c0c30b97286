"""A router turn resumed from its stored rounds (a research job after a kill): the model is not
asked again for a round whose answer was stored; that round's effect call, which may have run
before the turn stopped, is put to the person again even where the policy allows it (never run
twice silently), while a read call simply runs again; a turn that had answered returns at once."""

from __future__ import annotations

from interaction_recorder import Recorder
from test_router import Answer, ScriptedModel, _registry

from ask_another.interaction import Deny, Policy
from ask_another.interaction.router import TurnSoFar, run_turn

ALLOW_ALL = Policy.parse("read=allow,effect=allow")
ASKED = {"role": "assistant", "content": None, "tool_calls": [
    {"id": "c1", "type": "function",
     "function": {"name": "read_article", "arguments": '{"url": "https://x.test/a"}'}},
    {"id": "c2", "type": "function",
     "function": {"name": "delete_file", "arguments": '{"path": "/report"}'}}]}


async def test_an_effect_call_of_the_round_in_flight_is_asked_again_not_run_silently() -> None:
    side_effects: list[str] = []
    model = ScriptedModel(Answer(text="done"))
    interaction = Recorder(decision=Deny("rejected"))
    rounds: list[int] = []

    async def stored(turn: object) -> None:
        rounds.append(turn.rounds)  # type: ignore[attr-defined]

    result = await run_turn(model, [{"role": "user", "content": "tidy up"}],
                            _registry(side_effects), policy=ALLOW_ALL, interaction=interaction,
                            so_far=TurnSoFar(messages=[], calls=[], rounds=0, asked=ASKED),
                            on_round=stored)
    # Under allow-all, only the effect call was put to the person; denied, it did not run.
    assert ("permission", "delete_file") in interaction.events
    assert ("permission", "read_article") not in interaction.events
    assert side_effects == []
    assert [c.status for c in result.calls] == ["completed", "failed"]
    # The model was asked once, for round 2, with the stored round's answer and results.
    assert len(model.seen) == 1 and model.seen[0][1] == ASKED
    assert result.rounds == 2 and rounds == [1, 2] and result.text == "done"


async def test_a_turn_that_had_answered_returns_without_asking_anything() -> None:
    model = ScriptedModel()
    final = {"role": "assistant", "content": "the report"}
    result = await run_turn(model, [], _registry([]), policy=ALLOW_ALL, interaction=Recorder(),
                            so_far=TurnSoFar(messages=[final], calls=[], rounds=1))
    assert result.text == "the report" and model.seen == []


async def test_without_a_person_the_effect_call_of_the_round_in_flight_is_denied() -> None:
    side_effects: list[str] = []
    result = await run_turn(ScriptedModel(Answer(text="ok")), [], _registry(side_effects),
                            policy=ALLOW_ALL,
                            so_far=TurnSoFar(messages=[], calls=[], rounds=0, asked=ASKED))
    assert side_effects == [] and [c.status for c in result.calls] == ["completed", "failed"]
