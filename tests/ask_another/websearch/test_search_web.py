"""search_web against a SearXNG stand-in served on 127.0.0.1, and as a router tool."""

from __future__ import annotations

import functools
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from urllib.parse import parse_qs, urlsplit

import pytest
import trio
from loopback_pages import read_request_head

from ask_another.config import Config
from ask_another.interaction.builtin import builtin_tools
from ask_another.runtime import open_runtime
from ask_another.simulator import Simulator, ToolCalls
from ask_another.simulator import ToolCall as SimToolCall
from ask_another.websearch import search_web

SEARXNG_JSON = {
    "query": "photonic computing",
    "results": [
        {"url": f"https://example.org/{i}", "title": f"Result {i}", "content": f"snippet {i}",
         "engine": "duckduckgo"}
        for i in range(12)
    ] + [{"title": "no url, skipped"}],
}


@dataclass
class SearxStandIn:
    """Answers GET /search like SearXNG; `answer` sets the status and body it sends."""

    url: str = ""
    answer: tuple[int, bytes] = (200, json.dumps(SEARXNG_JSON).encode())
    queries: list[dict[str, list[str]]] = field(default_factory=list)

    async def handle(self, stream: trio.SocketStream) -> None:
        head = await read_request_head(stream)
        if head is None:
            return
        target = head.split(" ", 2)[1]
        self.queries.append(parse_qs(urlsplit(target).query))
        status, body = self.answer
        head = (f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n")
        await stream.send_all(head.encode() + body)
        await stream.aclose()


@pytest.fixture
async def searx(nursery: trio.Nursery) -> AsyncIterator[SearxStandIn]:
    stand_in = SearxStandIn()
    serve = functools.partial(trio.serve_tcp, stand_in.handle, 0, host="127.0.0.1")
    listeners = await nursery.start(serve)
    port = listeners[0].socket.getsockname()[1]
    stand_in.url = f"http://127.0.0.1:{port}"
    yield stand_in


async def test_results_are_titles_urls_and_snippets_capped(searx: SearxStandIn) -> None:
    result = await search_web("photonic computing", base_url=searx.url)
    assert result["success"] is True and result["type"] == "search_results"
    assert len(result["results"]) == 8
    assert result["results"][0] == {"title": "Result 0", "url": "https://example.org/0",
                                    "snippet": "snippet 0"}
    assert searx.queries == [{"q": ["photonic computing"], "format": ["json"]}]


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ((403, b"Forbidden"), "search.formats: [html, json]"),
        ((500, b"{}"), "answered 500"),
        ((200, b"<html>not json</html>"), "not SearXNG JSON"),
    ],
)
async def test_engine_failures_say_what_to_do(
    searx: SearxStandIn, answer: tuple[int, bytes], reason: str
) -> None:
    searx.answer = answer
    result = await search_web("q", base_url=searx.url)
    assert result["success"] is False
    assert result["error"].startswith("Could not search the web for 'q': ")
    assert reason in result["error"]


async def test_unreachable_engine_and_blank_query() -> None:
    with trio.socket.socket() as sock:  # a port nobody listens on
        await sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    result = await search_web("q", base_url=f"http://127.0.0.1:{port}")
    assert result["success"] is False and "unreachable" in result["error"]
    assert await search_web("  ", base_url="http://unused") == {
        "success": False, "error": "No search query provided"}


def test_configured_url_adds_the_tool_and_a_bad_one_is_a_config_problem() -> None:
    assert "search_web" not in builtin_tools()
    assert "search_web" in builtin_tools(searxng_url="http://localhost:8888")
    good = Config.from_env({"ASK_ANOTHER_HOME": "/tmp/x",
                            "ASK_ANOTHER_SEARXNG_URL": "http://localhost:8888/"})
    assert good.searxng_url == "http://localhost:8888" and not good.problems
    bad = Config.from_env({"ASK_ANOTHER_HOME": "/tmp/x", "ASK_ANOTHER_SEARXNG_URL": "localhost"})
    assert bad.searxng_url is None
    assert [p.variable for p in bad.problems] == ["ASK_ANOTHER_SEARXNG_URL"]


async def test_a_model_searches_through_a_router_turn(
    searx: SearxStandIn, sim: Simulator, make_config: Callable[..., Config]
) -> None:
    sim.script("m1", [ToolCalls([SimToolCall("search_web", {"query": "photonic computing"})])])
    config = make_config(ASK_ANOTHER_SEARXNG_URL=searx.url)
    async with open_runtime(config, prewarm_after=None) as runtime:
        turn = await runtime.run_turn("sim", "Find sources on photonic computing.")
    assert [c.status for c in turn.calls] == ["completed"]
    offered = [t["function"]["name"] for t in sim.requests[0].json["tools"]]
    assert "search_web" in offered
    tool_message = sim.requests[1].messages[-1]
    assert tool_message["role"] == "tool"
    assert "https://example.org/0" in tool_message["content"]
