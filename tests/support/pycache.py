"""Where the test run's Python processes keep their bytecode.

The sandbox (and CI) sets PYTHONDONTWRITEBYTECODE, and a fresh clone's .venv holds no bytecode
(uv compiles none by default): every process would compile litellm, the MCP SDK and the rest
from source at each start (seconds of CPU apiece). The servers the tests start get this directory
as PYTHONPYCACHEPREFIX, and tests/conftest.py points the test processes themselves at it, so
each module is compiled once per machine, without writing __pycache__ into the source tree or
the venv. It is this user's own (0700): bytecode another user could write would run here.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path


def _own_directory() -> Path:
    """The user's cache, or a fresh one where that path is not a 0700 directory of theirs."""
    path = Path(tempfile.gettempdir()) / f"ask-another-test-pycache-{os.getuid()}"
    try:
        path.mkdir(mode=0o700, exist_ok=True)
        found = path.lstat()
    except OSError:
        found = None
    if (found is not None and stat.S_ISDIR(found.st_mode) and found.st_uid == os.getuid()
            and not found.st_mode & 0o077):
        return path
    return Path(tempfile.mkdtemp(prefix="ask-another-test-pycache-"))


PYCACHE = _own_directory()
