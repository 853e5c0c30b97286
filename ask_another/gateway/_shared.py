"""The shared-worker transport: every server on one ASK_ANOTHER_HOME whose environment litellm
would see the same uses one gateway worker, so four client sessions pay one litellm, not four.
It is the default for the stdio server and the people commands (runtime.py).

The worker (`python -m ask_another.gateway._worker LEVEL --shared SOCKET IDLE`) listens on
`gateway/<key>.sock` in the home (mode 0600, in a 0700 directory) and speaks the frames of
_wire.py on each connection, as the private worker does on its stdin and stdout. A server
connects once (its `Hello` carries its secrets, so the worker masks them in its logs) and sends
its calls and cancels; they are its own, and its connection closing cancels them.

The key (`worker_key`) is a digest of what the worker would otherwise take from the first server
that started it: this code and litellm's version, the Python running it, the log level and idle
time, and the environment, less the variables that only tell client sessions apart (`PWD`, a
terminal's session id, ...) and those that only say how the program was launched (`PATH`,
`VIRTUAL_ENV`, uv's; the Python by its version, not its path), so a clone's `uv run`, `uvx
--from` and `uv tool install` of the same code share one. So a server never sends its calls to a
worker that would see other proxies, certificates or provider settings: it gets a worker of its
own kind. The worker runs in
the home, not in the directory of the server that started it.

Who starts the worker is decided under an flock on `<key>.lock`: a server takes it, tries to
connect, and only if nobody listens removes the stale socket file and starts a worker, detached
(its own session; its stderr goes to `gateway/gateway.log`), which outlives the server that
started it. The worker exits `SHARED_LINGER` (2 minutes, or ASK_ANOTHER_GATEWAY_IDLE if that is
shorter) after its last connection closed, taking the same lock to
remove its socket, so no server connects to a worker that is leaving; one whose connection the
kernel took just before that gets it closed before the worker's `Ready`, and connects again
(nothing was sent on it). It also exits, once nobody is connected, when its socket file is gone
(the home was removed).

Where a socket cannot be used (the home's path is too long for one, the file system refuses it,
the worker does not start or never gets ready), or could be another user's (the home or
`gateway/` is not this user's, or others may write in it; the socket's listener, by
`SO_PEERCRED`, is another user), the server falls back to a private worker and says so once in
its log. The worker, in turn, closes a connection from another user before reading anything.

Everything else is `ProcessTransport`'s: the connection is warm at `warm()` and closed after the
idle time without a call. A connection that drops (the worker was killed) fails the calls in
flight with `WorkerStopped`, but the gateway does not crash: the worker is not this server's, and
the next call connects again (starting a new worker if none listens).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from importlib import metadata
from pathlib import Path

import trio

from ask_another.detached import start_detached
from ask_another.gateway._process import WORKER_MODULE, ProcessTransport, WorkerStopped, _Worker
from ask_another.gateway._wire import (
    HEADER,
    FrameTooLarge,
    Hello,
    Ready,
    frame,
    frame_size,
    peer_uid,
)
from ask_another.home import not_private
from ask_another.logs import get_logger

log = get_logger("ask_another.gateway")

SHARED_DIRECTORY = "gateway"  # in the home: each worker's socket, lock and pid file; their log
LISTENING = b"listening\n"  # what a started worker prints on its stdout once it listens
# In gateway/: the seconds the last shared worker of the home took from its start to its Ready
# (its litellm import), written by the worker (_worker.LAST_START_FILE).
LAST_START_FILE = "last-start"
CONNECT_ATTEMPTS = 3  # a worker leaving as we connect closes the connection before its Ready

# Variables that tell client sessions apart without changing what a provider call does: the
# shell's, a terminal's (each GNOME Terminal tab has its own screen), a login's (each SSH login
# its own connection and agent socket), a prompt's (starship's key per shell), an editor's or a
# client's own per-session ones. Every other variable is part of the worker's key
# (`worker_key`): one missing here silently gives each such session a worker of its own.
SESSION_VARIABLES = frozenset({
    "PWD", "OLDPWD", "SHLVL", "_", "PS1", "COLUMNS", "LINES", "TERM", "COLORTERM",
    "TERM_PROGRAM", "TERM_PROGRAM_VERSION", "TERM_SESSION_ID", "ITERM_SESSION_ID", "WINDOWID",
    "TMUX", "TMUX_PANE", "STY", "WINDOW", "SSH_TTY", "GPG_TTY", "WT_SESSION",
    "SECURITYSESSIONID", "PYTHONPYCACHEPREFIX", "SSH_CLIENT", "SSH_CONNECTION", "SSH_AUTH_SOCK",
    "XDG_SESSION_ID", "XDG_VTNR", "GNOME_TERMINAL_SCREEN", "TERMINATOR_UUID",
    "STARSHIP_SESSION_KEY", "P9K_TTY", "_P9K_TTY", "_P9K_SSH_TTY",
})
SESSION_PREFIXES = ("CLAUDE_CODE_", "VSCODE_", "GHOSTTY_", "WEZTERM_", "KONSOLE_", "ALACRITTY_",
                    "KITTY_", "ZELLIJ_")
# Variables that say how the program was launched (a clone's `uv run`, `uvx --from`, `uv tool
# install`, through a pyenv shim): each sets its own virtualenv, PATH and uv's or pyenv's
# bookkeeping (a shim sets PYENV_VERSION, PYENV_DIR, PYENV_HOOK_PATH, ...). A worker of the same
# code, litellm and Python serves them alike, so they share it: each got a 220 MiB worker.
LAUNCH_VARIABLES = frozenset({"PATH", "VIRTUAL_ENV", "VIRTUAL_ENV_PROMPT", "UV"})
LAUNCH_PREFIXES = ("UV_", "PYENV_")
_LEFT_OUT = SESSION_VARIABLES | LAUNCH_VARIABLES
# How long a worker stays once its last server has let go of it (at most ASK_ANOTHER_GATEWAY_IDLE):
# long enough for the next command a person types, short enough that finished sessions leave no
# 220 MiB process behind for a quarter of an hour.
SHARED_LINGER = 120.0
# Our own settings: the server reads them and sends what a call needs with the call (its key, its
# API base); the worker reads none of them, so sessions with other models share it.
OUR_PREFIXES = ("MODEL_", "SEARCH_", "ASK_ANOTHER_")

# The files the worker runs (besides litellm): a server of other code gets a worker of its own.
_WORKER_SOURCES = ("gateway/_worker.py", "gateway/_litellm.py", "gateway/_wire.py",
                   "gateway/_results.py", "errors.py", "logs.py")


class Unshareable(Exception):
    """A shared worker cannot be used here (the reason is the message): use a private one."""


def _sources_digest() -> bytes:
    package = Path(__file__).resolve().parent.parent
    digest = hashlib.sha256()
    for name in _WORKER_SOURCES:
        with contextlib.suppress(OSError):
            digest.update((package / name).read_bytes())
    return digest.digest()


def _litellm_version() -> str:
    try:
        return metadata.version("litellm")
    except metadata.PackageNotFoundError:
        return "none"


def worker_key(environ: Mapping[str, str], log_level: str, idle: float) -> str:
    """Which shared worker a server with `environ` may use: servers with the same key see the
    same worker code, litellm, Python, settings and environment (less the variables that tell
    sessions apart and our own, which the worker does not read)."""
    digest = hashlib.sha256(_sources_digest())
    # The Python's version, not its path: each way of launching runs another virtualenv's.
    for part in (_litellm_version(), sys.version, log_level, repr(idle)):
        digest.update(part.encode() + b"\0")
    for name in sorted(environ):
        if name in _LEFT_OUT or name.startswith(SESSION_PREFIXES + OUR_PREFIXES + LAUNCH_PREFIXES):
            continue
        digest.update(os.fsencode(name) + b"=" + os.fsencode(environ[name]) + b"\0")
    return digest.hexdigest()[:16]


# Our variables that hold keys or passwords: the worker never reads them (each call brings its key),
# and it outlives the session that started it and serves others.
_SECRET_SETTINGS = ("MODEL_", "SEARCH_", "ASK_ANOTHER_DATABASE_URL")


def worker_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The environment a shared worker starts with: this server's, less our settings that hold
    keys or passwords."""
    return {name: value for name, value in environ.items()
            if not name.startswith(_SECRET_SETTINGS)}


