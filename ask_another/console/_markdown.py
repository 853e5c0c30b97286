"""A finished report's Markdown as HTML the console can put in a page with nothing in it to run.

Reports are written by a model, which may have read hostile pages: the text can hold script
tags, ``javascript:`` links, attributes like ``onerror`` or any raw HTML. markdown-it-py
(CommonMark, plus GFM tables and strikethrough) renders it with raw HTML off, so every tag in
the text is shown as text, escaped; a link is kept only for http, https and mailto (everything
else, ``javascript:`` and ``data:`` included, stays as the Markdown typed), and carries
``rel="nofollow noopener noreferrer"``. Images are not rendered (the page's CSP would refuse
another site's image anyway, and a report's image would tell that site who read it): their
Markdown reads as a link to the image.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.renderer import RendererHTML
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict
from markupsafe import Markup

LINK_SCHEMES = ("http://", "https://", "mailto:")


class _Reports(MarkdownIt):
    def validateLink(self, url: str) -> bool:  # markdown-it's name
        return url.strip().lower().startswith(LINK_SCHEMES)


def _link_open(renderer: RendererHTML, tokens: Sequence[Token], idx: int,
               options: OptionsDict, env: EnvType) -> str:
    tokens[idx].attrSet("rel", "nofollow noopener noreferrer")
    return renderer.renderToken(tokens, idx, options, env)


def report_renderer() -> MarkdownIt:
    """A renderer for reports (one per console: it holds no state between renders)."""
    md = _Reports("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.enable(["table", "strikethrough"]).disable("image")
    md.add_render_rule("link_open", _link_open)
    return md


def report_html(md: MarkdownIt, text: Any) -> Markup:
    """The report `text` as safe HTML (`Markup`, so Jinja2 does not escape it again)."""
    return Markup(md.render(str(text or "")))  # html off: markdown-it escaped it
