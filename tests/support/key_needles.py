"""The keys the key-leak tests give the server, and `leaks(text)`: which of their forms a text
carries (the whole long key or any 10 characters from its start, its tail, its base64, the short
key at a word's end). Shared by the hostile-keys tests and the trace tests, which look for them
in every exported span attribute."""

from __future__ import annotations

import base64

LONG_KEY = "sk-VERYSECRET1234-a9c8e7"
SHORT_KEY = "sk-1234"  # litellm proxy's documented example key


def leaks(text: str | bytes) -> list[str]:
    data = text.encode() if isinstance(text, str) else text
    found = []
    if LONG_KEY[:10].encode() in data:  # any 10 characters from the start: a cut prefix too
        found.append("long key (or its first 10 characters)")
    if LONG_KEY[6:].encode() in data:
        found.append("long key's tail")
    if base64.b64encode(LONG_KEY.encode())[:16] in data:
        found.append("long key in base64")
    found.extend(f"short key followed by {edge!r}"
                 for edge in (b" ", b".", b"'", b'"', b":", b"\n")
                 if SHORT_KEY.encode() + edge in data)
    return found
