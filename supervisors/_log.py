"""Where the runtime's structlog events go: the application's configuration, or stderr.

structlog's own default writes to stdout, which would corrupt a stdio protocol; so until the
application configures structlog, our events go to a stderr logger that drops debug events.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import structlog

_fallback: Any = None


class _Stderr:
    """A structlog output that looks up sys.stderr at each write (it may be swapped)."""

    def msg(self, message: str) -> None:
        stream = sys.stderr
        stream.write(message + "\n")
        stream.flush()

    log = debug = info = warn = warning = error = err = critical = fatal = exception = msg


def logger() -> Any:
    """The logger to use for one event (checked per event: configuration can come later)."""
    global _fallback
    if structlog.is_configured():
        return structlog.get_logger("supervisors")
    if _fallback is None:
        _fallback = structlog.wrap_logger(
            _Stderr(),
            processors=structlog.get_config()["processors"],
            wrapper_class=structlog.make_filtering_bound_logger(logging.INFO),
        ).bind()
    return _fallback


def debug_enabled() -> bool:
    """Whether a debug event would be kept: lets a hot path skip building the event's fields
    (reprs) when it would be dropped. Loggers that cannot say are assumed to keep it."""
    if not structlog.is_configured():
        return False  # our fallback logger drops debug events
    check = getattr(logger(), "is_enabled_for", None)
    return True if check is None else bool(check(logging.DEBUG))