def lock_path(socket_path: Path) -> Path:
    return socket_path.with_suffix(".lock")


def _connect(path: Path) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(str(path))
        # Before anything is sent: the Hello carries this server's keys.
        uid = peer_uid(sock)
        if uid is not None and uid != os.geteuid():
            raise Unshareable(f"the shared gateway worker's socket {path} is another user's "
                              f"(uid {uid}); nothing was sent to it")
    except BaseException:
        sock.close()
        raise
    return sock


def _start_worker(path: Path, log_level: str, idle: float) -> None:
    """Start a detached worker listening on `path`, in the home; return once it listens."""
    process, line = start_detached(
        [sys.executable, "-m", WORKER_MODULE, log_level, "--shared", str(path), repr(idle)],
        home=path.parent.parent, log_path=path.with_name("gateway.log"),
        env=worker_environment(os.environ))
    if line != LISTENING:  # it ended (or closed its stdout) before listening
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=5)
        raise Unshareable(f"the shared gateway worker did not start (exit code "
                          f"{process.poll()}; see {path.with_name('gateway.log')})")
    log.info("gateway.shared_worker_started", pid=process.pid, socket=str(path))


def socket_problem(path: Path) -> str | None:
    """Why no worker can listen on `path`, where that is known without trying (for `ask-another
    doctor` too, which must not say the sessions share a worker when each falls back)."""
    if len(os.fsencode(path)) >= 104:  # sun_path is 104-108 bytes
        return f"the home's path is too long for a unix socket ({path})"
    if path.parent.exists() and not path.parent.is_dir():
        return f"{path.parent} is not a directory"
    # Another user who can write in the home or gateway/ could listen in the worker's place:
    # the next session would send them its keys and prompt, and show their answer.
    return not_private(path.parent.parent) or not_private(path.parent)


