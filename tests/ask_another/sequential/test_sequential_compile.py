"""The compile contract: the minimum viable test data, the error cases, renumbering, styles."""

from __future__ import annotations

import copy
import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from ask_another.sequential import (
    CompileRequest,
    PlanRequest,
    RawResult,
    Report,
    SequentialInputError,
    build_plan,
    compile_report,
    count_words,
    sequential_research_compile,
    sequential_research_plan,
)

NOW = datetime(2025, 1, 13, 10, 35, tzinfo=UTC)
# The contract's "Test Raw Results (3 patents + 3 web)", copied verbatim from the spec.
MVT_RESULTS: list[dict[str, Any]] = json.loads(
    (Path(__file__).parent / "mvt_raw_results.json").read_text()
)


@pytest.fixture
def plan() -> dict[str, Any]:
    """The contract's "Test Plan Input", planned."""
    return sequential_research_plan(
        {
            "topic": "optical matrix multiplication",
            "depth": "shallow",
            "focus_areas": ["photonic tensor cores"],
            "output_format": "markdown",
        },
        now=NOW,
    )


def compile_(plan: dict[str, Any], raw: list[dict[str, Any]], **options: Any) -> dict[str, Any]:
    return sequential_research_compile({"plan": plan, "raw_results": raw, **options}, now=NOW)


def body_of(markdown: str) -> str:
    """The markdown above the source list (which starts at the last horizontal rule)."""
    return markdown.rsplit("\n\n---\n\n", 1)[0]


def test_minimum_viable_data_gives_the_contract_statistics(plan: dict[str, Any]) -> None:
    report = compile_(plan, MVT_RESULTS)
    stats = report["statistics"]
    assert (stats["queries_executed"], stats["queries_succeeded"]) == (3, 3)
    assert (stats["queries_failed"], stats["total_sources"]) == (0, 6)
    # The contract says 300; our rule (words of the body, no markers, no source list) gives 154
    # for this data. The rule, checked independently of the compiler's own counting:
    unmarked = re.sub(r" \[\d\](\[\d\])*", "", body_of(report["markdown_report"]))
    assert stats["word_count"] == count_words(unmarked) == 154


def test_minimum_viable_report_shape(plan: dict[str, Any]) -> None:
    report = compile_(plan, MVT_RESULTS)
    assert list(report) == [
        "report_id",
        "plan_id",
        "title",
        "compiled_at",
        "executive_summary",
        "sections",
        "markdown_report",
        "sources",
        "statistics",
        "warnings",
    ]
    assert re.fullmatch(r"report-[0-9a-z]+-[0-9a-z]{6}", report["report_id"])
    assert report["plan_id"] == plan["plan_id"]
    assert report["title"] == "Research Report: optical matrix multiplication"
    assert report["compiled_at"] == "2025-01-13T10:35:00.000Z"
    assert report["executive_summary"] == (
        "This report presents research findings on **optical matrix multiplication**. The "
        "analysis covers 3 research queries across 3 sections. Key topics include: Overview, "
        "Current State, Types and Categories."
    )
    overview, current, types = report["sections"]
    assert overview["heading"] == "Overview" and overview["level"] == 2
    assert overview["content"].startswith(
        "Optical matrix multiplication performs linear algebra operations using photons "
        "instead of electrons, enabling parallel computation at the speed of light. [1][2]"
        "\n\n**Key Characteristics:**\n- Parallel processing of matrix elements\n"
    )
    assert "**Examples:**\n- Mach-Zehnder interferometer arrays" in overview["content"]
    assert overview["citations_used"] == ["[1]", "[2]"]
    assert current["citations_used"] == ["[3]", "[4]"]
    assert "**Key Players:**\n- Lightmatter\n- Luminous Computing" in current["content"]
    assert types["heading"] == "Types and Categories"
    assert (
        "**Categories:**\n- **Architecture:**\n  - Free-space\n  - Integrated" in types["content"]
    )
    assert [s["id"] for s in report["sources"]] == [f"[{n}]" for n in range(1, 7)]
    assert report["sources"][0] == {
        "id": "[1]",
        "source_type": "document",
        "title": "US11123456B2 - Optical matrix multiplication system",
        "url": "https://patents.google.com/patent/US11123456B2",
        "accessed_date": "2025-01-13",
        "excerpt": (
            "A system for performing matrix multiplication using coherent optical signals..."
        ),
    }
    markdown = report["markdown_report"]
    assert markdown.startswith(
        "# Research Report: optical matrix multiplication\n\n## Executive Summary\n\n"
    )
    assert (
        "\n\n---\n\n### References\n\n- **[1]**: US11123456B2 - Optical matrix multiplication "
        "system <https://patents.google.com/patent/US11123456B2>\n" in markdown
    )
    # The planned focus-area query got no result: the caller hears about it.
    assert report["warnings"] == ["Planned queries with no result, absent from the report: q4"]
    json.dumps(report)


