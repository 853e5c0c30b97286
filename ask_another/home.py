"""Whether the state directory (`ASK_ANOTHER_HOME`) can be used, in one line a person can act on.

The store would find out too, but only as a failed start of the supervision tree: by then the
supervisor has logged tracebacks and the caller holds a wrapped error. The server and `doctor`
ask here first, so an unusable home is one line naming the path and the fix, and the server can
answer every request with it instead of dying before `initialize`.

The home is private whatever the umask (`make_private`): created 0700, and an existing one this
user owns loses its group and other access at start, with a log line. Under the usual umask 022
it was 0755 and the store 0644, and another account on the machine copied the database and read
a prompt; under 000 the home was 0777.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from ask_another.logs import get_logger

__all__ = ["home_problem", "make_private", "not_private"]

log = get_logger("ask_another.home")

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
        make_private(home)
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


def make_private(home: Path) -> None:
    """Create `home` with mode 0700, or take group and other access away from an existing one
    (logged as `home.tightened`). A home this user does not own, or a shared directory (sticky,
    such as /tmp), is left as it is and logged as `home.shared`: tightening it would lock its
    other users out. Raises `OSError` when `home` cannot be created."""
    home.mkdir(mode=0o700, parents=True, exist_ok=True)  # the umask can only take bits away
    found = home.stat()
    mode = stat.S_IMODE(found.st_mode)
    if not mode & 0o077:
        return
    if found.st_uid != os.geteuid() or mode & stat.S_ISVTX:
        log.warning("home.shared", path=str(home), mode=f"{mode:04o}",
                    reason="another user owns it, or it is a shared directory: other accounts "
                           "may read the store; set ASK_ANOTHER_HOME to a directory of your own")
        return
    try:
        os.chmod(home, mode & ~0o077)
    except OSError as exc:
        log.warning("home.shared", path=str(home), mode=f"{mode:04o}", reason=_reason(exc))
        return
    log.warning("home.tightened", path=str(home), was=f"{mode:04o}", now=f"{mode & ~0o077:04o}",
                reason="other accounts on this machine could read the store")


def not_private(directory: Path) -> str | None:
    """Why another user could put a file of their own in `directory` (a socket, a pid file), or
    None (also when it does not exist yet). The shared gateway worker and the job host ask it
    of the home and of their own directory before trusting what they find there."""
    try:
        found = directory.stat()
    except FileNotFoundError:
        return None
    if found.st_uid != os.geteuid():
        return f"{directory} belongs to another user (uid {found.st_uid})"
    if found.st_mode & 0o022:
        return (f"{directory} can be written by other users (mode "
                f"{found.st_mode & 0o7777:04o})")
    return None
