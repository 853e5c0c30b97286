"""The simulator's default answers to the local research pipeline's prompts.

The pipeline (ask_another/research/methods/sequential.py) asks the job's model three kinds of
things, each recognised here by the opening of its system message:

- **a plan** ("You are the planner of a research pipeline"): answered with a plan object of the
  plan contract's shape made from the question (a "Compare A and B ..." question gets one query
  per side and a comparison that depends on both; any other question background, evidence and
  trade-offs), five queries at depth deep;
- **a query** ("You are one researcher in a research pipeline"): when the request offers
  `search_web` and no tool result is back yet, a `search_web` call for the query's text; then a
  JSON answer filling every field the system message lists (``- name (type): description``),
  citing the search results it got as sources (or simulated pages when it could not search);
- **the executive summary** ("You are the editor of a research pipeline"): a JSON summary that
  names the question and cites the first sources of the list it was given.

Nothing here imports the pipeline: the prompts are matched as text, as a provider would see them.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ._steps import Reply, SimRequest, Step, ToolCall, ToolCalls

PLAN_MARK = "You are the planner of a research pipeline"
QUERY_MARK = "You are one researcher in a research pipeline"
SUMMARY_MARK = "You are the editor of a research pipeline"
_LISTED = re.compile(r"^\[(\d+)\] ", re.MULTILINE)
_FIELD = re.compile(r"^- (\w+) \((string|array|object|number|boolean)\): ?(.*)$", re.MULTILINE)
_QUERY = re.compile(r"^Query (\S+) \(([^)]*)\): (.*)$", re.MULTILINE)
_COMPARE = re.compile(r"^\s*compare\s+(.+?)\s+(?:and|with|vs\.?|versus)\s+(.+?)"
                      r"(?:\s+(?:for|in|on|when|as)\s+(.+?))?\s*[?.]?\s*$",
                      re.IGNORECASE | re.DOTALL)


def pipeline_step(request: SimRequest, model: str, base_url: str) -> Step | None:
    """The answer to a pipeline prompt, or None when `request` is not one."""
    system = next((text for role, text in request.turns if role == "system"), "")
    if system.startswith(PLAN_MARK):
        return Reply(json.dumps(_plan(request.last_user_text)))
    if system.startswith(QUERY_MARK):
        return _query_step(request, system, model, base_url)
    if system.startswith(SUMMARY_MARK):
        question, _depth = _question(request.last_user_text)
        listed = _LISTED.findall(request.last_user_text.split("\nSources:\n", 1)[-1])
        cite = "".join(f"[{n}]" for n in listed[:3])
        return Reply(json.dumps({"executive_summary": (
            f"[simulated {model}] The findings answer the question \"{question}\" from "
            f"{len(listed)} sources {cite}. This summary was written by the simulator, not by a "
            "real model.").replace("  ", " ")}))
    return None


def _question(user_text: str) -> tuple[str, str]:
    question, depth = user_text, "standard"
    for line in user_text.splitlines():
        if line.startswith("Research question: "):
            question = line.removeprefix("Research question: ")
        elif line.startswith("Depth: "):
            depth = line.removeprefix("Depth: ").strip()
    return " ".join(question.split()), depth


def _schema(query_id: str) -> dict[str, Any]:
    return {"query_id": query_id, "required_fields": [
        {"field_name": "summary", "field_type": "string",
         "description": "What the sources say, in two or three sentences"},
        {"field_name": "key_points", "field_type": "array",
         "description": "The main points, each citing its source"}]}


def _plan(user_text: str) -> dict[str, Any]:
    question, depth = _question(user_text)
    subject = question.rstrip("?. ")
    compare = _COMPARE.match(question)
    if compare:
        left, right, purpose = compare[1], compare[2], compare[3]
        use = f" for {purpose.rstrip('?. ')}" if purpose else ""
        specs = [
            ("definition", f"What are the strengths and limits of {left}{use}?", "critical", []),
            ("definition", f"What are the strengths and limits of {right}{use}?", "critical", []),
            ("comparison", f"How do {left} and {right} differ{use}, and when is each the better "
                           "choice?", "high", ["q1", "q2"]),
        ]
    else:
        specs = [
            ("background", f"What background is needed to understand: {subject}?", "critical",
             []),
            ("evidence", f"What evidence and recent findings bear on: {subject}?", "high", []),
            ("trade_offs", f"What trade-offs and open questions remain in: {subject}?", "medium",
             ["q1", "q2"]),
        ]
    if depth == "deep":
        specs += [
            ("history", f"How did the current situation around {subject} come about?", "low",
             ["q1"]),
            ("future_outlook", f"What is expected next for {subject}?", "low", ["q3"]),
        ]
    ids = [f"q{i}" for i in range(1, len(specs) + 1)]
    queries = [{"query_id": query_id, "query_text": text, "query_type": kind,
                "extraction_goals": ["Main findings", "Sources that support them"],
                "priority": priority, "depends_on": depends}
               for query_id, (kind, text, priority, depends) in zip(ids, specs, strict=True)]
    return {"summary": f"Simulated plan for: {subject}", "queries": queries,
            "result_schemas": [_schema(query_id) for query_id in ids]}


def _query_step(request: SimRequest, system: str, model: str, base_url: str) -> Step:
    user = next((text for role, text in request.turns if role == "user"), "")
    found = _QUERY.search(user)
    query_id, query_text = (found[1], found[3]) if found else ("q", "the query")
    tools = {str((t.get("function") or {}).get("name") or t.get("name"))
             for t in request.json.get("tools") or [] if isinstance(t, dict)}
    results = [text for role, text in request.turns if role == "tool"]
    if "search_web" in tools and not results:
        return ToolCalls([ToolCall("search_web", {"query": query_text})])
    sources = _sources(results)
    if not sources:
        sources = [{"id": f"S{i}", "source_type": "web",
                    "title": f"Simulated page {i} for {query_text[:60]}",
                    "url": f"{base_url}/sources/pipeline-{query_id}/{i}"} for i in (1, 2)]
    cite = [f"[{s['id']}]" for s in sources]
    data: dict[str, Any] = {}
    for name, kind, _description in _FIELD.findall(system):
        data[name] = _value(kind, f"[simulated {model}] {query_text}", cite)
    return Reply(json.dumps({"data": data, "sources": sources}))


def _sources(tool_results: list[str]) -> list[dict[str, str]]:
    sources: list[dict[str, str]] = []
    for text in tool_results:
        try:
            value = json.loads(text)
        except ValueError:
            continue
        for hit in value.get("results") or [] if isinstance(value, dict) else []:
            if isinstance(hit, dict) and hit.get("url") and len(sources) < 3:
                sources.append({"id": f"S{len(sources) + 1}", "source_type": "web",
                                "title": str(hit.get("title") or hit["url"]),
                                "url": str(hit["url"]),
                                "excerpt": str(hit.get("snippet") or "")[:200]})
    return sources


def _value(kind: str, about: str, cite: list[str]) -> Any:
    first = cite[0] if cite else ""
    match kind:
        case "string":
            return f"{about}: a finding drawn from the sources {''.join(cite)}."
        case "array":
            return [f"Point {i} on {about[:80]} {c}" for i, c in enumerate(cite or [""], 1)]
        case "object":
            return {"notes": f"{about} {first}".strip()}
        case "number":
            return 1
        case _:
            return True
