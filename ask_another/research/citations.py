"""Sources a research turn consulted, from its tool calls: what it read and what it found.

An article the turn read (`read_article`, completed) is a source; its title is the title a web
search gave for that URL when the turn searched first, else the article's first line. Search
results the turn did not read are not sources: a snippet is not something the report relied on.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

from ask_another.articles import READ_ARTICLE_NAME
from ask_another.interaction.router import CallRecord
from ask_another.research.methods.method import Cited
from ask_another.websearch import SEARCH_WEB_NAME

__all__ = ["read_sources", "search_titles"]

TITLE_CHARS: Final = 120


def search_titles(calls: Iterable[CallRecord]) -> dict[str, str]:
    """URL → title of every result of the completed `search_web` calls."""
    titles: dict[str, str] = {}
    for call in calls:
        result = call.result if isinstance(call.result, dict) else {}
        if call.tool != SEARCH_WEB_NAME or call.status != "completed" or not result.get("success"):
            continue
        for hit in result.get("results") or []:
            if isinstance(hit, dict) and hit.get("url") and hit.get("title"):
                titles.setdefault(str(hit["url"]), str(hit["title"]))
    return titles


def read_sources(calls: Iterable[CallRecord], query: str | None = None) -> list[Cited]:
    """Every article read successfully, once, titled (see the module docstring)."""
    calls = list(calls)
    titles = search_titles(calls)
    found: dict[str, Cited] = {}
    for call in calls:
        result: dict[str, Any] = call.result if isinstance(call.result, dict) else {}
        url = str(result.get("url") or "")
        if call.tool != READ_ARTICLE_NAME or call.status != "completed" or not url:
            continue
        if not result.get("success") or url in found:
            continue
        found[url] = Cited(url, titles.get(url) or _first_line(result.get("content")) or url,
                           query)
    return list(found.values())


def _first_line(content: object) -> str | None:
    if not isinstance(content, str):
        return None
    for line in content.splitlines():
        line = " ".join(line.split()).lstrip("# ")
        if line:
            return line if len(line) <= TITLE_CHARS else line[:TITLE_CHARS - 1] + "…"
    return None
