"""The job host's files in a home, and how a face makes sure one runs (docs/architecture.md,
"Where a job lives").

One job host per home (`python -m ask_another.jobhost HOME`, jobhost.py) runs the jobs that the
per-session faces (the stdio server, the people commands, the console) leave when they end:
they take over nobody's jobs themselves (supervisor.py, `HandOff`), and call `ensure_host`
whenever they start, hold or find an unfinished job. Its files are in `jobs/` of the home (a
0700 directory, files 0600):

- `host.lock`: who starts a host is decided under an flock on it, and a host takes it before it
  leaves, so a session never counts on a host that is on its way out;
- `host.pid`: the host's pid, and an flock the host holds on it for its whole life, so "a host
  runs" is "someone holds that lock": true exactly while the host lives, whatever the system
  does with its pid after a kill -9 (the kernel drops the lock with the process);
- `host.log`: its stderr.

As with the shared gateway worker (gateway/_shared.py), whose start this shares (detached.py),
a home or `jobs/` another user could write in is refused (`HostUnavailable`): their process in
the host's place would get every job of the home, with its keys.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from ask_another.detached import start_detached
from ask_another.home import not_private
from ask_another.logs import get_logger

__all__ = ["HOST_DIRECTORY", "HOST_MODULE", "READY", "HostUnavailable", "ensure_host",
           "give_up_pid_file", "hold_pid_file", "host_lock", "pid_file_gone", "running_host",
           "stop_host"]

log = get_logger("ask_another.research")

HOST_DIRECTORY: Final = "jobs"
HOST_MODULE: Final = "ask_another.jobhost"
READY: Final = b"ready\n"  # what a started host prints on its stdout once it holds host.pid


class HostUnavailable(Exception):
    """No job host can run on this home (the reason is the message)."""


def _directory(home: Path) -> Path:
    return home.absolute() / HOST_DIRECTORY


def _private_directory(home: Path) -> Path:
    """`jobs/` of `home`, made 0700 if missing; raises `HostUnavailable` if another user could
    write in it or in the home."""
    directory = _directory(home)
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise HostUnavailable(f"{directory} cannot be made: {exc.strerror or exc}") from None
    problem = not_private(home.absolute()) or not_private(directory)
    if problem is not None:
        raise HostUnavailable(problem)
    return directory


def _open(path: Path) -> int:
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise HostUnavailable(f"{path} cannot be opened: {exc.strerror or exc}") from None


def host_lock(home: Path) -> int:
    """Take the start lock of `home`'s host (blocking: run it in a thread); close the returned
    descriptor to release it."""
    lock = _open(_private_directory(home) / "host.lock")
    fcntl.flock(lock, fcntl.LOCK_EX)
    return lock


def _held(pid_path: Path) -> bool:
    """Whether a live process holds the flock on `pid_path`."""
    try:
        fd = os.open(pid_path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # releases a lock we got
    return False


def running_host(home: Path) -> int | None:
    """The pid of `home`'s running job host, or None (for `doctor` too: nothing is started)."""
    pid_path = _directory(home) / "host.pid"
    try:
        found = pid_path.stat()
    except OSError:
        return None
    if found.st_uid != os.geteuid() or not _held(pid_path):
        return None  # another user's file is nobody's host for us
    try:
        return int(pid_path.read_text().strip() or 0) or None
    except (OSError, ValueError):
        return None  # a host writing its pid this instant: it has not said it is ready


def ensure_host(home: Path, environ: Mapping[str, str]) -> int:
    """The pid of `home`'s job host, started first (detached, with `environ` and the home made
    absolute) if none runs. Blocking: run it in a thread. Raises `HostUnavailable` where no host
    can run on `home`."""
    home = home.absolute()
    lock = host_lock(home)
    try:
        directory = _directory(home)
        if _held(directory / "host.pid"):
            return running_host(home) or 0  # (0: a host whose pid could not be read)
        process, line = start_detached(
            [sys.executable, "-m", HOST_MODULE, str(home)], home=home,
            log_path=directory / "host.log",
            env={**environ, "ASK_ANOTHER_HOME": str(home)})
        if line != READY:  # it ended before holding its pid file
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=5)
            raise HostUnavailable(f"the job host did not start (exit code {process.poll()}; "
                                  f"see {directory / 'host.log'})")
        log.info("research.host_started", pid=process.pid, home=str(home))
        return process.pid
    finally:
        os.close(lock)


def hold_pid_file(home: Path) -> int | None:
    """The host's side: hold `jobs/host.pid` for this process and write its pid there; the
    descriptor to keep open for the host's life, or None if another host holds it."""
    fd = _open(_private_directory(home) / "host.pid")
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    return fd


def give_up_pid_file(home: Path, fd: int) -> None:
    """The host's side, under `host_lock`: this host no longer runs, for whoever looks next."""
    pid_path = _directory(home) / "host.pid"
    with contextlib.suppress(OSError):
        if os.stat(pid_path).st_ino == os.fstat(fd).st_ino:
            pid_path.unlink()
    os.close(fd)


def pid_file_gone(home: Path, fd: int) -> bool:
    """Whether `fd` is no longer `home`'s pid file (the home was removed): the host leaves."""
    try:
        return os.stat(_directory(home) / "host.pid").st_ino != os.fstat(fd).st_ino
    except OSError:
        return True


def _is_host_of(pid: int, home: Path) -> bool:
    try:
        args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:  # no /proc: the held pid file is all we have
        return True
    return os.fsencode(HOST_MODULE) in args and os.fsencode(str(home.absolute())) in args


def stop_host(home: Path, wait: float = 10.0) -> tuple[int, bool] | None:
    """SIGTERM `home`'s job host, if one runs: its pid and whether it was gone within `wait`
    seconds (it hands its jobs back first), or None if none ran."""
    pid = running_host(home)
    if pid is None or not _is_host_of(pid, home):
        return None
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    pid_path = _directory(home) / "host.pid"
    deadline = time.monotonic() + wait
    while _held(pid_path) and time.monotonic() < deadline:
        time.sleep(0.05)
    return pid, not _held(pid_path)
