"""Where a running console of this home is, so the texts that show a pending request can link it.

`serve --http` knows its own console (beside the MCP endpoint). A stdio session or `ask-another
research` on the same home does not: `ask-another console` says where it listens by writing its
root URL and its pid to `console.url` in the home (0600) while it runs, and removes it when it
stops, or gives it back to a console that was running before it and still runs
(`publish_console`). `running_console(home)` reads it back, and trusts it only while that
process is alive, so a console killed without its cleanup leaves no dead link behind.

The file carries no secret: an approval link opens the console's login page first (a one-time
link or a token), and works only for the user the job belongs to.

Kept apart from `ask_another.console` (Starlette, Jinja2): the stdio server reads this file on
each `check_research` and must not import the web app to do so.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path

__all__ = ["FILE_NAME", "approval_url", "publish_console", "running_console"]

FILE_NAME = "console.url"


def approval_url(console_root: str, job_id: str, tool_call_id: str) -> str:
    """The approval page of one pending request, under the console's root (``.../console``)."""
    return f"{console_root}/approvals/{job_id}/{tool_call_id}"


@contextlib.contextmanager
def publish_console(home: Path, console_root: str) -> Iterator[None]:
    """`console.url` says `console_root` for the duration of the block; then it is removed
    (unless another console has written its own since)."""
    path = home / FILE_NAME
    # A console already running on the home: it gets its link back when this one stops (two
    # `ask-another console` at once: the second's exit removed the file while the first ran).
    before = _read(path)
    _write(path, console_root, os.getpid())
    try:
        yield
    finally:
        if _read(path) == (console_root, os.getpid()):
            if before is not None and before[1] != os.getpid() and _alive(before[1]):
                _write(path, *before)
            else:
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()


def _write(path: Path, console_root: str, pid: int) -> None:
    temporary = path.with_name(f".{FILE_NAME}.{os.getpid()}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        json.dump({"url": console_root, "pid": pid}, out)
    os.replace(temporary, path)  # never a half-written file for a reader


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another account's
        pass
    return True


def running_console(home: Path) -> str | None:
    """The root URL of the console running on `home`, or None (none, or its process is gone).
    Blocking: a stat, a small read and a signal-0 probe."""
    found = _read(home / FILE_NAME)
    if found is None:
        return None
    url, pid = found
    return url if _alive(pid) else None


def _read(path: Path) -> tuple[str, int] | None:
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(value, dict):
        return None
    url, pid = value.get("url"), value.get("pid")
    if not isinstance(url, str) or type(pid) is not int or pid <= 0:
        return None
    return url, pid
