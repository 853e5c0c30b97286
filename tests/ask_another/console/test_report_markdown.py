"""A report's Markdown as the console renders it (console/_markdown.py): the hostile inputs a
model that read a hostile page may write, none of which may come out as markup that runs."""

from __future__ import annotations

from html.parser import HTMLParser

import pytest

from ask_another.console._markdown import report_html, report_renderer


@pytest.mark.parametrize("hostile", [
    "<script>alert(1)</script>",
    '<img src=x onerror="alert(1)">',
    "<a href=\"javascript:alert(1)\">x</a>",
    "<div style=\"background:url(javascript:alert(1))\">x</div>",
    "[x](javascript:alert(1))",
    "[x](JaVaScRiPt:alert(1))",
    "[x](  javascript:alert(1))",
    "[x](data:text/html;base64,PHNjcmlwdD4=)",
    "[x](vbscript:msgbox)",
    "<javascript:alert(1)>",
    "![x](javascript:alert(1))",
    "[x]: javascript:alert(1)\n\n[x]",
    "```\n</code><script>alert(1)</script>\n```",
])
def test_nothing_hostile_comes_out_as_markup(hostile: str):
    tags = Tags()
    tags.feed(report_html(report_renderer(), hostile))
    assert tags.seen <= {"p", "pre", "code", "a"}, tags.seen
    assert all(name in ("href", "rel") for name, _ in tags.attributes), tags.attributes
    assert all(value is None or not value.lower().startswith(("javascript", "data", "vbscript"))
               for _, value in tags.attributes), tags.attributes


class Tags(HTMLParser):
    """The elements and attributes of some HTML, as a browser's parser reads them."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: set[str] = set()
        self.attributes: list[tuple[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.seen.add(tag)
        self.attributes.extend(attrs)


def test_markdown_is_rendered_and_links_carry_rel():
    html = report_html(report_renderer(),
                       "# Title\n\n**bold** [a](https://a.example/?q=1&r=2) <https://b.example>"
                       "\n\n| h |\n| - |\n| c |\n\n![img](https://c.example/i.png)")
    assert "<h1>Title</h1>" in html and "<strong>bold</strong>" in html
    assert ('<a href="https://a.example/?q=1&amp;r=2" rel="nofollow noopener noreferrer">a</a>'
            in html)
    assert '<a href="https://b.example" rel="nofollow noopener noreferrer">' in html
    assert "<th>h</th>" in html and "<td>c</td>" in html
    assert "<img" not in html and 'href="https://c.example/i.png"' in html


def test_no_report_is_empty():
    assert report_html(report_renderer(), None) == ""
