"""`python -m ask_another.simulator` as a person runs it from Quick start: started, stopped with
Ctrl-C, and started on a port that is taken."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from deadlines import generous
from pycache import PYCACHE

pytestmark = pytest.mark.slow  # starts the simulator's process

REPO = Path(__file__).resolve().parents[3]


def start(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "ask_another.simulator", *args], cwd=REPO, text=True,
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPYCACHEPREFIX": str(PYCACHE)}, start_new_session=True)


def test_ctrl_c_stops_the_simulator_without_a_traceback():
    child = start("--port", "0")
    try:
        assert child.stderr is not None
        listening = json.loads(child.stderr.readline())
        assert listening["event"] == "simulator.listening"
        # Serving: it answers (any answer, even a 404, says uvicorn runs).
        with contextlib.suppress(urllib.error.HTTPError):
            urllib.request.urlopen(listening["url"], timeout=generous(30)).close()
        # Ctrl-C at a terminal: SIGINT to the foreground process group.
        os.killpg(child.pid, signal.SIGINT)
        out, rest = child.communicate(timeout=generous(30))
    finally:
        child.kill()
        child.wait()
    assert "Traceback" not in rest and "KeyboardInterrupt" not in rest, rest
    assert child.returncode == 130, rest
    assert [json.loads(line)["event"] for line in rest.splitlines()] == ["simulator.stopped"]
    assert out == ""


def test_a_port_in_use_says_to_use_another_with_port():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        child = start("--port", str(port))
        out, err = child.communicate(timeout=generous(30))
    assert child.returncode == 2
    assert err.strip() == (f"python -m ask_another.simulator: port {port} on 127.0.0.1 is in use "
                           "(Address already in use): use --port N for another port, or --port 0 "
                           "for any free one")
    assert out == ""
