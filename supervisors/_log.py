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


_checked: tuple[Any, Any, Any] | None = None
"""(wrapper class, logger factory, bound logger) that `debug_enabled` last asked."""


def debug_enabled() -> bool:
    """Whether a debug event would be kept: lets a hot path skip building the event's fields
    (reprs) when it would be dropped. Loggers that cannot say are assumed to keep it.

    Binding a logger through structlog's lazy proxy costs more than starting an actor, so the
    bound logger is kept for as long as the configuration names the same wrapper class and
    logger factory; the level itself is asked every time (a stdlib logger's can change)."""
    global _checked
    if not structlog.is_configured():
        return False  # our fallback logger drops debug events
    config = structlog.get_config()
    wrapper, factory = config["wrapper_class"], config["logger_factory"]
    checked = _checked
    if checked is None or checked[0] is not wrapper or checked[1] is not factory:
        checked = _checked = (wrapper, factory, logger().bind())
    check = getattr(checked[2], "is_enabled_for", None)
    return True if check is None else bool(check(logging.DEBUG))
