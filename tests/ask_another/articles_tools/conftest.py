"""Fixtures for the article tool tests: the loopback article site (tests/support)."""

from __future__ import annotations

import pytest
import trio
from conversation_pages import ARTICLE_HTML
from loopback_pages import Page, PageServer


@pytest.fixture
async def pages(nursery: trio.Nursery) -> PageServer:
    site = await PageServer().start(nursery)
    site.add("/ledger", Page(ARTICLE_HTML.encode()))
    return site
