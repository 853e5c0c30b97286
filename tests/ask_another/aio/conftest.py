"""The asyncio face's tests: each runs a whole asyncio program (`run(main)`), under
`asyncio.run` and under uvloop, against the simulator on the thread transport."""

from __future__ import annotations

import httpx  # noqa: F401 - see below
import pytest
from asyncio_runs import RUNNERS, RunAsyncio, runner

# The thread transport imports litellm (and with it httpx) in its thread while the test's loop
# runs; the openai client of the adapter tests reads sys.modules["httpx"] on each request and
# fails on a module still being imported ("partially initialized module 'httpx'"). Loaded here
# first. An embedding program on the default transport imports litellm in the worker process.


@pytest.fixture(params=RUNNERS)
def run(request: pytest.FixtureRequest) -> RunAsyncio:
    """`run(main)` under `asyncio.run`, then under uvloop."""
    return runner(request.param)
