"""`search_web`: web search through litellm's search API, with the configured engine.

The engine comes from a `SEARCH_<NAME>="provider;api-key[;api_base]"` variable (config.py): any
provider of `litellm.asearch` (tavily, searxng, exa_ai, brave, serper, firecrawl, parallel_ai,
duckduckgo, perplexity, ...). The call itself is the gateway's (`Gateway.search`), so the key is
handed to litellm per call and scrubbed from every error, like a model's. Without an engine no
search tool is offered.

Like `read_article` it never raises for a failed search: the result is
``{"success": False, "error": ...}`` with a reason the model (or a person) can act on. Each search
that reached the provider is reported to `on_usage` (a job counts it with its provider calls).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from ask_another import tracing
from ask_another.config import SearchEntry
from ask_another.errors import AskAnotherError
from ask_another.gateway import Gateway, SearchResult
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
_SNIPPET_CHARS: Final = 500


async def search_web(
    gateway: Gateway,
    engine: SearchEntry,
    query: str,
    *,
    max_results: int = MAX_RESULTS,
    timeout: float = 30.0,  # noqa: ASYNC109 - bounds the whole search, like read_article's
    on_usage: Callable[[SearchResult], None] | None = None,
) -> dict[str, Any]:
    """Search `query` with `engine`; at most `max_results` results (title, url, snippet)."""
    query = (query or "").strip()
    if not query:
        return {"success": False, "error": "No search query provided"}
    try:
        # The span of the search (tracing.py); the query is content, so only with consent.
        attributes: dict[str, Any] = {"ask_another.search.engine": engine.provider}
        if tracing.capture_content():
            attributes["ask_another.search.query"] = query
        with tracing.span("web_search", attributes) as span:
            found = await gateway.search(engine, query, max_results=max_results,
                                         timeout=timeout)
            if span is not None:
                span.set_attribute("ask_another.search.hits", len(found.hits))
    except AskAnotherError as exc:
        log.warning("websearch.failed", provider=engine.provider, error=type(exc).__name__)
        return {"success": False,
                "error": f"Could not search the web for {query!r} ({engine.provider}): {exc}"}
    if on_usage is not None:
        on_usage(found)
    results = [{"title": hit.title, "url": hit.url, "snippet": hit.snippet[:_SNIPPET_CHARS]}
               for hit in found.hits[:max_results]]
    log.info("websearch.done", provider=engine.provider, results=len(results))
    return {"success": True, "type": "search_results", "query": query, "results": results}
