"""`runner(kind)`: a test's asyncio program run whole, under `asyncio.run` or uvloop's; the
asyncio-face and `supervisors.aio` tests make their `run` fixture of it over `RUNNERS`."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import uvloop

RunAsyncio = Callable[[Callable[[], Awaitable[Any]]], Any]
RUNNERS = ["asyncio", "uvloop"]


def runner(kind: str) -> RunAsyncio:
    """`run(main)`: `main()` as an asyncio program, on the standard loop or on uvloop's."""
    if kind == "uvloop":
        return lambda main: uvloop.run(main())
    return lambda main: asyncio.run(main())
