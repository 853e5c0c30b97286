"""The asyncio face's tests: each runs a whole asyncio program (`run(main)`), under
`asyncio.run` and under uvloop, against the simulator on the thread transport."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import httpx  # noqa: F401 - see below
import pytest
import uvloop

# The thread transport imports litellm (and with it httpx) in its thread while the test's loop
# runs; the openai client of the adapter tests reads sys.modules["httpx"] on each request and
# fails on a module still being imported ("partially initialized module 'httpx'"). Loaded here
# first. An embedding program on the default transport imports litellm in the worker process.

RunAsyncio = Callable[[Callable[[], Awaitable[Any]]], Any]


@pytest.fixture(params=["asyncio", "uvloop"])
def run(request: pytest.FixtureRequest) -> RunAsyncio:
    """`run(main)`: `main()` as an asyncio program, on the standard loop or on uvloop's."""
    if request.param == "uvloop":
        return lambda main: uvloop.run(main())
    return lambda main: asyncio.run(main())
