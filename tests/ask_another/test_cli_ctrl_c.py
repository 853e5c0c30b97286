"""Ctrl-C at a terminal, as a person presses it: the commands stop at once, without a traceback.

Each command runs in a session of its own whose controlling terminal is a real pty; writing
Ctrl-C (\\x03) to the pty's controller makes the terminal's line discipline send SIGINT to the
foreground process group, exactly as a terminal emulator does.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import select
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest
from deadlines import generous
from pycache import PYCACHE

pytestmark = pytest.mark.slow  # starts real CLI processes

REPO = Path(__file__).resolve().parents[2]


INITIALIZE = json.dumps({
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {},
               "clientInfo": {"name": "a-terminal", "version": "0"}}}).encode()


def _take_the_terminal() -> None:
    # Run in the child after setsid (start_new_session): the pty on fd 0 becomes its controlling
    # terminal, so the terminal's Ctrl-C reaches its process group.
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def read_until(controller: int, wanted: bytes, limit: float) -> bytes:
    """What the terminal shows until `wanted` appears (or `limit` seconds pass, or it closes)."""
    seen = b""
    deadline = time.monotonic() + limit
    while wanted not in seen and (left := deadline - time.monotonic()) > 0:
        if not select.select([controller], [], [], left)[0]:
            break
        try:
            chunk = os.read(controller, 4096)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        seen += chunk
    return seen


def test_ctrl_c_stops_the_stdio_server_served_by_hand(tmp_path: Path):
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("MODEL_", "ASK_ANOTHER_"))}
    controller, terminal = pty.openpty()
    child = subprocess.Popen(
        [sys.executable, "-m", "ask_another"], cwd=REPO, stdin=terminal, stdout=terminal,
        stderr=terminal, start_new_session=True, preexec_fn=_take_the_terminal,
        env={**clean, "PYTHONPYCACHEPREFIX": str(PYCACHE), "ASK_ANOTHER_HOME": str(tmp_path)})
    os.close(terminal)
    try:
        shown = read_until(controller, b"Ctrl-C ends it", generous(60))
        assert b"Ctrl-C ends it" in shown, shown
        # Serving, and reading the terminal: it answers a request typed there.
        os.write(controller, INITIALIZE + b"\n")
        shown += read_until(controller, b"serverInfo", generous(60))
        assert b"serverInfo" in shown, shown
        os.write(controller, b"\x03")  # Ctrl-C, as typed
        # The terminal must keep being read, or a full pty buffer would block the child.
        shown += read_until(controller, b"\0never", generous(10))
        returncode = child.wait(timeout=1)
    except subprocess.TimeoutExpired:
        pytest.fail(f"still running {generous(10):.0f} s after Ctrl-C; the terminal showed "
                    f"{shown!r}")
    finally:
        child.kill()
        child.wait()
        os.close(controller)
    assert returncode == 130
    assert b"Traceback" not in shown
