"""The gateway worker's frames are bounded (issue 42): a frame header announcing more than
`MAX_FRAME` bytes ends the connection with one log line, instead of the worker buffering
whatever the header announced (a 2 GiB header: +530 MB while the rest came)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import trio
from pycache import PYCACHE
from stdio_server import REPO

from ask_another.gateway._wire import HEADER, MAX_FRAME

pytestmark = pytest.mark.slow  # the worker process


async def test_a_frame_header_over_the_bound_ends_the_workers_connection(tmp_path: Path):
    log = tmp_path / "worker.log"
    with log.open("w") as err:
        worker = await trio.lowlevel.open_process(
            [sys.executable, "-m", "ask_another.gateway._worker", "INFO"], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=err, cwd=REPO,
            env={"PYTHONPYCACHEPREFIX": str(PYCACHE), "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    assert worker.stdin is not None and worker.stdout is not None
    try:
        with trio.fail_after(120):
            ready = b""
            while len(ready) < HEADER or len(ready) < HEADER + int.from_bytes(ready[:HEADER],
                                                                               "big"):
                chunk = await worker.stdout.receive_some(4096)
                assert chunk, log.read_text()
                ready += chunk
            # 2 GiB announced, then data as fast as the pipe takes it: before, the worker read
            # it all into one buffer, waiting for the rest.
            await worker.stdin.send_all((2 << 30).to_bytes(HEADER, "big"))
            with trio.move_on_after(60):
                try:
                    while True:
                        await worker.stdin.send_all(b"\0" * (1 << 20))
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    pass  # the worker closed its end
            await worker.wait()
    finally:
        if worker.returncode is None:
            worker.kill()
            await worker.wait()
    assert 2 << 30 > MAX_FRAME
    assert "gateway.frame_too_large" in log.read_text(), log.read_text()[-2000:]
