"""Turning fetched bytes into text: charset decoding and trafilatura article extraction.

``extract_article_text`` is CPU-bound (lxml parsing plus trafilatura's heuristics) and must run
in a worker thread; it imports trafilatura lazily so that importing ``ask_another.articles``
stays cheap and the import cost (about a second) is paid off the event loop.
"""

from __future__ import annotations

import codecs
import re
from typing import Final

_BOMS: Final = (
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
# <meta charset="x"> or <meta http-equiv="Content-Type" content="text/html; charset=x">
_META_CHARSET: Final = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([a-zA-Z0-9_:.-]+)""", re.I)


def _known(charset: str | None) -> str | None:
    if not charset:
        return None
    try:
        return codecs.lookup(charset).name
    except LookupError:
        return None


def decode_body(body: bytes, charset: str | None, media_type: str) -> str:
    """Decode with the byte-order mark, else the declared charset, else a detected one.

    Detection for HTML looks at ``<meta charset>`` in the first 4 kB; then UTF-8 is tried
    strictly, then charset_normalizer's best guess, and windows-1252 as the last resort.
    Undecodable bytes become U+FFFD rather than failing the read.
    """
    for bom, bom_encoding in _BOMS:
        if body.startswith(bom):
            return body.decode(bom_encoding, errors="replace")
    encoding = _known(charset)
    if encoding is None and media_type != "text/plain":
        match = _META_CHARSET.search(body[:4096])
        encoding = _known(match.group(1).decode("ascii")) if match else None
    if encoding is not None:
        return body.decode(encoding, errors="replace")
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        pass
    try:
        # A dependency of trafilatura; optional here so decoding never fails for lack of it.
        from charset_normalizer import from_bytes
    except ImportError:  # pragma: no cover - trafilatura requires it
        best = None
    else:
        best = from_bytes(body).best()
    if best is not None and best.encoding:
        return body.decode(best.encoding, errors="replace")
    return body.decode("cp1252", errors="replace")


def extract_article_text(html: str, url: str | None = None) -> str | None:
    """The main text of an HTML page without navigation, footers or comments; None if none.

    Blocking and CPU-bound: call it through ``trio.to_thread.run_sync``.
    """
    import trafilatura

    text = trafilatura.extract(
        html,
        url=url,
        output_format="txt",
        include_comments=False,
        include_tables=True,
    )
    return text if text and text.strip() else None
