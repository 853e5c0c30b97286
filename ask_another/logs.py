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

import base64
import functools
import logging
import re
import sys
import threading
from collections.abc import Iterable
from typing import Any, TextIO

import structlog
from structlog.typing import EventDict, WrappedLogger

_MASK = "********"
# Keys of this length or more are masked wherever they appear, even inside a longer word; shorter
# ones (litellm proxy's documented `sk-1234`) only where they stand as a token of their own, so a
# short key does not turn every word that contains it into a mask.
MIN_SECRET_LENGTH = 8
#: Characters a key is made of; a short key is masked where no such character touches it.
_TOKEN_CHARS = r"A-Za-z0-9_\-"
#: Characters of a provider's message kept at most (after scrubbing, so no key is cut in two).
PROVIDER_TEXT_LIMIT = 2000
#: A run of this many characters of a key (or of it reversed) in a provider's or a model's text
#: is masked: the key split in two, or reversed, is still the key.
FRAGMENT = 12
_WINDOW = FRAGMENT // 2

_secrets_lock = threading.Lock()
_secrets: tuple[str, ...] = ()
_HANDLER_NAME = "ask-another-stderr"


def register_secrets(values: Iterable[str]) -> None:
    """Add values that must never appear in log output (API keys)."""
    global _secrets
    with _secrets_lock:
        merged = set(_secrets) | {v for v in values if v}
        # Longest first, so a key that contains another key is masked whole.
        _secrets = tuple(sorted(merged, key=len, reverse=True))


def _ordered(secrets: Iterable[str] | None) -> tuple[str, ...]:
    if secrets is None:
        return _secrets
    return tuple(sorted({s for s in secrets if s}, key=len, reverse=True))


def _mask_one(text: str, value: str) -> str:
    if value not in text:
        return text
    if len(value) >= MIN_SECRET_LENGTH:
        return text.replace(value, _MASK)
    token = rf"(?<![{_TOKEN_CHARS}]){re.escape(value)}(?![{_TOKEN_CHARS}])"
    return re.sub(token, _MASK, text)


def scrub(text: str, secrets: Iterable[str] | None = None) -> str:
    """`text` with every secret (the registered ones, or `secrets`) replaced by a mask, and so
    are its base64 and base64url forms and those of ``Bearer <secret>`` (a provider's error that
    quotes the request's headers, or a proxy that encodes them): every path, logs included.

    A secret of `MIN_SECRET_LENGTH` characters or more is masked wherever it appears; a shorter
    one wherever it stands as a token (not touching a letter, digit, `-` or `_`).
    """
    for value in _with_forms(_ordered(secrets)):
        text = _mask_one(text, value)
    return text


@functools.lru_cache(maxsize=64)
def _with_forms(values: tuple[str, ...]) -> tuple[str, ...]:
    """`values` and their encoded forms, longest first (cached: it is asked per log line)."""
    forms = [f for v in values for form in (v, f"Bearer {v}") for f in _base64_forms(form)]
    return _ordered([*values, *forms])


@functools.lru_cache(maxsize=64)
def _fragment_index(values: tuple[str, ...]) -> dict[str, tuple[tuple[str, int], ...]]:
    """Every `_WINDOW`-character run of each value of `FRAGMENT` characters or more (and of the
    value reversed), with where it stands in it."""
    index: dict[str, list[tuple[str, int]]] = {}
    for value in values:
        if len(value) < FRAGMENT:
            continue
        for form in (value, value[::-1]):
            for at in range(len(form) - _WINDOW + 1):
                index.setdefault(form[at:at + _WINDOW], []).append((form, at))
    return {window: tuple(places) for window, places in index.items()}


def _mask_fragments(text: str, values: tuple[str, ...]) -> str:
    """`text` with every run of `FRAGMENT` or more characters of a value (or of it reversed)
    masked: a key split in two, or reversed, by a provider's or a model's text."""
    return _masked(text, _fragment_spans(text, values))


def _fragment_spans(text: str, values: tuple[str, ...]) -> list[tuple[int, int]]:
    """Where `text` holds runs of `FRAGMENT` or more characters of a value (or of it reversed),
    in order. Any such run holds a `_WINDOW`-character window starting at a multiple of
    `_WINDOW` (FRAGMENT >= 2 * _WINDOW), so only those are looked up, then grown both ways."""
    index = _fragment_index(values)
    spans: list[tuple[int, int]] = []
    if not index:
        return spans
    for at in range(0, len(text) - _WINDOW + 1, _WINDOW):
        for form, offset in index.get(text[at:at + _WINDOW], ()):
            start, end, left, right = at, at + _WINDOW, offset, offset + _WINDOW
            while start > 0 and left > 0 and text[start - 1] == form[left - 1]:
                start, left = start - 1, left - 1
            while end < len(text) and right < len(form) and text[end] == form[right]:
                end, right = end + 1, right + 1
            if end - start >= FRAGMENT:
                spans.append((start, end))
    return sorted(spans)


def _masked(text: str, spans: list[tuple[int, int]]) -> str:
    if not spans:
        return text
    out, last = [], 0
    for start, end in spans:
        if end <= last:
            continue
        out.append(text[last:max(start, last)])
        if start >= last:
            out.append(_MASK)
        last = end
    out.append(text[last:])
    return "".join(out)