# ---------------------------------------------------------------------------- error cases


def test_failed_query_becomes_a_warning_and_is_skipped(plan: dict[str, Any]) -> None:
    raw = copy.deepcopy(MVT_RESULTS)
    raw[0] = {"query_id": "q1", "success": False, "error": "API rate limit exceeded"}
    report = compile_(plan, raw)
    assert [s["heading"] for s in report["sections"]] == ["Current State", "Types and Categories"]
    assert (
        "Query q1 failed and was skipped in the report: API rate limit exceeded"
        in report["warnings"]
    )
    stats = report["statistics"]
    assert (stats["queries_executed"], stats["queries_succeeded"], stats["queries_failed"]) == (
        3,
        2,
        1,
    )
    assert stats["total_sources"] == 4
    assert "Lightmatter Envise" in report["sources"][1]["title"]
    assert "Optical matrix multiplication performs" not in report["markdown_report"]


def test_failed_query_with_sources_does_not_cite_them(plan: dict[str, Any]) -> None:
    raw = copy.deepcopy(MVT_RESULTS)
    raw[0] = {**raw[0], "success": False, "error": "timed out", "data": None}
    del raw[0]["data"]
    report = compile_(plan, raw)
    assert "its 2 sources are not cited" in report["warnings"][0]
    assert "US11123456B2" not in report["markdown_report"]


def test_empty_results_give_an_empty_report_with_a_warning(plan: dict[str, Any]) -> None:
    report = compile_(plan, [])
    assert report["sections"] == [] and report["sources"] == []
    assert report["statistics"] == {
        "queries_executed": 0,
        "queries_succeeded": 0,
        "queries_failed": 0,
        "total_sources": 0,
        "word_count": count_words(report["markdown_report"]),
    }
    assert any(w.startswith("No data") for w in report["warnings"])
    assert "no findings" in report["executive_summary"]
    assert "References" not in report["markdown_report"]


def test_all_failed_is_also_no_data(plan: dict[str, Any]) -> None:
    raw = [{"query_id": "q2", "success": False, "error": "boom"}]
    report = compile_(plan, raw)
    assert report["warnings"][-1] == (
        "No data: all 1 executed query failed, so the report has no findings."
    )
    assert "the one executed query failed" in report["executive_summary"]


def test_unknown_query_id_names_the_id(plan: dict[str, Any]) -> None:
    raw = [*MVT_RESULTS, {"query_id": "q42", "success": True, "data": {"definition": "x"}}]
    with pytest.raises(SequentialInputError) as caught:
        compile_(plan, raw)
    assert caught.value.field == "raw_results[3].query_id"
    assert "'q42'" in str(caught.value) and "q1, q2, q3, q4" in str(caught.value)


def test_duplicate_source_id_names_the_duplicate(plan: dict[str, Any]) -> None:
    raw = copy.deepcopy(MVT_RESULTS)
    raw[2]["sources"][1]["id"] = "S3"
    with pytest.raises(SequentialInputError) as caught:
        compile_(plan, raw)
    assert caught.value.field == "raw_results[2].sources[1].id"
    assert "'S3'" in str(caught.value) and "raw_results[1]" in str(caught.value)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda raw: raw[1].pop("data"), "raw_results[1].data"),
        (lambda raw: raw[1].update(data={}), "raw_results[1].data"),
        (lambda raw: raw[0].update(success=False), "raw_results[0].error"),
        (lambda raw: raw[2].update(query_id="q1"), "raw_results[2].query_id"),
        (lambda raw: raw[0].pop("success"), "raw_results[0].success"),
        (
            lambda raw: raw[0]["sources"][0].update(source_type="blog"),
            "raw_results[0].sources[0].source_type",
        ),
        (lambda raw: raw[0]["sources"][0].update(id=" "), "raw_results[0].sources[0].id"),
        (lambda raw: raw[0]["sources"][1].pop("title"), "raw_results[0].sources[1].title"),
    ],
)
def test_invalid_results_name_the_field(plan: dict[str, Any], change: Any, field: str) -> None:
    raw = copy.deepcopy(MVT_RESULTS)
    change(raw)
    with pytest.raises(SequentialInputError) as caught:
        compile_(plan, raw)
    assert caught.value.field == field
    assert field in str(caught.value)


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"raw_results": []}, "plan"),
        ({"plan": {"plan_id": "p", "topic": "t", "queries": []}}, "raw_results"),
        ({"plan": {"topic": "t", "queries": []}, "raw_results": []}, "plan.plan_id"),
        (
            {"plan": {"plan_id": "p", "topic": "t", "queries": [{}]}, "raw_results": []},
            "plan.queries[0].query_id",
        ),
        (
            {
                "plan": {"plan_id": "p", "topic": "t", "queries": []},
                "raw_results": [],
                "citation_style": "apa",
            },
            "citation_style",
        ),
        (
            {
                "plan": {"plan_id": "p", "topic": "t", "queries": []},
                "raw_results": [],
                "include_sources": "yes",
            },
            "include_sources",
        ),
    ],
)
def test_invalid_compile_arguments_name_the_field(arguments: dict[str, Any], field: str) -> None:
    with pytest.raises(SequentialInputError) as caught:
        sequential_research_compile(arguments)
    assert caught.value.field == field


