"""Fixtures for the article tool tests: the loopback article site and the stdio helper's path.

The helpers live next to the tests that own them (conversations/, server/); the test tree imports
helpers by module name, so their folders are put on the path here.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import trio

HERE = Path(__file__).resolve().parent
for helper_dir in (HERE.parent / "conversations", HERE.parent / "server"):
    if str(helper_dir) not in sys.path:
        sys.path.insert(0, str(helper_dir))

from conversation_pages import ARTICLE_HTML, ArticlePages, Page  # noqa: E402


@pytest.fixture
async def pages(nursery: trio.Nursery) -> ArticlePages:
    site = await ArticlePages().start(nursery)
    site.add("/ledger", Page(ARTICLE_HTML.encode()))
    return site
