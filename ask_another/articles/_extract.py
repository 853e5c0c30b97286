"""Turning fetched bytes into text: charset decoding and trafilatura article extraction.

``extract_article_text`` is CPU-bound (lxml parsing plus trafilatura's heuristics); it imports
trafilatura lazily so that importing ``ask_another.articles`` stays cheap. Its cost grows with the
page's element count, not only its size: a 5 MB table of 800,000 elements took 16 s and 670 MB
here, and the memory stays with the process that parsed it. So ``extract_bounded`` sorts pages:

- more than ``MAX_ELEMENTS`` elements: refused before parsing (``ExtractionRefused``);
- small (``IN_THREAD_CHARS`` characters and ``IN_THREAD_ELEMENTS`` elements at most): in a worker
  thread, as before (a few milliseconds);
- anything else: in a child process (``main`` here, through ``python -c``) with an address
  space limit (``EXTRACT_MEMORY``) and a deadline (``EXTRACT_TIMEOUT``): the server never holds
  a big page's parse tree, the memory goes back to the system when the child exits, and a page
  that is too slow or too big to parse is killed and named.
"""

from __future__ import annotations

import codecs
import json
import re
import sys
from typing import Final

#: Pages with more HTML elements than this are not parsed at all.
MAX_ELEMENTS: Final = 150_000
#: Pages at most this long and this many elements are extracted in a thread of the server.
IN_THREAD_CHARS: Final = 500_000
IN_THREAD_ELEMENTS: Final = 10_000
#: Seconds and bytes of address space an extraction in a child process may use.
EXTRACT_TIMEOUT: Final = 15.0
EXTRACT_MEMORY: Final = 1_500_000_000
_ELEMENT: Final = re.compile(r"<[A-Za-z]")


class ExtractionRefused(Exception):
    """The page is too complex, too slow or too big to extract; the message says which."""


def count_elements(html: str) -> int:
    """How many start tags `html` has (a cheap upper bound on its element count)."""
    return sum(1 for _ in _ELEMENT.finditer(html))

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


async def extract_bounded(html: str, url: str | None = None, *,
                          timeout: float = EXTRACT_TIMEOUT,  # noqa: ASYNC109 - its own budget
                          memory: int = EXTRACT_MEMORY) -> str | None:
    """`extract_article_text` within the bounds in the module docstring; raises
    `ExtractionRefused` (with a reason a person can act on) when a bound trips. Cancellation
    kills a child process at once; a thread finishes its (small) page first."""
    import trio

    elements = count_elements(html)
    if elements > MAX_ELEMENTS:
        raise ExtractionRefused(
            f"the page has {elements:,} HTML elements, more than the {MAX_ELEMENTS:,} that are "
            "extracted (a page that large is a data dump rather than an article)")
    if len(html) <= IN_THREAD_CHARS and elements <= IN_THREAD_ELEMENTS:
        return await trio.to_thread.run_sync(extract_article_text, html, url)
    command = [sys.executable, "-c", "from ask_another.articles._extract import main; main()",
               str(memory), url or ""]
    try:
        with trio.fail_after(timeout):
            done = await trio.run_process(command, stdin=html.encode("utf-8", "surrogatepass"),
                                          capture_stdout=True, capture_stderr=True, check=False)
    except trio.TooSlowError:
        raise ExtractionRefused(f"extracting its text took longer than {timeout:g} s") from None
    if done.returncode != 0:
        if b"MemoryError" in done.stderr:
            raise ExtractionRefused(f"extracting its text needed more than "
                                    f"{memory / 1e9:.3g} GB of memory")
        last = done.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no output"]
        raise ExtractionRefused(f"the extraction process failed ({last[0][:200]})")
    text = json.loads(done.stdout)["text"]
    return text if isinstance(text, str) else None


def main() -> None:
    """The child process: HTML on stdin, ``{"text": ...}`` on stdout, under an address space
    limit given as the first argument (the URL is the second)."""
    import resource

    limit = int(sys.argv[1])
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    html = sys.stdin.buffer.read().decode("utf-8", "surrogatepass")
    text = extract_article_text(html, sys.argv[2] or None)
    sys.stdout.write(json.dumps({"text": text}))
