"""A client that closes its end of the server's stdout ends the session quietly."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pycache import PYCACHE
from stdio_server import REPO

pytestmark = pytest.mark.slow  # starts real server processes


def test_a_closed_stdout_ends_the_server_without_a_traceback(tmp_path: Path):
    read_end, write_end = os.pipe()
    os.close(read_end)  # nobody will ever read what the server writes
    env = {**os.environ, "PYTHONPYCACHEPREFIX": str(PYCACHE),
           "ASK_ANOTHER_HOME": str(tmp_path), "MODEL_SIM": "openai/m1;k;http://127.0.0.1:9/v1"}
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "test", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}},
    ]
    stdin = "".join(json.dumps(m) + "\n" for m in messages)
    try:
        done = subprocess.run([sys.executable, "-m", "ask_another"], cwd=REPO, env=env,
                              input=stdin.encode(), stdout=write_end, stderr=subprocess.PIPE,
                              timeout=60, check=False)
    finally:
        os.close(write_end)
    stderr = done.stderr.decode()
    assert "server.client_gone" in stderr  # the broken pipe really happened
    assert "Traceback" not in stderr and "Exception ignored" not in stderr, stderr[-2000:]
    assert done.returncode == 0
