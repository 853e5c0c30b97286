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
    temperature = tools["completion"].input_schema["properties"]["temperature"]["anyOf"][0]
    assert (temperature["minimum"], temperature["maximum"]) == (0.0, 2.0)
    # Optional (its default is ASK_ANOTHER_START_WAIT): the number branch carries the limits.
    wait = tools["start_research"].input_schema["properties"]["timeout"]["anyOf"][0]
    assert (wait["minimum"], wait["maximum"]) == (0, 3600)
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
        error, text = await call(client, "start_research", model="pplx", query="Why tides?",
                                 timeout=60)
        assert not error, text
        job_id = json.loads(text)["job_id"]
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
