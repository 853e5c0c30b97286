"""The plan contract: the contract's example input, depth and focus rules, determinism, errors."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta, timezone

import pytest

import ask_another.sequential as sequential
from ask_another.errors import AskAnotherError
from ask_another.sequential import (
    PlanRequest,
    Query,
    SequentialInputError,
    build_plan,
    execution_phases,
    sequential_research_plan,
)

EXAMPLE_INPUT = {
    "topic": "photonic neural network accelerators",
    "depth": "standard",
    "focus_areas": ["silicon photonics", "energy efficiency"],
    "constraints": ["patent-focused", "post-2020"],
}
NOW = datetime(2025, 1, 13, 10, 30, 0, tzinfo=UTC)

# The five queries the contract's example output lists, as printed there.
CONTRACT_QUERIES = [
    {
        "query_id": "q1",
        "query_text": "What is photonic neural network accelerators",
        "query_type": "definition",
        "extraction_goals": [
            "Primary definition",
            "Key characteristics",
            "Common examples",
            "Related terminology",
        ],
        "priority": "critical",
    },
    {
        "query_id": "q2",
        "query_text": "Current state of photonic neural network accelerators",
        "query_type": "current_state",
        "extraction_goals": [
            "Current status",
            "Recent developments",
            "Key players or stakeholders",
            "Trends",
        ],
        "priority": "critical",
        "depends_on": ["q1"],
    },
    {
        "query_id": "q3",
        "query_text": "Compare photonic neural network accelerators",
        "query_type": "comparison",
        "extraction_goals": [
            "Key similarities",
            "Key differences",
            "Trade-offs",
            "Use case recommendations",
        ],
        "priority": "medium",
        "depends_on": ["q1"],
    },
    {
        "query_id": "q4",
        "query_text": "photonic neural network accelerators: silicon photonics",
        "query_type": "current_state",
        "extraction_goals": [
            "Current state of silicon photonics",
            "Key developments in silicon photonics",
            "Challenges and opportunities",
        ],
        "priority": "high",
        "depends_on": ["q1"],
    },
    {
        "query_id": "q5",
        "query_text": "photonic neural network accelerators: energy efficiency",
        "query_type": "current_state",
        "extraction_goals": [
            "Current state of energy efficiency",
            "Key developments in energy efficiency",
            "Challenges and opportunities",
        ],
        "priority": "high",
        "depends_on": ["q1"],
    },
]


def test_example_input_gives_the_contract_plan() -> None:
    plan = sequential_research_plan(EXAMPLE_INPUT, now=NOW)

    assert list(plan) == [
        "plan_id",
        "topic",
        "created_at",
        "summary",
        "queries",
        "result_schemas",
        "execution_order",
        "estimated_sources",
        "metadata",
    ]
    assert re.fullmatch(r"plan-[0-9a-z]+-[0-9a-z]{6}", plan["plan_id"])
    assert plan["topic"] == "photonic neural network accelerators"
    assert plan["created_at"] == "2025-01-13T10:30:00.000Z"
    # Word for word the contract's summary (7 queries, 3 phases).
    assert plan["summary"] == (
        'Research plan for "photonic neural network accelerators" with 7 queries at standard '
        "depth. Focus areas: silicon photonics, energy efficiency. Execution in 3 phases."
    )
    constraint_goal = "Respect constraints: patent-focused; post-2020"
    for expected, query in zip(CONTRACT_QUERIES, plan["queries"], strict=False):
        assert query == {
            **expected,
            "extraction_goals": [*expected["extraction_goals"], constraint_goal],
        }
    assert [q["query_type"] for q in plan["queries"][5:]] == ["types", "future_outlook"]
    assert plan["execution_order"] == [["q1"], ["q2", "q3", "q4", "q5", "q6"], ["q7"]]
    assert plan["estimated_sources"] == 15
    assert plan["metadata"] == {
        "depth": "standard",
        "focus_areas": ["silicon photonics", "energy efficiency"],
        "constraints": ["patent-focused", "post-2020"],
        "output_format": "markdown",
    }
    json.dumps(plan)  # plain JSON all the way down


def test_without_constraints_the_goals_are_the_contracts_word_for_word() -> None:
    plan = sequential_research_plan({**EXAMPLE_INPUT, "constraints": []}, now=NOW)
    assert plan["queries"][:5] == CONTRACT_QUERIES
    assert "depends_on" not in plan["queries"][0]  # omitted when empty, as in the example


def test_definition_schema_is_the_contracts() -> None:
    plan = sequential_research_plan(EXAMPLE_INPUT, now=NOW)
    assert plan["result_schemas"][0] == {
        "query_id": "q1",
        "required_fields": [
            {
                "field_name": "definition",
                "field_type": "string",
                "description": "Core definition",
                "required": True,
            },
            {
                "field_name": "characteristics",
                "field_type": "array",
                "description": "Key characteristics",
                "required": True,
            },
            {
                "field_name": "examples",
                "field_type": "array",
                "description": "Illustrative examples",
                "required": True,
            },
        ],
        "example": {
            "definition": "Example value",
            "characteristics": ["example1", "example2"],
            "examples": ["example1", "example2"],
        },
    }


@pytest.mark.parametrize("depth", ["shallow", "standard", "deep"])
def test_every_query_has_a_schema_whose_example_fits_it(depth: str) -> None:
    plan = sequential_research_plan({**EXAMPLE_INPUT, "depth": depth}, now=NOW)
    python_type = {"string": str, "array": list, "object": dict}
    assert [s["query_id"] for s in plan["result_schemas"]] == [
        q["query_id"] for q in plan["queries"]
    ]
    for schema in plan["result_schemas"]:
        names = [f["field_name"] for f in schema["required_fields"]]
        assert names and list(schema["example"]) == names
        for field in schema["required_fields"]:
            assert isinstance(
                schema["example"][field["field_name"]], python_type[field["field_type"]]
            )


def test_minimum_viable_plan_schemas_match_the_contracts_test_data() -> None:
    plan = sequential_research_plan(
        {
            "topic": "optical matrix multiplication",
            "depth": "shallow",
            "focus_areas": ["photonic tensor cores"],
            "output_format": "markdown",
        },
        now=NOW,
    )
    fields = {
        s["query_id"]: [f["field_name"] for f in s["required_fields"]]
        for s in plan["result_schemas"]
    }
    # The data keys of the contract's three raw results.
    assert fields["q1"] == ["definition", "characteristics", "examples"]
    assert fields["q2"] == ["current_status", "recent_developments", "key_players"]
    assert fields["q3"] == ["items", "categories"]
    assert (
        plan["queries"][3]["query_text"] == "optical matrix multiplication: photonic tensor cores"
    )
    assert plan["execution_order"] == [["q1"], ["q2", "q3", "q4"]]


def test_depth_changes_the_number_of_queries_and_each_focus_area_gets_one() -> None:
    focus = ["silicon photonics", "energy efficiency", "packaging"]
    counts = {}
    for depth in ("shallow", "standard", "deep"):
        plan = sequential_research_plan(
            {"topic": "optical computing", "depth": depth, "focus_areas": focus}, now=NOW
        )
        counts[depth] = len(plan["queries"])
        texts = [q["query_text"] for q in plan["queries"]]
        for area in focus:
            assert texts.count(f"optical computing: {area}") == 1
    assert counts["shallow"] < counts["standard"] < counts["deep"]
    deep_types = {
        q["query_type"]
        for q in sequential_research_plan({"topic": "x", "depth": "deep"}, now=NOW)["queries"]
    }
    assert {"history", "applications", "challenges", "future_outlook"} <= deep_types


def test_same_input_same_plan_except_the_clock() -> None:
    first = sequential_research_plan(EXAMPLE_INPUT, now=NOW)
    later = sequential_research_plan(EXAMPLE_INPUT, now=NOW + timedelta(minutes=5))
    for key in ("queries", "result_schemas", "execution_order", "summary", "estimated_sources"):
        assert first[key] == later[key]
    assert first["created_at"] != later["created_at"]
    # The hash part of the id is the request's; the first part is the time.
    assert first["plan_id"].rsplit("-", 1)[1] == later["plan_id"].rsplit("-", 1)[1]
    assert sequential_research_plan(EXAMPLE_INPUT, now=NOW)["plan_id"] == first["plan_id"]
    other = sequential_research_plan({**EXAMPLE_INPUT, "topic": "optical computing"}, now=NOW)
    assert other["plan_id"] != first["plan_id"]


def test_input_is_tidied_whitespace_and_duplicate_focus_areas() -> None:
    plan = sequential_research_plan(
        {"topic": "  optical\n computing ", "focus_areas": ["Lasers", " lasers ", "modulators"]},
        now=NOW,
    )
    assert plan["topic"] == "optical computing"
    assert plan["metadata"]["focus_areas"] == ["Lasers", "modulators"]
    assert sum(q["query_text"].startswith("optical computing: ") for q in plan["queries"]) == 2


def test_created_at_is_utc_with_milliseconds() -> None:
    eastern = datetime(2025, 1, 13, 0, 30, 0, 123456, tzinfo=timezone(timedelta(hours=-5)))
    plan = sequential_research_plan({"topic": "t"}, now=eastern)
    assert plan["created_at"] == "2025-01-13T05:30:00.123Z"
    naive = sequential_research_plan({"topic": "t"}, now=datetime(2025, 1, 13, 5, 30, 0, 999999))
    assert naive["created_at"] == "2025-01-13T05:30:00.999Z"
    assert re.fullmatch(
        r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z",
        sequential_research_plan({"topic": "t"})["created_at"],
    )


# ---------------------------------------------------------------------------- errors


def test_missing_topic_is_an_error_naming_topic() -> None:
    with pytest.raises(SequentialInputError) as caught:
        sequential_research_plan({"depth": "standard"})
    assert caught.value.field == "topic"
    assert "topic" in str(caught.value)
    assert isinstance(caught.value, AskAnotherError)


def test_invalid_depth_is_an_error_naming_depth_and_the_choices() -> None:
    with pytest.raises(SequentialInputError) as caught:
        sequential_research_plan({"topic": "test", "depth": "ultra-deep"})
    assert caught.value.field == "depth"
    message = str(caught.value)
    assert "depth" in message and "ultra-deep" in message and "shallow, standard, deep" in message


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"topic": "   "}, "topic"),
        ({"topic": 42}, "topic"),
        ({"topic": "x" * 501}, "topic"),
        ({"topic": "t", "output_format": "pdf"}, "output_format"),
        ({"topic": "t", "focus_areas": ["a", ""]}, "focus_areas[1]"),
        ({"topic": "t", "focus_areas": ["a", 7]}, "focus_areas[1]"),
        ({"topic": "t", "focus_areas": "silicon"}, "focus_areas"),
        ({"topic": "t", "constraints": [f"c{i}" for i in range(13)]}, "constraints"),
        ({"topic": "t", "constraints": ["x" * 201]}, "constraints[0]"),
        ({"topic": "t", "dept": "deep"}, "dept"),
        (["topic"], "arguments"),
    ],
)
def test_bad_arguments_name_the_field(arguments: object, field: str) -> None:
    with pytest.raises(SequentialInputError) as caught:
        sequential_research_plan(arguments)  # type: ignore[arg-type]
    assert caught.value.field == field
    assert field in str(caught.value)


def test_typed_variant_validates_structs_built_in_python() -> None:
    plan = build_plan(PlanRequest(topic="optical computing", depth="deep"), now=NOW)
    assert plan.metadata.depth == "deep"
    assert plan.queries[0].query_text == "What is optical computing"
    with pytest.raises(SequentialInputError) as caught:
        build_plan(PlanRequest(topic="t", depth="ultra-deep"))  # type: ignore[arg-type]
    assert caught.value.field == "depth"


def test_execution_phases_rejects_unknown_dependencies_and_cycles() -> None:
    def query(query_id: str, *depends: str) -> Query:
        return Query(
            query_id=query_id,
            query_text=query_id,
            query_type="definition",
            extraction_goals=[],
            priority="low",
            depends_on=list(depends),
        )

    assert execution_phases([query("a"), query("b", "a"), query("c", "b", "a"), query("d")]) == [
        ["a", "d"],
        ["b"],
        ["c"],
    ]
    with pytest.raises(SequentialInputError, match="depends on zz"):
        execution_phases([query("a", "zz")])
    with pytest.raises(SequentialInputError, match="cycle among queries: a, b"):
        execution_phases([query("a", "b"), query("b", "a"), query("c")])


def test_public_names_are_exported_and_sorted() -> None:
    assert sequential.__all__ == sorted(sequential.__all__)
    for name in sequential.__all__:
        assert hasattr(sequential, name)


@pytest.mark.parametrize(
    ("depth", "base", "phases"), [("shallow", 3, 2), ("standard", 5, 3), ("deep", 8, 4)]
)
@pytest.mark.parametrize("focus_count", [0, 1, 4])
def test_query_and_phase_counts_per_depth(
    depth: str, base: int, phases: int, focus_count: int
) -> None:
    plan = sequential_research_plan(
        {"topic": "t", "depth": depth, "focus_areas": [f"area {i}" for i in range(focus_count)]},
        now=NOW,
    )
    assert len(plan["queries"]) == base + focus_count
    assert len(plan["execution_order"]) == phases