def _base64_forms(value: str) -> list[str]:
    """The runs of characters `value` always produces inside a base64 (or base64url) text, at
    each of the three byte alignments it can start at (edge characters, which depend on the
    neighbouring bytes, dropped)."""
    data = value.encode()
    forms: list[str] = []
    for shift in range(3):
        encoded = base64.b64encode(b"\0" * shift + data).decode()
        # Characters carrying only the padding bytes, or mixing in the next unknown byte, go.
        start = (shift * 4 + 2) // 3
        end = (len(data) + shift) * 4 // 3
        core = encoded[start:end].rstrip("=")
        if len(core) >= MIN_SECRET_LENGTH:
            forms.append(core)
            forms.append(core.replace("+", "-").replace("/", "_"))
    whole = base64.b64encode(data).decode()
    forms += [whole, whole.rstrip("="), whole.replace("+", "-").replace("/", "_")]
    return list(dict.fromkeys(forms))


def scrub_answer(text: str, secrets: Iterable[str] | None = None) -> str:
    """`text` (a model's answer) scrubbed of each secret, its encoded forms and any run of
    `FRAGMENT` characters of it: a provider that echoes the key it was called with must not get
    it shown or stored."""
    values = _ordered(secrets)
    return _mask_fragments(scrub(text, values), values)


def scrub_provider_text(text: str, secrets: Iterable[str] | None = None,
                        limit: int = PROVIDER_TEXT_LIMIT) -> str:
    """A provider's message scrubbed, then cut to `limit` characters, then rid of any start of
    a key left at its end (the message may have been cut by us, or upstream, inside a key)."""
    values = _ordered(secrets)
    text = _mask_fragments(scrub(text, values), values)[:limit]
    return _mask_key_start_at_end(text, values)


def _mask_key_start_at_end(text: str, values: Iterable[str]) -> str:
    for value in values:
        for size in range(min(len(value) - 1, len(text)), 0, -1):
            if not text.endswith(value[:size]):
                continue
            at = len(text) - size
            # A long prefix is a leak wherever it stands; a short one only as a token's start.
            if size >= MIN_SECRET_LENGTH or at == 0 or not re.match(
                    f"[{_TOKEN_CHARS}]", text[at - 1]):
                return text[:at] + _MASK
            break
    return text


class StreamScrubber:
    """Scrubs an answer that arrives in chunks: `feed(chunk)` returns the text safe to show now,
    holding back only an end that could be the start of a key (or of its base64) still arriving;
    `flush()` returns the rest. Not thread-safe: one per stream."""

    def __init__(self, secrets: Iterable[str] | None = None) -> None:
        self._values = _ordered(secrets)
        # Every form once, longest first (what `scrub` would compute on every chunk).
        self._forms = _with_forms(self._values)
        self._pending = ""

    def feed(self, chunk: str) -> str:
        text = scrub(self._pending + chunk, self._forms)
        hold = self._fragment_start_at_end(text)
        for form in self._forms:
            # The longest end of `text` that starts `form` (a whole short key at the end is
            # held too: the next character decides whether it stands as a token of its own).
            tail = text[-len(form):]
            at = tail.find(form[0])
            while at != -1 and len(tail) - at > hold:
                if form.startswith(tail[at:]):
                    hold = len(tail) - at
                    break
                at = tail.find(form[0], at + 1)
        cut = len(text) - hold
        # A fragment that reaches the end may go on in the next chunk, and one the cut would
        # halve must be masked whole: both are held, unmasked (masked now, the rest of the
        # fragment would come out on its own).
        spans = _fragment_spans(text, self._values)
        for start, end in reversed(spans):
            if start < cut and (end == len(text) or end > cut):
                cut = start
        self._pending = text[cut:]
        return _masked(text[:cut], [span for span in spans if span[1] <= cut])

    def _fragment_start_at_end(self, text: str) -> int:
        """How long an end of `text` could be the start of a fragment of a key still arriving:
        the longest end, shorter than `FRAGMENT`, that a key (or a key reversed) holds."""
        for size in range(min(len(text), FRAGMENT - 1), 0, -1):
            end = text[-size:]
            if any(end in value or end in value[::-1]
                   for value in self._values if len(value) >= FRAGMENT):
                return size
        return 0

    def flush(self) -> str:
        text = _mask_fragments(scrub(self._pending, self._forms), self._values)
        self._pending = ""
        return text


class _ScrubbingFormatter(structlog.stdlib.ProcessorFormatter):
    def format(self, record: logging.LogRecord) -> str:
        return scrub(super().format(record))


def _anticipated(exc: BaseException | None) -> bool:
    """Whether `exc` is, or was caused by, one of our own errors (`AskAnotherError`): a failure
    with a one-line reason for a person, such as a refused database login, not a bug."""
    from ask_another.errors import AskAnotherError  # errors.py imports nothing of ours

    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, AskAnotherError):
            return True
        exc, seen = exc.__cause__, seen + 1
    return False


def _traceback_only_for_bugs(_: WrappedLogger, __: str, event: EventDict) -> EventDict:
    """Drop the traceback of an event about an anticipated error (a crash report of the actor
    whose start it failed, say): its `error` field already says why, and an administrator's log
    should not show three tracebacks for a wrong password. At DEBUG they stay."""
    exc = event.get("exc_info")
    if isinstance(exc, BaseException) and _anticipated(exc) \
            and logging.getLogger().level > logging.DEBUG:
        del event["exc_info"]
    return event


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
            _traceback_only_for_bugs,
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
