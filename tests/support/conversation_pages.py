"""Helpers shared by the conversation and article-tool tests (imported by module name).

The article is served by `loopback_pages.PageServer` on 127.0.0.1; the tests reach it through
``ASK_ANOTHER_ALLOW_HOSTS`` (loopback is refused otherwise).
"""

from __future__ import annotations

from typing import Any

# Long enough for trafilatura to keep it as the article body.
ARTICLE_FACT = "The lighthouse keeper of Ardnamurchan counted 4,117 ships in the winter of 1923."
ARTICLE_HTML = f"""<!doctype html>
<html><head><title>The lighthouse keeper's ledger</title></head>
<body>
<nav><a href="/">Home</a> | <a href="/about">About</a> | Subscribe to our newsletter</nav>
<article>
<h1>The lighthouse keeper's ledger</h1>
<p>{ARTICLE_FACT} Every vessel went into a leather ledger, with its flag, its heading and the
state of the sea, in a hand that grew steadier as the nights grew longer.</p>
<p>Historians who found the ledger in 2019 used it to reconstruct the coastal trade of the
western Highlands between the wars, a trade that no port authority had recorded in such detail.
The keeper's notes on weather also matched the Met Office's own archive remarkably well.</p>
<p>The ledger is now kept in the museum at Kilchoan, where visitors can read a page of it
under glass, turned to a new date each week by the volunteers who look after the collection.</p>
</article>
<footer>Copyright the Coastal Gazette. All rights reserved. Cookie settings.</footer>
</body></html>"""


def tool_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m for m in messages if m.get("role") == "tool"]
