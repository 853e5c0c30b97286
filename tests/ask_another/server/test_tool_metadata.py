"""What a client sees of the tools before and around calling them: titles, limits in the input
schema, output schemas, argument errors worded like ours, and the resources and prompts the
server advertises (in memory, against the simulator)."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from mcp import Client
from tool_results import call

from ask_another.config import Config
from ask_another.errors import FEEDBACK_POINTER
from ask_another.server import build_server
from ask_another.simulator import Simulator


async def test_every_tool_has_a_title_and_numeric_limits_are_in_the_schema(
    make_config: Callable[..., Config]
):
    async with Client(build_server(make_config(), prewarm_after=None)) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert all(t.title for t in tools.values()), [n for n, t in tools.items() if not t.title]
    temperature = tools["completion"].input_schema["properties"]["temperature"]
    assert (temperature["minimum"], temperature["maximum"]) == (0.0, 2.0)
    # Optional (its default is ASK_ANOTHER_START_WAIT): a plain number with the limits.
    wait = tools["start_research"].input_schema["properties"]["timeout"]
    assert (wait["type"], wait["minimum"], wait["maximum"]) == ("number", 0, 3600)
    paging = tools["check_research"].input_schema["properties"]
    assert paging["offset"]["minimum"] == 0
    assert (paging["max_chars"]["minimum"], paging["max_chars"]["maximum"]) == (1, 100_000)
    models = tools["consensus"].input_schema["properties"]["models"]
    assert (models["minItems"], models["maxItems"]) == (2, 8)
    plan_input = tools["sequential_research_plan"].input_schema["properties"]
    assert plan_input["topic"]["maxLength"] == 500
    assert plan_input["focus_areas"]["maxItems"] == 12
    plan_schema = tools["sequential_research_plan"].output_schema
    assert plan_schema is not None and "queries" in plan_schema["properties"]
    assert tools["sequential_research_compile"].output_schema is not None


async def test_structured_results_match_their_output_schema(make_config: Callable[..., Config]):
    # mcp.Client checks structured content against the tool's outputSchema.
    async with Client(build_server(make_config(), prewarm_after=None)) as client:
        result = await client.call_tool("sequential_research_plan", {"topic": "tides"})
    assert not result.is_error
    assert result.structured_content is not None and result.structured_content["queries"]


@pytest.mark.parametrize(("tool", "arguments", "expected"), [
    ("answer_permission", {"job_id": "r-1", "tool_call_id": "t", "decision": "maybe"},
     "Invalid arguments for answer_permission: decision should be 'allow' or 'deny', got 'maybe'"),
    ("check_research", {"max_chars": "lots"},
     "Invalid arguments for check_research: max_chars should be a valid integer"),
    ("completion", {"prompt": "hi"}, "Invalid arguments for completion: model is required"),
])
async def test_invalid_arguments_read_like_every_other_error(
    make_config: Callable[..., Config], tool: str, arguments: dict[str, object], expected: str
):
    async with Client(build_server(make_config(), prewarm_after=None)) as client:
        error, text = await call(client, tool, **arguments)
    assert error
    assert expected in text
    assert FEEDBACK_POINTER not in text  # a mistake in the call, not a bug to report
    assert "pydantic" not in text and "type=" not in text


async def test_a_finished_report_is_a_research_resource_and_the_prompt_is_listed(
    make_config: Callable[..., Config], sim: Simulator
):
    config = make_config(MODEL_PPLX=f"perplexity/sonar-deep-research;k;{sim.openai_base}")
    async with Client(build_server(config, prewarm_after=None)) as client:
        templates = (await client.list_resource_templates()).resource_templates
        assert [t.uri_template for t in templates] == ["research://{job_id}"]
        assert (await client.list_resources()).resources == []
        error, text = await call(client, "start_research", model="pplx", query="Why tides?",
                                 timeout=60)
        assert not error, text
        job_id = json.loads(text)["job_id"]
        # The user's recent reports are listed, not only reachable through the template.
        listed = (await client.list_resources()).resources
        assert [str(r.uri) for r in listed] == [f"research://{job_id}"]
        assert "Why tides?" in (listed[0].title or "")
        contents = (await client.read_resource(f"research://{job_id}")).contents
        assert "Why tides?" in contents[0].text  # the simulator's report quotes the query
        assert f"\n[1] {sim.url}/sources/" in contents[0].text  # sources listed by URL
        with pytest.raises(Exception, match="r-nosuchjob1"):
            await client.read_resource("research://r-nosuchjob1")
        prompts = (await client.list_prompts()).prompts
        assert [p.name for p in prompts] == ["second_opinion"]
        prompt = await client.get_prompt("second_opinion", {"question": "Is 1 prime?",
                                                            "model": "sim"})
        assert "Is 1 prime?" in prompt.messages[0].content.text


def _open_objects(schema: object, path: str = "") -> list[str]:
    """Where `schema` has an object a strict-mode converter refuses (the OpenAI Agents SDK's
    `ensure_strict_json_schema` rules): one that allows undeclared properties, or declares
    none without saying `additionalProperties: false`; or a union at the top."""
    found = []
    if isinstance(schema, dict):
        if schema.get("type") == "object" and (
                schema.get("additionalProperties", True) is not False
                and (schema.get("additionalProperties") not in (None, False)
                     or not schema.get("properties"))):
            found.append(path or "(top)")
        for key, value in schema.items():
            found += _open_objects(value, f"{path}.{key}")
    elif isinstance(schema, list):
        for n, value in enumerate(schema):
            found += _open_objects(value, f"{path}[{n}]")
    return found


async def test_every_input_schema_reads_plainly(make_config: Callable[..., Config]):
    """The MCP Inspector CLI converts an argument by its property's top-level `type` (an
    `anyOf [number, null]` went as a string, refused); strict-mode converters refuse open
    objects (list_models's empty object, consensus's stances map, compile's plan)."""
    async with Client(build_server(make_config(), prewarm_after=None)) as client:
        tools = (await client.list_tools()).tools
    for tool in tools:
        schema = tool.input_schema
        assert schema.get("additionalProperties") is False, tool.name
        assert _open_objects(schema) == [], (tool.name, _open_objects(schema))
        for name, prop in schema.get("properties", {}).items():
            assert "anyOf" not in prop and ("type" in prop or "enum" in prop), (tool.name, name)
    shown = {t.name: t.input_schema["properties"] for t in tools}
    assert shown["consensus"]["stances"]["items"]["required"] == ["model", "stance"]
    assert shown["completion"]["timeout"]["type"] == "number"


async def test_stances_as_pairs_or_as_the_old_map(make_config: Callable[..., Config],
                                                  sim: Simulator):
    config = make_config(MODEL_GPT4=f"openai/gpt-4o;k;{sim.openai_base}")
    async with Client(build_server(config, prewarm_after=None)) as client:
        for stances in ([{"model": "sim", "stance": "for"}, {"model": "gpt4",
                                                             "stance": "against"}],
                        {"sim": "for", "gpt4": "against"}):
            error, text = await call(client, "consensus", models=["sim", "gpt4"],
                                     prompt="Tides?", stances=stances)
            assert not error, text
            assert "(stance: for)" in text and "(stance: against)" in text, text
        error, text = await call(client, "consensus", models=["sim", "gpt4"], prompt="Tides?",
                                 stances=[{"model": "sim", "stance": "for"},
                                          {"model": "sim", "stance": "against"}])
        assert error and "stances name 'sim' twice" in text, text


async def test_compile_takes_data_as_json_text_or_an_object(make_config: Callable[..., Config]):
    async with Client(build_server(make_config(), prewarm_after=None)) as client:
        planned = await client.call_tool("sequential_research_plan", {"topic": "tides"})
        plan = planned.structured_content
        assert plan is not None
        query = plan["queries"][0]
        fields = {f["field_name"]: "The moon [S1]."
                  for f in plan["result_schemas"][0]["required_fields"]}
        source = {"id": "S1", "source_type": "web", "title": "Tides"}
        reports = []
        for data in (json.dumps(fields), fields):
            result = await client.call_tool("sequential_research_compile", {
                "plan": plan, "raw_results": [{"query_id": query["query_id"], "success": True,
                                               "data": data, "sources": [source]}]})
            assert not result.is_error, result
            reports.append(result.structured_content)
        assert reports[0] is not None and reports[1] is not None
        assert reports[0]["sections"] == reports[1]["sections"]  # (ids and times differ)
        assert "The moon" in reports[0]["markdown_report"]
        error, text = await call(client, "sequential_research_compile", plan=plan,
                                 raw_results=[{"query_id": query["query_id"], "success": True,
                                               "data": "[1, 2]"}])
        assert error and "must be an object, got list" in text, text
