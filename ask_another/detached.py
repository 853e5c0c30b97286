"""Processes of a home that outlive the session that started them: the shared gateway worker
(gateway/_shared.py) and the job host (research/host.py, jobhost.py).

Each is started the same way, by whichever session needs it first and under that one's flock:
in a session of its own (`start_new_session`), so a client that ends its server by killing the
server's process group does not reach it; in the home, not in the directory of the client that
happened to start it; its stderr appended to a log in the home (0600); its stdout a pipe on
which it prints one line once it is ready, which the starter waits for. It is reaped in a daemon
thread if it exits while the starter still runs, so no zombie shows in a process listing.
"""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

__all__ = ["start_detached"]


def start_detached(argv: Sequence[str], *, home: Path, log_path: Path,
                   env: Mapping[str, str]) -> tuple[subprocess.Popen[bytes], bytes]:
    """Start `argv` detached (see the module docstring); return it and the first line it
    printed (b"" if it ended, or closed its stdout, before printing one). Blocking: run it in a
    thread."""
    log_file = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        process = subprocess.Popen(
            list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log_file,
            cwd=home, env=dict(env),
            start_new_session=True)  # not in the client's process group: it outlives us
    finally:
        os.close(log_file)
    assert process.stdout is not None
    line = process.stdout.readline()
    process.stdout.close()
    threading.Thread(target=process.wait, daemon=True).start()
    return process, line
