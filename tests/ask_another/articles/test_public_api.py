"""The public face of ask_another.articles: its exports and the tool description."""

from __future__ import annotations

import inspect

import ask_another.articles as articles


def test_all_is_sorted_and_complete() -> None:
    public = {n for n in vars(articles) if not n.startswith("_")}
    assert sorted(articles.__all__) == articles.__all__
    assert set(articles.__all__) == public


def test_tool_schema_has_one_required_string_url() -> None:
    assert articles.READ_ARTICLE_NAME == "read_article"
    assert articles.READ_ARTICLE_PARAMETERS == {
        "type": "object",
        "properties": {"url": {"type": "string", "description": "The URL to fetch"}},
        "required": ["url"],
    }
    assert articles.READ_ARTICLE_DESCRIPTION.startswith(
        "Fetch and read the full text of a web page or article from a URL."
    )
    assert "Do not use search_web for URLs" in articles.READ_ARTICLE_DESCRIPTION


def test_read_article_signature_matches_the_tool_schema() -> None:
    signature = inspect.signature(articles.read_article)
    (required,) = [p for p in signature.parameters.values() if p.default is inspect.Parameter.empty]
    assert required.name == "url"
    assert all(
        p.kind is inspect.Parameter.KEYWORD_ONLY
        for p in signature.parameters.values()
        if p.name != "url"
    )
    assert inspect.iscoroutinefunction(articles.read_article)
