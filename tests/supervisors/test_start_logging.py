"""The DynamicSupervisor's per-start debug event follows structlog's configuration as it changes.

The check that decides whether to build the event keeps a bound logger between starts (binding
one per start costs more than the start); these pin that a new configuration, or a new level on
a stdlib logger, is still obeyed at the next start.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
import structlog
import trio
from actors_for_tests import Echo

from supervisors import child_spec, start_dynamic_supervisor


class _Sink:
    """A structlog logger that keeps every rendered event."""

    def __init__(self, kept: list[str]) -> None:
        self.kept = kept

    def msg(self, message: str) -> None:
        self.kept.append(message)

    debug = info = warning = error = msg


@pytest.fixture
def kept() -> Iterator[list[str]]:
    kept: list[str] = []
    yield kept
    structlog.reset_defaults()


def _configure(kept: list[str], level: int) -> None:
    structlog.configure(
        processors=[structlog.processors.KeyValueRenderer(key_order=["event"])],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=lambda *_: _Sink(kept),
        cache_logger_on_first_use=False,
    )


def _starts(kept: list[str]) -> int:
    return sum("supervisor.child_started" in line for line in kept)


async def test_child_started_events_follow_a_new_structlog_level(
    nursery: trio.Nursery, kept: list[str]
) -> None:
    sup = await start_dynamic_supervisor(nursery)
    spec = child_spec(Echo, restart="temporary")
    _configure(kept, logging.INFO)
    await sup.start_child(spec)
    assert _starts(kept) == 0
    _configure(kept, logging.DEBUG)
    await sup.start_child(spec)
    assert _starts(kept) == 1
    _configure(kept, logging.INFO)
    await sup.start_child(spec)
    assert _starts(kept) == 1


async def test_child_started_events_follow_a_stdlib_level_change(
    nursery: trio.Nursery, caplog: pytest.LogCaptureFixture
) -> None:
    structlog.configure(
        processors=[structlog.stdlib.filter_by_level, structlog.processors.KeyValueRenderer()],
        wrapper_class=structlog.stdlib.BoundLogger,
        logger_factory=structlog.stdlib.LoggerFactory(),
        cache_logger_on_first_use=False,
    )
    try:
        sup = await start_dynamic_supervisor(nursery)
        spec = child_spec(Echo, restart="temporary")
        caplog.set_level(logging.INFO, logger="supervisors")
        await sup.start_child(spec)
        caplog.set_level(logging.DEBUG, logger="supervisors")
        await sup.start_child(spec)
        caplog.set_level(logging.INFO, logger="supervisors")
        await sup.start_child(spec)
    finally:
        structlog.reset_defaults()
    records: list[Any] = [r for r in caplog.records if "supervisor.child_started" in r.message]
    assert len(records) == 1
