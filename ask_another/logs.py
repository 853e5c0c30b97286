"""Logging: structlog events and stdlib records, all to stderr, all scrubbed of API keys.

stdout is the MCP protocol, so nothing here ever writes to it. `configure_logging()` must run
before `MCPServer` is constructed (the SDK calls `logging.basicConfig` when the root logger has no
handler). Every line passes through one stderr handler whose formatter removes each registered
secret, so an API key that reaches a log record (a provider echoing it in an error, a library's
debug line) is masked before it is written.

`silence_litellm()` runs right after litellm is imported: it turns off litellm's stdout banner and
replaces its logger handlers (one of which writes to stdout) with propagation to our handler.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Iterable
from typing import Any, TextIO

import structlog

_MASK = "********"
# Keys shorter than this are not scrubbed: replacing every "ab" in a message would destroy it, and
# no real provider issues keys that short.
MIN_SECRET_LENGTH = 8

_secrets_lock = threading.Lock()
_secrets: tuple[str, ...] = ()
_HANDLER_NAME = "ask-another-stderr"


def register_secrets(values: Iterable[str]) -> None:
    """Add values that must never appear in log output (API keys)."""
    global _secrets
    with _secrets_lock:
        merged = set(_secrets) | {v for v in values if len(v) >= MIN_SECRET_LENGTH}
        # Longest first, so a key that contains another key is masked whole.
        _secrets = tuple(sorted(merged, key=len, reverse=True))


def scrub(text: str, secrets: Iterable[str] | None = None) -> str:
    """`text` with every secret (the registered ones, or `secrets`) replaced by a mask."""
    values = _secrets if secrets is None else sorted(
        (s for s in secrets if len(s) >= MIN_SECRET_LENGTH), key=len, reverse=True
    )
    for value in values:
        if value in text:
            text = text.replace(value, _MASK)
    return text


class _ScrubbingFormatter(structlog.stdlib.ProcessorFormatter):
    def format(self, record: logging.LogRecord) -> str:
        return scrub(super().format(record))


def configure_logging(level: str = "INFO", stream: TextIO | None = None) -> None:
    """Send structlog events and stdlib records to `stream` (default stderr) as one scrubbed format.

    Idempotent: calling it again replaces our handler and keeps any other one.
    """
    out = stream if stream is not None else sys.stderr
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
    formatter = _ScrubbingFormatter(
        foreign_pre_chain=shared,
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            structlog.processors.format_exc_info,
            structlog.dev.ConsoleRenderer(colors=False),
        ],
    )
    handler = logging.StreamHandler(out)
    handler.set_name(_HANDLER_NAME)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    for old in [h for h in root.handlers if h.get_name() == _HANDLER_NAME]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    # httpx/httpcore log every request at INFO; the request lines are noise for an MCP server.
    for noisy in ("httpx", "httpcore", "openai", "aiohttp"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))


_LITELLM_LOGGERS = ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy")


def quiet_litellm_loggers() -> None:
    """Before `import litellm`: its handler writes records below WARNING to stdout, even during
    the import, so its loggers start at WARNING (they keep their level: litellm never resets it).
    """
    for name in _LITELLM_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)


def ensure_logging(level: str = "INFO") -> None:
    """Configure logging unless the host program already configured structlog.

    structlog's unconfigured default prints to stdout, which would corrupt the MCP protocol.
    """
    if not structlog.is_configured():
        configure_logging(level)


def silence_litellm(litellm: Any) -> None:
    """After `import litellm`: no stdout banner, and its loggers go through our stderr handler."""
    litellm.suppress_debug_info = True
    litellm.set_verbose = False
    for name in _LITELLM_LOGGERS:
        logger = logging.getLogger(name)
        for h in list(logger.handlers):
            logger.removeHandler(h)
        logger.propagate = True
        logger.setLevel(logging.WARNING)


def get_logger(name: str) -> Any:
    """A structlog logger; events go to stderr once `configure_logging()` has run."""
    return structlog.get_logger(name)