# ---------------------------------------------------------------------------- citations


def test_sources_renumber_in_order_of_first_appearance_and_rewrite_references(
    plan: dict[str, Any],
) -> None:
    raw = copy.deepcopy(MVT_RESULTS)
    # Results arrive out of plan order, with odd ids; q1's text cites q3's source S9.
    raw[0]["sources"][0]["id"], raw[0]["sources"][1]["id"] = "S7", "S2"
    raw[2]["sources"][0]["id"], raw[2]["sources"][1]["id"] = "S9", "S1"
    raw[0]["data"]["definition"] = "Photons do the work (S9, S2). See also [S1]."
    raw[0]["data"]["characteristics"][0] = "Parallel processing S7"
    raw = [raw[2], raw[1], raw[0]]
    report = compile_(plan, raw)
    overview = report["sections"][0]
    # S9 -> 1, S2 -> 2, S1 -> 3 as they appear in the first paragraph; S7 -> 4 in the list.
    assert overview["content"].startswith(
        "Photons do the work [1][2]. See also [3].\n\n**Key Characteristics:**\n"
        "- Parallel processing [4]\n"
    )
    assert overview["citations_used"] == ["[1]", "[2]", "[3]", "[4]"]
    titles = [s["title"] for s in report["sources"]]
    assert titles[:4] == [
        "EP3987654A1 - Wavelength-multiplexed optical computing",
        "Introduction to Photonic Computing - MIT",
        "Survey of Optical Computing Architectures - Nature",
        "US11123456B2 - Optical matrix multiplication system",
    ]
    assert [s["id"] for s in report["sources"]] == [f"[{n}]" for n in range(1, 7)]
    # q3's section still cites its own sources, with their new numbers.
    assert report["sections"][2]["citations_used"] == ["[1]", "[3]"]


def test_reference_to_an_unknown_source_is_left_and_warned(plan: dict[str, Any]) -> None:
    raw = copy.deepcopy(MVT_RESULTS)
    raw[0]["data"]["definition"] = "Photons do the work [S99]."
    report = compile_(plan, raw)
    assert "Photons do the work [S99]. [1][2]" in report["sections"][0]["content"]
    assert any("[S99]" in w and "q1" in w for w in report["warnings"])


def test_three_citation_styles_differ_in_markers_and_source_lists(plan: dict[str, Any]) -> None:
    reports = {
        s: compile_(plan, MVT_RESULTS, citation_style=s) for s in ("inline", "footnote", "endnote")
    }
    inline = reports["inline"]["markdown_report"]
    footnote = reports["footnote"]["markdown_report"]
    endnote = reports["endnote"]["markdown_report"]

    assert "speed of light. [1][2]" in inline
    assert "### References\n\n- **[1]**: US11123456B2" in inline
    assert "[^" not in inline and "<sup>" not in inline

    assert "speed of light.[^1][^2]" in footnote
    assert "\n[^6]: Survey of Optical Computing Architectures - Nature " in footnote
    assert "(accessed 2025-01-13)" in footnote
    assert "### References" not in footnote and "**[1]**" not in footnote

    assert "speed of light.<sup>1,2</sup>" in endnote
    assert (
        "\n\n## Notes\n\n1. US11123456B2 - Optical matrix multiplication system. <https://"
        in endnote
    )
    assert "“A system for performing matrix multiplication" in endnote  # excerpts in notes
    assert "### References" not in endnote and "[^1]" not in endnote

    # What the style does not change.
    for key in ("sources", "statistics", "executive_summary"):
        assert reports["inline"][key] == reports["footnote"][key] == reports["endnote"][key]
    for one, two in zip(reports["inline"]["sections"], reports["endnote"]["sections"], strict=True):
        assert one["citations_used"] == two["citations_used"]


