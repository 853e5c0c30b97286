"""Where the runtime's structlog events go: the application's configuration, or stderr.

structlog's own default writes to stdout, which would corrupt a stdio protocol; so until the
application configures structlog, our events go to a stderr logger that drops debug events.
Looked up per event (configuration can come later), with no state kept between events.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import structlog


class _Stderr:
    """A structlog output that looks up sys.stderr at each write (it may be swapped)."""

    def msg(self, message: str) -> None:
        stream = sys.stderr
        stream.write(message + "\n")
        stream.flush()

    log = debug = info = warn = warning = error = err = critical = fatal = exception = msg


def logger() -> Any:
    """The logger to use for one event."""
    if structlog.is_configured():
        return structlog.get_logger("supervisors")
    return structlog.wrap_logger(
        _Stderr(),
        processors=structlog.get_config()["processors"],
        wrapper_class=structlog.make_filtering_bound_logger(logging.INFO),
    )


def debug_logger() -> Any | None:
    """The logger for a debug event, or None when it would surely be dropped (structlog not
    configured: the fallback drops debug events), so a hot path skips building its fields."""
    if structlog.is_configured():
        return structlog.get_logger("supervisors")
    return None


def log_crash(ref: object, exc: BaseException, phase: str) -> None:
    logger().error(
        "actor.crashed",
        actor=repr(ref),
        phase=phase,
        error=f"{type(exc).__name__}: {exc}",
        exc_info=exc,
    )
