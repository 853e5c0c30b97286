"""Property tests: plans always order queries after their dependencies; compile never loses or
duplicates a source."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ask_another.sequential import sequential_research_compile, sequential_research_plan

NOW = datetime(2025, 1, 13, tzinfo=UTC)

non_blank = st.text(min_size=1, max_size=60).filter(lambda s: s.strip())
plan_arguments = st.fixed_dictionaries(
    {"topic": non_blank},
    optional={
        "depth": st.sampled_from(["shallow", "standard", "deep"]),
        "focus_areas": st.lists(non_blank, max_size=12),
        "constraints": st.lists(non_blank, max_size=12),
        "output_format": st.sampled_from(["markdown", "json", "structured"]),
    },
)


@given(plan_arguments)
@settings(max_examples=300, deadline=None)
def test_execution_order_respects_depends_on(arguments: dict[str, Any]) -> None:
    plan = sequential_research_plan(arguments, now=NOW)
    ids = [q["query_id"] for q in plan["queries"]]
    phase_of = {}
    for number, phase in enumerate(plan["execution_order"]):
        assert phase, "no empty phase"
        for query_id in phase:
            assert query_id not in phase_of, f"{query_id} appears twice"
            phase_of[query_id] = number
    assert sorted(phase_of) == sorted(ids)  # every query exactly once
    for query in plan["queries"]:
        for dependency in query.get("depends_on", []):
            assert phase_of[dependency] < phase_of[query["query_id"]]
        assert query.get("depends_on", None) != []  # omitted rather than empty
    assert [s["query_id"] for s in plan["result_schemas"]] == ids
    texts = {q["query_text"] for q in plan["queries"]}
    for area in plan["metadata"]["focus_areas"]:
        assert f"{plan['topic']}: {area}" in texts
    assert f"with {len(ids)} queries" in plan["summary"]
    assert f"Execution in {len(plan['execution_order'])} phases." in plan["summary"]
    # Deterministic: the same arguments give the same plan at the same instant.
    assert sequential_research_plan(arguments, now=NOW) == plan


SOURCE_PLAN = sequential_research_plan(
    {"topic": "optical computing", "depth": "deep", "focus_areas": ["lasers", "memory"]},
    now=NOW,
)
QUERY_IDS = [q["query_id"] for q in SOURCE_PLAN["queries"]]

source_ids = st.one_of(
    st.integers(min_value=1, max_value=400).map(lambda n: f"S{n}"),
    st.text(min_size=1, max_size=12).filter(lambda s: s.strip()),
)
source_types = st.sampled_from(["web", "document", "api", "database", "manual"])
# Data text that may cite sources in every form the compiler rewrites.
text_with_references = st.lists(
    st.one_of(
        st.text(max_size=30),
        st.integers(min_value=1, max_value=400).map(lambda n: f"S{n}"),
        st.integers(min_value=1, max_value=400).map(lambda n: f"[S{n}]"),
        st.tuples(st.integers(1, 400), st.integers(1, 400)).map(lambda p: f"(S{p[0]}, S{p[1]})"),
    ),
    max_size=6,
).map(" ".join)
data_values = st.one_of(
    text_with_references,
    st.lists(text_with_references, max_size=4),
    st.dictionaries(
        st.text(min_size=1, max_size=10), st.lists(text_with_references, max_size=3), max_size=3
    ),
    st.integers(),
    st.none(),
)


@st.composite
def raw_results(draw: st.DrawFn) -> list[dict[str, Any]]:
    query_ids = draw(st.lists(st.sampled_from(QUERY_IDS), unique=True, max_size=len(QUERY_IDS)))
    ids = iter(draw(st.lists(source_ids, unique=True, min_size=40, max_size=40)))
    results = []
    for query_id in query_ids:
        sources = [
            {
                "id": next(ids),
                "source_type": draw(source_types),
                "title": draw(st.text(max_size=20)),
            }
            for _ in range(draw(st.integers(0, 4)))
        ]
        if draw(st.booleans()):
            data = draw(
                st.dictionaries(
                    st.text(min_size=1, max_size=15), data_values, min_size=1, max_size=4
                )
            )
            results.append(
                {"query_id": query_id, "success": True, "data": data, "sources": sources}
            )
        else:
            results.append(
                {"query_id": query_id, "success": False, "error": "failed", "sources": sources}
            )
    return results


@given(raw_results(), st.sampled_from(["inline", "footnote", "endnote"]))
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_compile_never_loses_or_duplicates_a_source(raw: list[dict[str, Any]], style: str) -> None:
    report = sequential_research_compile(
        {"plan": SOURCE_PLAN, "raw_results": raw, "citation_style": style}, now=NOW
    )
    expected = [(s["source_type"], s["title"]) for r in raw if r["success"] for s in r["sources"]]
    out = report["sources"]
    assert [s["id"] for s in out] == [f"[{n}]" for n in range(1, len(out) + 1)]
    assert report["statistics"]["total_sources"] == len(out) == len(expected)
    # The same sources, each once (ids were renumbered, so compare what else they carry).
    assert sorted((s["source_type"], s["title"]) for s in out) == sorted(expected)
    cited = [c for section in report["sections"] for c in section["citations_used"]]
    assert set(cited) == {s["id"] for s in out}
    for section in report["sections"]:
        assert len(section["citations_used"]) == len(set(section["citations_used"]))
    stats = report["statistics"]
    assert stats["queries_executed"] == len(raw)
    assert stats["queries_succeeded"] + stats["queries_failed"] == len(raw)
    markdown = report["markdown_report"]
    for n in range(1, len(out) + 1):
        entry = {"inline": f"- **[{n}]**: ", "footnote": f"\n[^{n}]: ", "endnote": f"\n{n}. "}
        assert markdown.count(entry[style]) >= 1
    if style == "inline":
        references = markdown.rsplit("### References\n\n", 1)[-1] if out else ""
        assert len(references.splitlines()) == len(out)
