"""Fixtures for the conversation tests: a runtime on the simulator and a loopback article site."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest
import trio
from conversation_pages import ARTICLE_HTML
from loopback_pages import Page, PageServer

from ask_another.config import Config
from ask_another.conversations import Conversations
from ask_another.runtime import Runtime, open_runtime


@pytest.fixture
async def pages(nursery: trio.Nursery) -> PageServer:
    site = await PageServer().start(nursery)
    site.add("/ledger", Page(ARTICLE_HTML.encode()))
    return site


@pytest.fixture
async def runtime(make_config: Callable[..., Config], pages: PageServer
                  ) -> AsyncIterator[Runtime]:
    config = make_config(ASK_ANOTHER_ALLOW_HOSTS=pages.hostport)
    async with open_runtime(config, prewarm_after=0) as rt:
        yield rt


@pytest.fixture
def conversations(runtime: Runtime) -> Conversations:
    return runtime.conversations
