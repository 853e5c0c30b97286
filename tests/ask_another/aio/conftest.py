"""The asyncio face's tests: each runs a whole asyncio program (`run(main)`), under
`asyncio.run` and under uvloop, against the simulator on the thread transport."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import uvloop

RunAsyncio = Callable[[Callable[[], Awaitable[Any]]], Any]


@pytest.fixture(params=["asyncio", "uvloop"])
def run(request: pytest.FixtureRequest) -> RunAsyncio:
    """`run(main)`: `main()` as an asyncio program, on the standard loop or on uvloop's."""
    if request.param == "uvloop":
        return lambda main: uvloop.run(main())
    return lambda main: asyncio.run(main())
