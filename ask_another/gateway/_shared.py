"""The shared-worker transport (experimental, `ASK_ANOTHER_GATEWAY_SHARED=1`): every server on
one ASK_ANOTHER_HOME uses one gateway worker, so four client sessions pay one litellm, not four.

The worker (`python -m ask_another.gateway._worker LEVEL --shared SOCKET IDLE`) listens on
`gateway.sock` in the home (mode 0600) and speaks the frames of _wire.py on each connection, as
the private worker does on its stdin and stdout. A server connects once (its `Hello` carries its
secrets, so the worker masks them in its logs) and sends its calls and cancels; they are its own,
and its connection closing cancels them.

Who starts the worker is decided under an flock on `gateway.sock.lock`: a server takes it, tries
to connect, and only if nobody listens removes the stale socket file and starts a worker, detached
(its own session; its stderr goes to `gateway.log` in the home), which outlives the server that
started it. The worker exits after its idle time with no connection, taking the same lock to
remove its socket, so a server never connects to a worker that is leaving.

Everything else is `ProcessTransport`'s: the connection is warm at `warm()`, closed after the idle
time without a call, and a connection that drops (the worker was killed) fails the calls in flight
with `WorkerStopped`, and the supervisor starts a new gateway, which connects again (starting a
new worker if none listens).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

import trio

from ask_another.errors import ProviderUnavailable
from ask_another.gateway._process import WORKER_MODULE, ProcessTransport, WorkerStopped, _Worker
from ask_another.gateway._wire import Hello, frame
from ask_another.logs import get_logger

log = get_logger("ask_another.gateway")

SOCKET_NAME = "gateway.sock"
LISTENING = b"listening\n"  # what a started worker prints on its stdout once it listens


def lock_path(socket_path: Path) -> Path:
    return socket_path.with_name(socket_path.name + ".lock")


def _connect(path: Path) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(str(path))
    except BaseException:
        sock.close()
        raise
    return sock


def _start_worker(path: Path, log_level: str, idle: float) -> None:
    """Start a detached worker listening on `path`; return once it listens."""
    log_file = os.open(path.with_name("gateway.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND,
                       0o600)
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", WORKER_MODULE, log_level, "--shared", str(path), repr(idle)],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log_file,
            start_new_session=True)  # not in the client's process group: it outlives us
    finally:
        os.close(log_file)
    assert process.stdout is not None
    line = process.stdout.readline()
    process.stdout.close()
    # Reaped here if it exits while this server runs (no zombie in a process listing).
    threading.Thread(target=process.wait, daemon=True).start()
    if line != LISTENING:
        raise ProviderUnavailable(f"the shared gateway worker did not start (exit code "
                                  f"{process.poll()}; see {path.with_name('gateway.log')})")
    log.info("gateway.shared_worker_started", pid=process.pid, socket=str(path))


def connect_or_start(path: Path, log_level: str, idle: float) -> socket.socket:
    """A connection to the worker listening on `path`, started first if none does. Blocking:
    run it in a thread."""
    if len(os.fsencode(path)) >= 104:  # sun_path is 104-108 bytes
        raise ProviderUnavailable(f"the shared gateway's socket path is too long: {path}")
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    lock = os.open(lock_path(path), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            return _connect(path)
        except (FileNotFoundError, ConnectionRefusedError):
            pass  # no worker listens: under the lock, nobody else is starting one
        with contextlib.suppress(FileNotFoundError):
            path.unlink()  # a dead worker's socket
        _start_worker(path, log_level, idle)
        return _connect(path)
    finally:
        os.close(lock)  # releases the flock


class _Connection(_Worker):
    """This server's connection to the shared worker and the calls in flight on it."""

    def __init__(self, secrets: list[str], log_level: str, path: Path, idle: float) -> None:
        super().__init__(secrets, log_level)
        self._path = path
        self._idle = idle
        self._stream: trio.SocketStream | None = None

    async def _open(self) -> None:
        try:
            sock = await trio.to_thread.run_sync(connect_or_start, self._path, self._log_level,
                                                 self._idle, abandon_on_cancel=True)
        except OSError as exc:
            raise WorkerStopped(f"the shared gateway worker could not be reached: "
                                f"{exc.strerror or exc}") from None
        self._stream = stream = trio.SocketStream(trio.socket.from_stdlib_socket(sock))
        self._input = self._output = stream
        await stream.send_all(frame(self._encoder, Hello(self._secrets)))

    async def _end_output(self, output: trio.abc.SendStream) -> None:
        assert self._stream is not None
        await self._stream.send_eof()  # the worker cancels our calls and hangs up

    async def _closed(self) -> int | None:
        if self._stream is not None:
            await self._stream.aclose()
        return None


class SharedTransport(ProcessTransport):
    """litellm in the one worker shared by every server on `home` (`gateway.sock`), started by
    whichever server needs it first; the connection closes after `idle_exit` seconds without a
    call, the worker after as long with no connection."""

    def __init__(self, home: Path, secrets: Sequence[str] = (), *, log_level: str = "WARNING",
                 idle_exit: float) -> None:
        super().__init__(secrets, log_level=log_level, idle_exit=idle_exit)
        self._path = home / SOCKET_NAME
        self._worker_idle = idle_exit

    def _new_worker(self) -> _Worker:
        return _Connection(self._secrets, self._log_level, self._path, self._worker_idle)
