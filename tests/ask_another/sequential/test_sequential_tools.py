"""The two sequential research tools through an in-memory `mcp.Client`, in both protocol eras:
the contract's example and minimum viable test data, structured content, and errors that name the
offending field. (The stdio round trip is in test_sequential_stdio.py.)"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from tool_results import text_of

from ask_another.config import Config
from ask_another.errors import FEEDBACK_POINTER
from ask_another.server import build_server

ERAS = ["auto", "legacy"]
MVT_RESULTS: list[dict[str, Any]] = json.loads(
    (Path(__file__).parent / "mvt_raw_results.json").read_text()
)
EXAMPLE_INPUT = {
    "topic": "photonic neural network accelerators",
    "depth": "standard",
    "focus_areas": ["silicon photonics", "energy efficiency"],
    "constraints": ["patent-focused", "post-2020"],
}


@pytest.fixture(params=ERAS)
async def client(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Client]:
    config = Config.from_env({"ASK_ANOTHER_HOME": str(tmp_path / "home")})
    # prewarm_after=None: these tools never need litellm, so it is never imported.
    async with Client(build_server(config, prewarm_after=None), mode=request.param) as connected:
        yield connected


async def call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, text_of(result)
    document = json.loads(text_of(result))
    # The same document as text and as structured content.
    assert result.structured_content == document
    return document


async def error_of(client: Client, tool: str, **arguments: Any) -> str:
    result = await client.call_tool(tool, arguments)
    assert result.is_error
    return text_of(result)


async def test_tools_are_listed_with_required_fields_and_enums(client: Client):
    tools = {t.name: t for t in (await client.list_tools()).tools}
    plan = tools["sequential_research_plan"].input_schema
    assert plan["required"] == ["topic"]
    assert plan["properties"]["depth"]["enum"] == ["shallow", "standard", "deep"]
    assert plan["properties"]["output_format"]["enum"] == ["markdown", "json", "structured"]
    assert plan["properties"]["focus_areas"]["items"]["type"] == "string"
    compile_ = tools["sequential_research_compile"].input_schema
    assert compile_["required"] == ["plan", "raw_results"]
    assert compile_["properties"]["citation_style"]["enum"] == ["inline", "footnote", "endnote"]
    for name in ("sequential_research_plan", "sequential_research_compile"):
        annotations = tools[name].annotations
        assert annotations is not None and annotations.read_only_hint is True
    assert "sequential_research_plan" in (client.instructions or "")


async def test_plan_of_the_contract_example(client: Client):
    plan = await call(client, "sequential_research_plan", **EXAMPLE_INPUT)
    assert plan["summary"] == (
        'Research plan for "photonic neural network accelerators" with 7 queries at standard '
        "depth. Focus areas: silicon photonics, energy efficiency. Execution in 3 phases.")
    assert [q["query_id"] for q in plan["queries"]][:5] == ["q1", "q2", "q3", "q4", "q5"]
    assert plan["queries"][3]["query_text"] == \
        "photonic neural network accelerators: silicon photonics"
    assert plan["execution_order"][0] == ["q1"]
    assert plan["estimated_sources"] == 15
    assert plan["metadata"]["constraints"] == ["patent-focused", "post-2020"]
    # Deterministic: the same input gives the same queries (only id and time may differ).
    again = await call(client, "sequential_research_plan", **EXAMPLE_INPUT)
    assert again["queries"] == plan["queries"]
    assert again["result_schemas"] == plan["result_schemas"]


async def test_minimum_viable_test_data_compiles_to_the_contract_statistics(client: Client):
    plan = await call(client, "sequential_research_plan", topic="optical matrix multiplication",
                      depth="shallow", focus_areas=["photonic tensor cores"],
                      output_format="markdown")
    report = await call(client, "sequential_research_compile", plan=plan,
                        raw_results=MVT_RESULTS)
    stats = report["statistics"]
    assert (stats["queries_executed"], stats["queries_succeeded"], stats["queries_failed"],
            stats["total_sources"]) == (3, 3, 0, 6)
    assert [s["id"] for s in report["sources"]] == ["[1]", "[2]", "[3]", "[4]", "[5]", "[6]"]
    assert report["plan_id"] == plan["plan_id"]
    assert report["markdown_report"].startswith(
        "# Research Report: optical matrix multiplication")
    assert "### References" in report["markdown_report"]
    # q4 (the focus area) has no result: named in a warning.
    assert any("q4" in w for w in report["warnings"])

    footnote = await call(client, "sequential_research_compile", plan=plan,
                          raw_results=MVT_RESULTS, citation_style="footnote",
                          include_methodology=True)
    assert "[^1]:" in footnote["markdown_report"]
    assert footnote["sections"][-1]["heading"] == "Methodology"


async def test_a_failed_query_is_a_warning_and_empty_results_an_empty_report(client: Client):
    plan = await call(client, "sequential_research_plan", topic="test")
    failed = await call(client, "sequential_research_compile", plan=plan, raw_results=[
        {"query_id": "q1", "success": False, "error": "API rate limit exceeded"}])
    assert failed["statistics"]["queries_failed"] == 1 and failed["sections"] == []
    assert any("q1 failed" in w and "API rate limit exceeded" in w for w in failed["warnings"])
    empty = await call(client, "sequential_research_compile", plan=plan, raw_results=[])
    assert empty["sources"] == [] and empty["statistics"]["total_sources"] == 0
    assert any(w.startswith("No data") for w in empty["warnings"])


async def test_invalid_input_is_a_tool_error_naming_the_field(client: Client):
    # The contract's error cases 1 and 2.
    missing = await error_of(client, "sequential_research_plan", depth="standard")
    assert "topic" in missing and "required" in missing
    enum = await error_of(client, "sequential_research_plan", topic="test", depth="ultra-deep")
    assert "invalid depth" in enum and "shallow, standard, deep" in enum
    assert FEEDBACK_POINTER not in enum

    text = await error_of(client, "sequential_research_plan", topic="   ")
    assert "topic" in text
    text = await error_of(client, "sequential_research_plan", topic="t",
                          focus_areas=["fine", 3])
    assert "focus_areas[1]" in text
    text = await error_of(client, "sequential_research_plan", topic="t", output_format="pdf")
    assert "output_format" in text and "markdown, json, structured" in text

    plan = await call(client, "sequential_research_plan", topic="test")
    text = await error_of(client, "sequential_research_compile", plan=plan,
                          raw_results=[{"query_id": "q9", "success": True, "data": {"a": 1}}])
    assert "raw_results[0].query_id" in text and "q9" in text
    text = await error_of(client, "sequential_research_compile", plan=plan, raw_results=[
        {"query_id": "q1", "success": True, "data": {"definition": "d"},
         "sources": [{"id": "S1", "source_type": "web", "title": "a"}]},
        {"query_id": "q2", "success": True, "data": {"current_status": "s"},
         "sources": [{"id": "S1", "source_type": "web", "title": "b"}]}])
    assert "'S1' is used twice, in raw_results[0] and raw_results[1]" in text
    text = await error_of(client, "sequential_research_compile", plan=plan, raw_results=[7])
    assert "raw_results[0]" in text
    text = await error_of(client, "sequential_research_compile", plan=plan, raw_results=[],
                          citation_style="apa")
    assert "citation_style" in text and "inline, footnote, endnote" in text
    text = await error_of(client, "sequential_research_compile", plan={"topic": "x"},
                          raw_results=[])
    assert "plan.plan_id" in text