def test_include_sources_false_drops_markers_and_the_source_list(plan: dict[str, Any]) -> None:
    report = compile_(plan, MVT_RESULTS, include_sources=False)
    assert report["sources"] == []
    assert "References" not in report["markdown_report"]
    assert "[1]" not in report["markdown_report"]
    assert report["sections"][0]["content"].split("\n")[0].endswith("speed of light.")
    assert all(s["citations_used"] == [] for s in report["sections"])
    assert report["statistics"]["total_sources"] == 6  # still what the research consulted
    assert (
        report["statistics"]["word_count"]
        == compile_(plan, MVT_RESULTS)["statistics"]["word_count"]
    )


def test_methodology_describes_queries_phases_and_failures(plan: dict[str, Any]) -> None:
    raw = copy.deepcopy(MVT_RESULTS)
    raw[1] = {"query_id": "q2", "success": False, "error": "API rate limit exceeded"}
    raw[0]["execution_notes"] = "two searches"
    report = compile_(plan, raw, include_methodology=True)
    methodology = report["sections"][-1]
    assert methodology["heading"] == "Methodology" and methodology["citations_used"] == []
    content = methodology["content"]
    assert "3 of the 4 planned queries" in content and "2 phases" in content
    assert "2 succeeded and 1 failed" in content
    assert (
        "- Phase 1 · q1 (definition): What is optical matrix multiplication — succeeded, "
        "2 sources (two searches)" in content
    )
    assert (
        "q2 (current_state): Current state of optical matrix multiplication — failed: "
        "API rate limit exceeded" in content
    )
    assert (
        "q4 (current_state): optical matrix multiplication: photonic tensor cores — not "
        "executed" in content
    )
    # Methodology comes before the source list and is not a "key topic".
    markdown = report["markdown_report"]
    assert markdown.index("## Methodology") < markdown.index("### References")
    assert "Methodology" not in report["executive_summary"]
    without = compile_(plan, raw)
    assert report["statistics"]["word_count"] > without["statistics"]["word_count"]


def test_focus_area_section_and_unknown_data_shapes(plan: dict[str, Any]) -> None:
    raw = [
        {
            "query_id": "q4",
            "success": True,
            "data": {
                "current_status": "First paragraph.\n\nSecond paragraph.",
                "key_developments": ["A", ["nested a", "nested b"]],
                "benchmarks": [{"name": "X1", "tops": 12.5}, {"name": "X2", "ok": True}],
                "maturity": 3,
                "notes": "Plain note",
            },
            "sources": [{"id": "S1", "source_type": "web", "title": "T"}],
        }
    ]
    report = compile_(plan, raw)
    section = report["sections"][0]
    assert section["heading"] == "Photonic Tensor Cores"
    assert section["content"] == (
        "First paragraph. [1]\n\nSecond paragraph.\n\n"
        "**Key Developments:**\n- A\n  - nested a\n  - nested b\n\n"
        "**Benchmarks:**\n- **name:** X1; **tops:** 12.5\n- **name:** X2; **ok:** true\n\n"
        "**Maturity:** 3\n\n**Notes:** Plain note"
    )
    assert any(
        "q4 data lacks field(s) of its result schema: challenges_and_opportunities" in w
        for w in report["warnings"]
    )
    assert "- **[1]**: T" in report["markdown_report"]


def test_typed_variant_takes_and_returns_structs() -> None:
    plan = build_plan(PlanRequest(topic="optical computing", depth="shallow"), now=NOW)
    report = compile_report(
        CompileRequest(
            plan=plan,
            raw_results=[RawResult(query_id="q1", success=True, data={"definition": "Light."})],
        ),
        now=NOW,
    )
    assert isinstance(report, Report)
    assert report.sections[0].content == "Light."
    assert report.statistics.queries_succeeded == 1
    with pytest.raises(SequentialInputError) as caught:
        compile_report(
            CompileRequest(plan=plan, raw_results=[], citation_style="mla")  # type: ignore[arg-type]
        )
    assert caught.value.field == "citation_style"
