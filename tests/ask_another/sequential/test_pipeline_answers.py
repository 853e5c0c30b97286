"""The pipeline's pure parts: answer validation (what triggers a repair), source renumbering
across queries, the topic cut and the prompts; and one query's attempt loop."""

from __future__ import annotations

import json

import pytest

from ask_another.config import Config
from ask_another.gateway import CompletionResult, Usage
from ask_another.interaction import ToolRegistry
from ask_another.research.methods.sequential import (
    MAX_TOPIC,
    AnswerInvalid,
    Shared,
    check_answer,
    query_messages,
    renumber,
    run_query,
    topic_of,
)
from ask_another.sequential import PlanRequest, RawResult, build_plan, compile_report
from ask_another.sequential.contracts import Citation, CompileRequest

PLAN = build_plan(PlanRequest(topic="photonic computing", depth="standard"))
SCHEMA = {s.query_id: s for s in PLAN.result_schemas}
Q1 = SCHEMA["q1"]  # definition (string), characteristics (array), examples (array)


def answer(**overrides: object) -> str:
    body: dict[str, object] = {
        "data": {"definition": "Computing with light [S1].", "characteristics": ["fast"],
                 "examples": ["MZI meshes"]},
        "sources": [{"id": "S1", "source_type": "web", "title": "Intro",
                     "url": "https://example.org/intro"}],
    }
    body.update(overrides)
    return json.dumps(body)


def test_a_valid_answer_gives_data_and_sources():
    data, sources = check_answer("Here you go:\n```json\n" + answer() + "\n```", Q1)
    assert data["definition"] == "Computing with light [S1]."
    assert sources == [Citation(id="S1", source_type="web", title="Intro",
                                url="https://example.org/intro")]


@pytest.mark.parametrize(("text", "problem"), [
    ("I could not find anything.", "no JSON object"),
    ('{"data": {"definition": "x",}', "not valid JSON"),
    (answer(data={"definition": "x", "characteristics": "fast", "examples": []}),
     "data.characteristics must be an array, not a string"),
    (answer(data={"definition": "  ", "characteristics": [], "examples": []}),
     "data.definition is blank"),
    (answer(data={"characteristics": [], "examples": []}), "data.definition is missing"),
    (answer(sources=[{"id": "S1"}]), "sources[0].title is missing"),
    (answer(sources=[{"id": "S1", "title": "a"}, {"id": "S1", "title": "b"}]),
     "sources[1].id 'S1' is used twice"),
    (answer(sources="none"), '"sources" must be an array'),
])
def test_an_invalid_answer_says_what_to_repair(text: str, problem: str):
    with pytest.raises(AnswerInvalid) as caught:
        check_answer(text, Q1)
    assert problem in str(caught.value)


def test_lenient_where_nothing_is_lost():
    # No "data" wrapper, no ids, an unknown source type: accepted and normalised.
    data, sources = check_answer(json.dumps({
        "definition": "d", "characteristics": [], "examples": [],
        "sources": [{"title": "A", "source_type": "blog"}, {"title": "B"}]}), Q1)
    assert set(data) == {"definition", "characteristics", "examples"}
    assert [(s.id, s.source_type) for s in sources] == [("S1", "web"), ("S2", "web")]


