"""Fixtures for the supervisors tests: structlog events captured so nothing reaches a terminal."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import structlog


@pytest.fixture
def events() -> Iterator[list[dict[str, Any]]]:
    """Every structlog event the runtime logs during the test."""
    with structlog.testing.capture_logs() as captured:
        yield captured