def connect_or_start(path: Path, log_level: str, idle: float,
                     starting: Callable[[], None] = lambda: None) -> socket.socket | None:
    """A connection to the worker listening on `path`, started first if none does (`starting`
    called before it is); None if the worker this call started was gone again before it could
    connect (killed as it began, as by the OOM killer: the caller's next attempt starts another).
    Blocking: run it in a thread. Raises `Unshareable` where no worker can listen on `path`."""
    problem = socket_problem(path)
    if problem is not None:
        raise Unshareable(problem)
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        problem = not_private(path.parent)  # made by another user first, say
        if problem is not None:
            raise Unshareable(problem)
        lock = os.open(lock_path(path), os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise Unshareable(f"{path.parent} is not usable: {exc.strerror or exc}") from None
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            return _connect(path)
        except (FileNotFoundError, ConnectionRefusedError):
            pass  # no worker listens: under the lock, nobody else is starting one
        with contextlib.suppress(FileNotFoundError):
            path.unlink()  # a dead worker's socket
        starting()
        _start_worker(path, log_level, idle)
        try:
            return _connect(path)
        except (FileNotFoundError, ConnectionRefusedError):
            return None  # it said it listens, then died: the same as closing before its Ready
        except OSError as exc:
            raise Unshareable(f"the shared gateway worker's socket refuses connections: "
                              f"{exc.strerror or exc}") from None
    finally:
        os.close(lock)  # releases the flock


async def _first_frame(stream: trio.SocketStream) -> bytes | None:
    """The body of the first frame on `stream`, or None if it closes first."""
    data = bytearray()
    needed = HEADER
    while len(data) < needed:
        try:
            chunk = await stream.receive_some(needed - len(data))
        except trio.BrokenResourceError:
            return None
        if not chunk:
            return None
        data += chunk
        if len(data) == HEADER:
            try:
                needed = HEADER + frame_size(bytes(data))
            except FrameTooLarge as exc:
                log.error("gateway.frame_too_large", error=str(exc))
                return None
    return bytes(data[HEADER:])


async def _connect_in_thread(transport: SharedTransport, log_level: str) -> socket.socket | None:
    """`connect_or_start` in a thread that a cancel abandons (the flock and a worker's start
    cannot be interrupted). A socket the abandoned thread connects after all is closed there,
    not left to the garbage collector (a ResourceWarning, and a connection the worker holds
    open until then)."""
    lock = threading.Lock()
    abandoned = False
    connected: list[socket.socket] = []

    def attempt() -> socket.socket | None:
        sock = connect_or_start(transport.socket_path, log_level, transport.worker_idle,
                                transport.started_worker)
        with lock:
            if sock is not None and abandoned:
                sock.close()
                return None
            if sock is not None:
                connected.append(sock)
        return sock

    try:
        return await trio.to_thread.run_sync(attempt, abandon_on_cancel=True)
    except trio.Cancelled:
        with lock:
            abandoned = True
            for sock in connected:  # returned just as the cancel came: trio drops the result
                sock.close()
        raise


class _Connection(_Worker):
    """This server's connection to the shared worker and the calls in flight on it; or, where
    that cannot be, a private worker (the transport's `fallback`)."""

    def __init__(self, transport: SharedTransport) -> None:
        super().__init__(transport._secrets, transport._log_level)
        self._transport = transport
        self._stream: trio.SocketStream | None = None
        # Cancelled by a close before the worker's Ready: nothing but the Hello was sent, so the
        # connection is dropped at once (Ctrl-C on a session whose worker imports litellm
        # waited for the import, seconds on a busy machine); the worker starts on for the next.
        self._opening = trio.CancelScope()

    async def _open(self) -> None:
        with self._opening:
            await self._connect()

    async def close_stdin(self) -> None:
        if self._stream is None and self.process is None:
            self._opening.cancel()  # not connected yet
        await super().close_stdin()

    async def _connect(self) -> None:
        transport = self._transport
        transport._started_worker = False  # until this connection's thread starts one
        for _ in range(CONNECT_ATTEMPTS):
            try:
                sock = await _connect_in_thread(transport, self._log_level)
            except (Unshareable, OSError) as exc:
                # Any other refusal too (a read-only gateway/ directory holding a dead worker's
                # socket, a directory where the socket goes): raising here would crash the
                # gateway at every restart, and the supervisor would end the server.
                reason = str(exc) if isinstance(exc, Unshareable) else (
                    f"the shared gateway worker could not be reached: {exc.strerror or exc}")
                transport.fall_back(reason)
                await super()._open()  # this server's own worker
                return
            if sock is None:  # the worker it started died at once; nothing was sent to it
                continue
            stream = trio.SocketStream(trio.socket.from_stdlib_socket(sock))
            try:
                with contextlib.suppress(trio.BrokenResourceError):
                    await stream.send_all(frame(self._encoder, Hello(self._secrets)))
                body = await _first_frame(stream)
            except trio.Cancelled:
                with trio.CancelScope(shield=True):
                    await stream.aclose()
                raise
            if body is None:  # it was leaving (idle) as we connected; nothing was sent to it
                await stream.aclose()
                continue
            self._stream = stream
            self._input = self._output = stream
            self.replaceable = True  # not this server's worker: its end is not our crash
            ready = self._decoder.decode(body)
            if not isinstance(ready, Ready):
                raise WorkerStopped("the shared gateway worker spoke out of turn")
            self._dispatch(ready)
            if self.stopped:
                # Closed while we waited for the Ready (a session ended as the worker imported
                # litellm): nothing could be sent then, so say it now, or the worker would keep
                # this connection, and the close wait, until the idle time.
                await self.close_stdin()
            return
        # Started and gone again before its Ready each time (killed, out of memory as it
        # imports litellm): raising would crash the gateway at every restart, and the supervisor
        # would end the server.
        self._transport.fall_back(f"the shared gateway worker closed {CONNECT_ATTEMPTS} "
                                  "connections in a row before it was ready")
        await super()._open()

    async def _end_output(self, output: trio.abc.SendStream) -> None:
        if self._stream is None:  # a private worker: close its stdin
            await super()._end_output(output)
            return
        await self._stream.send_eof()  # the worker cancels our calls and hangs up

    async def _closed(self) -> int | None:
        if self._stream is None:
            return await super()._closed()
        await self._stream.aclose()
        return None


class SharedTransport(ProcessTransport):
    """litellm in the one worker shared by every server on `home` whose environment (`environ`,
    this process's by default) has the same `worker_key`; started by whichever server needs it
    first. The connection closes after `idle_exit` seconds without a call, the worker after
    `SHARED_LINGER` (or `idle_exit`, if shorter) with no connection."""

    def __init__(self, home: Path, secrets: Sequence[str] = (), *, log_level: str = "WARNING",
                 idle_exit: float, environ: Mapping[str, str] | None = None) -> None:
        super().__init__(secrets, log_level=log_level, idle_exit=idle_exit)
        key = worker_key(os.environ if environ is None else environ, log_level, idle_exit)
        # Absolute: the worker runs in the home, where a relative path would mean another place.
        self.socket_path = home.absolute() / SHARED_DIRECTORY / f"{key}.sock"
        self.worker_idle = min(idle_exit, SHARED_LINGER)
        self.fallback: str | None = None  # why this server runs a private worker instead
        # This server started the shared worker (its first connection finds none running).
        self._started_worker = False

    def started_worker(self) -> None:
        """Called by the connecting thread as it starts the worker (a plain flag: no lock)."""
        self._started_worker = True

    def _starting(self, worker: _Worker | None) -> bool:
        return self.fallback is not None or self._started_worker

    def fall_back(self, reason: str) -> None:
        if self.fallback is None:
            log.warning("gateway.shared_unavailable", reason=reason,
                        using="a private gateway worker")
        self.fallback = reason

    def _new_worker(self) -> _Worker:
        if self.fallback is not None:
            return _Worker(self._secrets, self._log_level)
        return _Connection(self)


def running_workers(home: Path) -> dict[Path, int]:
    """The shared workers running for `home`, by socket path, from their pid files (for
    `ask-another doctor`: connecting would keep a worker from its idle exit)."""
    running = {}
    for pid_file in sorted((home / SHARED_DIRECTORY).glob("*.pid")):
        try:
            pid = int(pid_file.read_text())
        except (OSError, ValueError):
            continue
        if not alive(pid):
            continue
        socket_path = pid_file.with_suffix(".sock")
        if socket_path.exists():
            running[socket_path] = pid
    return running


def alive(pid: int) -> bool:
    """Whether process `pid` runs. A zombie (exited, its parent has not reaped it yet) does not:
    `doctor --stop-workers` said "stopped: worker pid N", then listed pid N as running."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:  # no /proc (or gone meanwhile): kill() said it was there
        return True
    return stat.rsplit(b")", 1)[1].split()[0] != b"Z"


def last_start_seconds(home: Path) -> float | None:
    """How long the last shared worker started on `home` took to get ready (None: none has yet,
    here), as measured by that worker on this machine."""
    try:
        return float((home / SHARED_DIRECTORY / LAST_START_FILE).read_text())
    except (OSError, ValueError):
        return None