def test_renumbering_makes_ids_unique_and_rewrites_references_once():
    first = RawResult(query_id="q1", success=True,
                      data={"definition": "Light [S1], see S2 and (S1, S2)."},
                      sources=[Citation(id="S1", source_type="web", title="a"),
                               Citation(id="S2", source_type="web", title="b")])
    second = RawResult(query_id="q2", success=True,
                       data={"current_status": "Growing [S1][S2]; also [src-x].",
                             "key_players": ["Acme (S2)", "S10 is not a source here"]},
                       sources=[Citation(id="S1", source_type="web", title="c"),
                                Citation(id="S2", source_type="web", title="d"),
                                Citation(id="src-x", source_type="document", title="e")])
    failed = RawResult(query_id="q3", success=False, error="boom")
    out = renumber([first, second, failed])
    assert [s.id for s in out[0].sources] == ["S1", "S2"]
    assert out[0].data == {"definition": "Light [S1], see S2 and (S1, S2)."}
    assert [s.id for s in out[1].sources] == ["S3", "S4", "S5"]
    # S1 -> S3 and S2 -> S4 in one pass: S3 is not then rewritten again.
    assert out[1].data == {"current_status": "Growing [S3][S4]; also [S5].",
                           "key_players": ["Acme (S4)", "S10 is not a source here"]}
    assert out[2] == failed
    # The renumbered results compile: no duplicate ids, every source cited once.
    report = compile_report(CompileRequest(plan=PLAN, raw_results=out))
    assert report.statistics.total_sources == 5
    assert [s.title for s in report.sources] == ["a", "b", "c", "d", "e"]


def test_topic_is_cut_at_a_word_boundary():
    assert topic_of("  what   is\nlight? ") == "what is light?"
    long = "word " * 100
    topic = topic_of(long)
    assert len(topic) <= MAX_TOPIC + 1 and topic.endswith("word…")


def test_prompts_carry_the_schema_the_question_and_earlier_findings():
    tools = ToolRegistry()
    q5 = next(q for q in PLAN.queries if q.query_type == "future_outlook")
    earlier = {
        "q2": RawResult(query_id="q2", success=True, data={"current_status": "booming"}),
        "q3": RawResult(query_id="q3", success=False, error="x"),
    }
    system, user = query_messages("Where is photonic computing going?", q5,
                                  SCHEMA[q5.query_id], tools, earlier)
    assert "outlook (string)" in system["content"] and "emerging_trends (array)" in system[
        "content"]
    assert "read sources" not in system["content"]  # no tools: none offered
    assert user["content"].startswith("Research question: Where is photonic computing going?")
    assert f"Query {q5.query_id} (future_outlook)" in user["content"]
    assert '"current_status": "booming"' in user["content"]


class _BuggyGateway:
    """A gateway whose call raises what no provider error is (a bug in our code): nothing real
    raises it, so this is the one stand-in."""

    def __init__(self, answers: list[str]) -> None:
        self.calls = 0
        self.answers = answers

    async def completion(self, *_: object, **__: object) -> object:
        self.calls += 1
        if self.calls <= 1 or not self.answers:
            raise RuntimeError("boom")
        return CompletionResult(text=self.answers.pop(0), model="m", usage=Usage())


async def _run_one(gateway: _BuggyGateway) -> tuple[RawResult, list[str]]:
    config = Config.from_env({"MODEL_SIM": "openai/m;sk-x", "ASK_ANOTHER_POLL_SECONDS": "0.01"})

    async def within_budget() -> None:
        return None

    shared = Shared(entry=config.models[0], gateway=gateway, config=config,  # type: ignore[arg-type]
                    tools=ToolRegistry(), policy=config.permissions,
                    check_budget=within_budget)
    states: list[str] = []
    query = next(q for q in PLAN.queries if q.query_id == "q1")
    result = await run_query(query, Q1, [{"role": "user", "content": "go"}], shared,
                             states.append)
    return result, states


async def test_a_bug_in_one_query_costs_an_attempt_and_never_escapes_its_task():
    # The query's attempt loop takes a bug as it takes a transient error: the next attempt
    # runs, and the answer it gets is the query's (it was a crash and a supervisor restart).
    result, states = await _run_one(_BuggyGateway([answer()]))
    assert result.success and result.execution_notes == "attempt 2"
    assert states[:3] == ["running", "attempt 2", "running"]
    # A bug every time: a failed result naming it after the attempts, not an exception.
    result, _ = await _run_one(_BuggyGateway([]))
    assert not result.success
    assert result.error == ("gave up after 2 attempts; the last one failed with: internal "
                            "error (RuntimeError: boom)")
