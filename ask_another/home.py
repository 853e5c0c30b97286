"""Whether the state directory (`ASK_ANOTHER_HOME`) can be used, in one line a person can act on.

The store would find out too, but only as a failed start of the supervision tree: by then the
supervisor has logged tracebacks and the caller holds a wrapped error. The server and `doctor`
ask here first, so an unusable home is one line naming the path and the fix, and the server can
answer every request with it instead of dying before `initialize`.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["home_problem"]

FIX = "set ASK_ANOTHER_HOME to a directory you can write to (or unset it for the default)"


def home_problem(home: Path) -> str | None:
    """None if `home` is (or can be made) a writable directory; otherwise what is wrong with it.

    May create `home` (as the store would). Blocking: a few system calls, run it off the loop
    where that matters.
    """
    existing = home
    while not existing.exists() and existing.parent != existing:
        existing = existing.parent
    if existing != home and not existing.is_dir():
        return _say(home, f"{existing} is a file, not a directory")
    if home.exists() and not home.is_dir():
        return _say(home, "it is a file, not a directory")
    try:
        home.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return _say(home, f"it cannot be created ({_reason(exc)})")
    try:
        with tempfile.TemporaryFile(dir=home):
            pass
    except OSError as exc:
        return _say(home, f"nothing can be written in it ({_reason(exc)})")
    return None


def _say(home: Path, what: str) -> str:
    return f"ASK_ANOTHER_HOME {home} is not usable: {what}; {FIX}."


def _reason(exc: OSError) -> str:
    return os.strerror(exc.errno).lower() if exc.errno else type(exc).__name__
