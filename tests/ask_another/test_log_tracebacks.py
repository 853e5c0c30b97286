"""Crash reports of anticipated errors: their one-line reason, no traceback (below DEBUG)."""

from __future__ import annotations

import io
import logging

import structlog

from ask_another.errors import StoreError
from ask_another.logs import configure_logging


def logged(level: str, exc: BaseException) -> str:
    """What our stderr format writes for a crash report of `exc` at `level` (the logging setup
    of the rest of the session put back afterwards)."""
    root = logging.getLogger()
    handlers, root_level = list(root.handlers), root.level
    configured, config = structlog.is_configured(), structlog.get_config()
    out = io.StringIO()
    configure_logging(level, stream=out)
    try:
        structlog.get_logger("supervisors").error("actor.crashed", error=str(exc), exc_info=exc)
    finally:
        root.handlers[:] = handlers
        root.setLevel(root_level)
        if configured:
            structlog.configure(**config)
        else:
            structlog.reset_defaults()
    return out.getvalue()


def raised(exc: BaseException) -> BaseException:
    try:
        raise exc
    except BaseException as caught:
        return caught


def test_a_refused_database_login_is_one_line_at_info_and_a_traceback_at_debug():
    # Three tracebacks for a wrong password at every start of serve --http.
    wrapped = RuntimeError("'store' failed to start")
    wrapped.__cause__ = raised(StoreError("cannot connect to the database postgresql://a:****@db"))
    at_info = logged("INFO", raised(wrapped))
    assert "actor.crashed" in at_info and "Traceback" not in at_info
    assert "Traceback" in logged("DEBUG", raised(wrapped))


def test_a_bug_keeps_its_traceback():
    assert "Traceback" in logged("INFO", raised(KeyError("a bug")))
