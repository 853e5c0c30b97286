"""`search_web`: web search through a SearXNG instance the user runs or trusts.

Configured with `ASK_ANOTHER_SEARXNG_URL` (for example ``http://localhost:8888``); without it no
search tool is offered. The instance is the user's own choice, so unlike `read_article` it may be
on a private or loopback address. SearXNG must have the JSON format enabled
(``search.formats: [html, json]`` in its settings.yml); a 403 says so.

Like `read_article` it never raises for a failed search: the result is
``{"success": False, "error": ...}`` with a reason the model (or a person) can act on.
"""

from __future__ import annotations

import json
from typing import Any, Final

import trio

from ask_another.logs import get_logger

__all__ = [
    "MAX_RESULTS",
    "SEARCH_WEB_DESCRIPTION",
    "SEARCH_WEB_NAME",
    "SEARCH_WEB_PARAMETERS",
    "search_web",
]

log = get_logger("ask_another.websearch")

SEARCH_WEB_NAME: Final = "search_web"
SEARCH_WEB_DESCRIPTION: Final = (
    "Search the web and get a list of results (title, URL, snippet). Use it to find sources; "
    "then use read_article on the most promising URLs to read them in full."
)
SEARCH_WEB_PARAMETERS: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "minLength": 1, "description": "What to search for."},
    },
    "required": ["query"],
}
MAX_RESULTS: Final = 8
_MAX_BYTES: Final = 2_000_000
_SNIPPET_CHARS: Final = 500


async def search_web(
    query: str,
    *,
    base_url: str,
    max_results: int = MAX_RESULTS,
    timeout: float = 15.0,  # noqa: ASYNC109 - bounds the whole search, like read_article's
) -> dict[str, Any]:
    """Search `query` on the SearXNG instance at `base_url`; at most `max_results` results."""
    import httpx  # only when a search runs: keeps the server's start-up light

    query = (query or "").strip()
    if not query:
        return {"success": False, "error": "No search query provided"}
    failure = f"Could not search the web for {query!r}"
    try:
        with trio.fail_after(timeout):
            async with httpx.AsyncClient(trust_env=False, timeout=timeout) as client:
                response = await client.get(
                    f"{base_url}/search",
                    params={"q": query, "format": "json"},
                    headers={"Accept": "application/json"},
                )
    except trio.TooSlowError:
        return _failed(failure, f"the search engine took longer than {timeout:g} s", query)
    except httpx.HTTPError as exc:
        return _failed(failure, f"the search engine at {base_url} is unreachable ({exc})", query)
    if response.status_code == 403:
        return _failed(failure, "the SearXNG instance refuses the JSON format; enable it "
                       "with search.formats: [html, json] in its settings.yml", query)
    if response.status_code != 200:
        return _failed(failure, f"the search engine answered {response.status_code}", query)
    if len(response.content) > _MAX_BYTES:
        return _failed(failure, "the search engine's answer is too large", query)
    try:
        raw = json.loads(response.content)
        results = [
            {
                "title": str(item.get("title") or item.get("url")),
                "url": str(item["url"]),
                "snippet": str(item.get("content") or "")[:_SNIPPET_CHARS],
            }
            for item in raw.get("results", [])
            if isinstance(item, dict) and item.get("url")
        ][:max_results]
    except (ValueError, AttributeError, TypeError):
        return _failed(failure, "the search engine's answer is not SearXNG JSON", query)
    log.info("websearch.done", results=len(results))
    return {"success": True, "type": "search_results", "query": query, "results": results}


def _failed(failure: str, reason: str, query: str) -> dict[str, Any]:
    log.warning("websearch.failed", reason=reason, query_chars=len(query))
    return {"success": False, "error": f"{failure}: {reason}"}
