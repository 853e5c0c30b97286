"""The running processes a test started, found by a marker in their environment.

A server started over stdio (and the gateway worker it starts, which inherits its environment) is
found by `KEY=VALUE` of its own, such as its ASK_ANOTHER_HOME: `/proc/PID/environ` holds it.
Linux only, as the tests that kill or count their servers are.
"""

from __future__ import annotations

import os
from pathlib import Path


def processes_with(marker: str) -> list[tuple[int, bytes]]:
    """(pid, command line) of every other process whose environment holds `marker`."""
    wanted = marker.encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:  # gone, or not ours to read
            continue
        if wanted in environ:
            found.append((int(entry.name), cmdline))
    return found
