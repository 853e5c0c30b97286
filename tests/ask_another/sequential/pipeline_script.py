"""A scripted model for the pipeline tests: a simulator responder keyed on the query in the
request (imported by module name by the runtime and stdio tests).

The plan request gets an answer that is no plan (twice: the first answer and the repair), so
the pipeline falls back to the template planner, whose standard plan has q1 definition, then q2
current state, q3 comparison and q4 types in parallel, then q5 future outlook. The script:

- definition: asks for read_article on a simulator page first, then answers citing it;
- current state: answers at once with two sources;
- comparison: fails with HTTP 500 on every request (the query fails after its retries);
- types: answers with prose first (invalid), and valid JSON once it sees the repair prompt;
- future outlook: answers at once with one source.

A question containing "slow phase two" makes every query of phase 2 wait `SLOW` seconds and then
ask for a tool (so a second request would follow if nothing cancelled it).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from ask_another.simulator import Fail, Reply, SimRequest, Slow, Step, ToolCall, ToolCalls

MODEL = "m1"
SLOW = 3.0
REPAIR_MARK = "Your answer did not fill the result schema"
FAILURE = "comparison backend exploded"
_QUERY = re.compile(r"Query (q\d+) \((\w+)\)")


def query_of(request: SimRequest) -> tuple[str, str, str]:
    """(query id, query type, the question) of a pipeline request; ("", "", "") otherwise."""
    users = [m for m in request.messages if m.get("role") == "user"]
    first = str(users[0].get("content", "")) if users else ""
    found = _QUERY.search(first)
    if found is None:
        return "", "", ""
    question = first.split("\n", 1)[0].removeprefix("Research question: ")
    return found[1], found[2], question


def is_repair(request: SimRequest) -> bool:
    return REPAIR_MARK in request.last_user_text


def _answer(data: dict[str, Any], sources: list[dict[str, Any]]) -> Reply:
    return Reply(json.dumps({"data": data, "sources": sources}))


def responder(sim_url: str) -> Callable[[SimRequest], Step]:
    article = f"{sim_url}/sources/photonic-intro"

    def respond(request: SimRequest) -> Step:
        query_id, kind, question = query_of(request)
        has_tool_results = any(m.get("role") == "tool" for m in request.messages)
        if "slow phase two" in question and kind in ("current_state", "comparison", "types"):
            return Slow(SLOW, then=ToolCalls([ToolCall("read_article", {"url": article})]))
        match kind:
            case "definition":
                if not has_tool_results:
                    return ToolCalls([ToolCall("read_article", {"url": article})])
                return _answer({"definition": "Photonic computing computes with light [S1].",
                                "characteristics": ["Low latency", "High bandwidth"],
                                "examples": ["Mach-Zehnder meshes"]},
                               [{"id": "S1", "source_type": "web", "title": "Photonic intro",
                                 "url": article}])
            case "current_state":
                return _answer({"current_status": "Early products ship [S1]; labs scale up [S2].",
                                "recent_developments": ["First optical inference chips"],
                                "key_players": ["Lightmatter", "Lightelligence"]},
                               [{"id": "S1", "source_type": "web", "title": "Market report",
                                 "url": "https://example.org/market"},
                                {"id": "S2", "source_type": "document", "title": "Lab paper",
                                 "url": "https://example.org/paper"}])
            case "comparison":
                return Fail(500, FAILURE)
            case "types":
                if not is_repair(request):
                    return Reply("There are integrated and free-space kinds, mostly.")
                return _answer({"items": ["Integrated photonics", "Free-space optics"],
                                "categories": {"Architecture": ["Integrated", "Free-space"]}},
                               [{"id": "S1", "source_type": "web", "title": "Taxonomy",
                                 "url": "https://example.org/taxonomy"}])
            case "future_outlook":
                return _answer({"outlook": "Hybrid optical-electronic systems first [S1].",
                                "emerging_trends": ["Co-packaged optics"],
                                "open_questions": ["Memory bandwidth"]},
                               [{"id": "S1", "source_type": "web", "title": "Outlook essay",
                                 "url": "https://example.org/outlook"}])
        return Reply(f"unexpected request for {query_id or 'no query'}")

    return respond
