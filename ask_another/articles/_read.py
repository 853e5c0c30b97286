"""``read_article``: fetch a URL safely and return its article text in the tool result shape.

The function is the whole feature: the MCP tool and the model-callable tool (class "read") both
call it unchanged, with ``READ_ARTICLE_NAME``, ``READ_ARTICLE_DESCRIPTION`` and
``READ_ARTICLE_PARAMETERS`` describing it. It never raises for a failed fetch; the failure
comes back as ``{"success": False, "error": ...}`` and is logged to stderr as a structlog event.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, Final
from urllib.parse import urlsplit, urlunsplit

import structlog
import trio

from ask_another import tracing

from ._extract import ExtractionRefused, decode_body, extract_bounded

log = structlog.get_logger("ask_another.articles")

#: Characters of article text returned at most; longer text is cut and ``truncated`` is true.
CONTENT_CAP: Final = 40_000
#: Bytes read at most from one response body (after decompression).
DEFAULT_MAX_BYTES: Final = 5_000_000
#: Seconds one read_article call may spend fetching, redirects and DNS included.
DEFAULT_TIMEOUT: Final = 20.0
#: Redirects followed at most; each target is checked like the first URL.
MAX_REDIRECTS: Final = 5

READ_ARTICLE_NAME: Final = "read_article"
READ_ARTICLE_DESCRIPTION: Final = (
    "Fetch and read the full text of a web page or article from a URL. "
    "Use when the user shares a URL and wants you to read it, "
    "or to get the full content of a linked page. "
    "Do not use search_web for URLs — use this tool instead."
)
#: JSON schema of the tool's arguments: one required string, ``url``.
READ_ARTICLE_PARAMETERS: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {"url": {"type": "string", "description": "The URL to fetch"}},
    "required": ["url"],
}


def _loggable(url: str) -> str:
    """The URL without any ``user:password@`` part, for logs."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparseable url>"
    if parts.username is None and parts.password is None:
        return url
    netloc = parts.hostname or ""
    if parts.port is not None:
        netloc = f"{netloc}:{parts.port}"
    return urlunsplit(parts._replace(netloc=netloc))


def _failure(url: str, reason: str) -> dict[str, Any]:
    log.warning("article.fetch_failed", url=_loggable(url), reason=reason)
    return {"success": False, "error": f"Could not fetch article content from {url}: {reason}"}


async def read_article(
    url: str,
    *,
    allow_hosts: Collection[str] = (),
    max_bytes: int = DEFAULT_MAX_BYTES,
    # A deadline parameter (not only the caller's cancel scope) because a model-called tool
    # needs its own budget whatever scope the caller runs it in.
    timeout: float = DEFAULT_TIMEOUT,  # noqa: ASYNC109
) -> dict[str, Any]:
    """Fetch ``url`` and return its article text, or a failure a person can act on.

    Success: ``{"success": True, "type": "article_content", "url": url,
    "content": text[:40000], "truncated": len(text) > 40000}``, where ``url`` is the URL as
    given (stripped) and the text is trafilatura's extraction for HTML, or the decoded body
    for text/plain. Failure: ``{"success": False, "error": "No URL provided"}`` for an empty
    url, else ``"Could not fetch article content from <url>: <reason>"``.

    Only http and https; hosts resolving to loopback, private, link-local, metadata or other
    non-public addresses are refused, on every redirect, unless named in ``allow_hosts``
    (``host`` or ``host:port``). ``max_bytes`` caps the body, ``timeout`` the whole fetch.
    Extraction runs after the fetch, bounded on its own (``_extract.extract_bounded``: a page of
    over 50,000 elements is refused, a large one is extracted in a child process with a time
    and memory limit). Cancelling the caller cancels the fetch and kills an extraction process;
    an extraction in a thread (small pages only) finishes first. Raises only for programming
    errors: ``ValueError`` for a non-positive limit, ``TypeError`` for a string ``allow_hosts``.
    """
    # Programming errors, not fetch failures: these raise.
    if max_bytes <= 0 or timeout <= 0:
        raise ValueError("max_bytes and timeout must be positive")
    if isinstance(allow_hosts, str):
        # A raw "a,b" string would be matched character by character: refuse it loudly.
        raise TypeError("allow_hosts must be a collection of host entries, not one string")
    if not isinstance(url, str) or not url.strip():
        return {"success": False, "error": "No URL provided"}
    url = url.strip()
    # A span per read (tracing.py): the host always, the URL only if the operator opted in to
    # content (a URL may carry what the prompt asked about).
    attributes: dict[str, Any] = {"server.address": urlsplit(url).hostname or ""} \
        if _parses(url) else {}
    if tracing.capture_content():
        attributes["url.full"] = _loggable(url)
    with tracing.span("read_article", attributes) as span:
        found = await _read(url, allow_hosts, max_bytes, timeout)
        if span is not None:
            span.set_attribute("ask_another.article.success", bool(found.get("success")))
            span.set_attribute("ask_another.article.chars", len(str(found.get("content", ""))))
        return found


def _parses(url: str) -> bool:
    try:
        urlsplit(url).hostname  # noqa: B018 - a bad port or IPv6 literal raises here
    except ValueError:
        return False
    return True


async def _read(url: str, allow_hosts: Collection[str], max_bytes: int,
                timeout: float) -> dict[str, Any]:  # noqa: ASYNC109
    # Imported at the first read: httpx and httpcore cost a tenth of a second at server start-up.
    from ._fetch import FetchError, fetch_page

    try:
        with trio.fail_after(timeout):
            page = await fetch_page(
                url,
                allow_hosts=allow_hosts,
                max_bytes=max_bytes,
                operation_timeout=timeout,
                max_redirects=MAX_REDIRECTS,
            )
        decoded = decode_body(page.body, page.charset, page.media_type)
        if page.media_type == "text/plain":
            text: str | None = decoded
        else:
            text = await extract_bounded(decoded, page.url)
        if not text or not text.strip():
            raise FetchError("no readable article text was found on the page")
    except trio.TooSlowError:
        return _failure(url, f"it took longer than the {timeout:g} s limit")
    except FetchError as exc:
        return _failure(url, exc.reason)
    except ExtractionRefused as exc:
        return _failure(url, str(exc))
    except Exception as exc:
        # A bug or a library surprise: the caller (often a model) still gets a result, and
        # the traceback goes to the log rather than into the conversation.
        log.exception("article.read_crashed", url=_loggable(url))
        return _failure(url, f"an unexpected error occurred ({type(exc).__name__})")
    log.info(
        "article.read",
        url=_loggable(url),
        final_url=_loggable(page.url),
        media_type=page.media_type,
        bytes=len(page.body),
        chars=len(text),
    )
    return {
        "success": True,
        "type": "article_content",
        "url": url,
        "content": text[:CONTENT_CAP],
        "truncated": len(text) > CONTENT_CAP,
    }
