"""search_web through litellm's search API against the simulator's search endpoints (Tavily's
and SearXNG's wire formats on 127.0.0.1), the SEARCH_* configuration, and the router tool."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest

from ask_another.config import Config, SearchEntry, Secret
from ask_another.gateway import Transport, open_gateway
from ask_another.interaction.builtin import builtin_tools
from ask_another.runtime import open_runtime
from ask_another.simulator import Fail, Simulator, ToolCalls
from ask_another.simulator import ToolCall as SimToolCall
from ask_another.websearch import search_web

KEY = "tvly-test-NEVER-SHOW-31c2d1"


def tavily(sim: Simulator) -> SearchEntry:
    return SearchEntry(variable="SEARCH_TAVILY", shorthand="tavily", provider="tavily",
                       api_key=Secret(KEY), api_base=sim.url)


@pytest.mark.parametrize("provider", ["tavily", "searxng"])
async def test_results_are_titles_urls_and_snippets_with_the_search_price(
        sim: Simulator, provider: str,
        transport: Callable[[Sequence[str]], Transport]) -> None:
    engine = SearchEntry(variable="SEARCH_X", shorthand="x", provider=provider,
                         api_key=Secret(KEY if provider == "tavily" else ""), api_base=sim.url)
    seen = []
    async with open_gateway(transport([KEY]), [KEY]) as gateway:
        result = await search_web(gateway, engine, "photonic computing", max_results=3,
                                  on_usage=seen.append)
    assert result["success"] is True and result["query"] == "photonic computing"
    assert [r["url"] for r in result["results"]] == [
        f"{sim.url}/sources/search/photonic-computing/{i}" for i in (1, 2, 3)]
    assert result["results"][0]["title"] == "Simulated source 1 on photonic computing"
    assert "simulated page" in result["results"][0]["snippet"]
    (request,) = sim.requests_for("search")
    assert request.method == ("POST" if provider == "tavily" else "GET")
    # litellm's price per query: Tavily $0.008, SearXNG free.
    assert seen[0].usage.cost_usd == pytest.approx(0.008 if provider == "tavily" else 0.0)


async def test_a_failed_search_is_a_result_with_a_reason_and_no_key(
        sim: Simulator, transport: Callable[[Sequence[str]], Transport]) -> None:
    sim.script("search", [Fail(503, "search engine overloaded")])
    async with open_gateway(transport([KEY]), [KEY]) as gateway:
        result = await search_web(gateway, tavily(sim), "q")
        blank = await search_web(gateway, tavily(sim), "  ")
    assert result["success"] is False
    assert "search engine overloaded" in result["error"] and "(tavily)" in result["error"]
    assert KEY not in result["error"]
    assert blank == {"success": False, "error": "No search query provided"}


def test_search_engines_are_configured_like_models() -> None:
    env = {"ASK_ANOTHER_HOME": "/tmp/x", "SEARCH_TAVILY": f"tavily;{KEY}",
           "SEARCH_LOCAL": "searxng;;http://localhost:8888/"}
    config = Config.from_env(env)
    assert not config.problems
    assert [(s.shorthand, s.provider, s.api_base) for s in config.searches] == [
        ("local", "searxng", "http://localhost:8888"), ("tavily", "tavily", None)]
    assert config.search is not None and config.search.shorthand == "local"
    assert KEY in config.secrets() and KEY not in repr(config)
    bad = Config.from_env({"ASK_ANOTHER_HOME": "/tmp/x", "SEARCH_A": "googol;k",
                           "SEARCH_B": "searxng;", "SEARCH_C": "tavily"})
    assert not bad.searches
    assert [p.variable for p in bad.problems] == ["SEARCH_A", "SEARCH_B", "SEARCH_C"]
    assert "'googol' is not a search provider of litellm" in str(bad.problems[0])
    # The older variable still works: a SearXNG instance, searched through litellm.
    old = Config.from_env({"ASK_ANOTHER_HOME": "/tmp/x",
                           "ASK_ANOTHER_SEARXNG_URL": "http://localhost:8888/"})
    assert old.search is not None and old.search.provider == "searxng"
    wrong = Config.from_env({"ASK_ANOTHER_HOME": "/tmp/x", "ASK_ANOTHER_SEARXNG_URL": "x"})
    assert wrong.search is None
    assert [p.variable for p in wrong.problems] == ["ASK_ANOTHER_SEARXNG_URL"]


async def test_a_model_searches_through_a_router_turn(
    sim: Simulator, make_config: Callable[..., Config]
) -> None:
    sim.script("m1", [ToolCalls([SimToolCall("search_web", {"query": "photonic computing"})])])
    assert "search_web" not in builtin_tools()
    config = make_config(SEARCH_SIM=f"tavily;{KEY};{sim.url}")
    async with open_runtime(config, prewarm_after=None) as runtime:
        turn = await runtime.run_turn("sim", "Find sources on photonic computing.")
    assert [c.status for c in turn.calls] == ["completed"]
    completions = sim.requests_for("m1")
    offered = [t["function"]["name"] for t in completions[0].json["tools"]]
    assert "search_web" in offered
    tool_message = completions[1].messages[-1]
    assert tool_message["role"] == "tool"
    assert f"{sim.url}/sources/search/photonic-computing/1" in tool_message["content"]
