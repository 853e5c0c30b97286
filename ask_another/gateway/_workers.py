"""The shared gateway workers of one home, as `ask-another doctor` lists and stops them.

Each worker's pid file (`gateway/<key>.pid` beside its socket) names it; its age and memory come
from /proc (Linux; elsewhere they are left out). Nothing here connects to a worker: a connection
would keep it from its idle exit. Stopping sends SIGTERM only to a process whose command line is
a shared worker's for that very socket, so a pid the system has since given to another program
is left alone.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from ask_another.gateway._process import WORKER_MODULE
from ask_another.gateway._shared import alive, running_workers

__all__ = ["WorkerInfo", "home_workers", "stop_workers"]


@dataclass(frozen=True, slots=True)
class WorkerInfo:
    pid: int
    socket_path: Path
    age_seconds: float | None  # None where /proc cannot say
    rss_bytes: int | None

    def describe(self, home: Path) -> str:
        """`pid 1234, gateway/ab12.sock, up 3 min, 212 MiB`."""
        parts = [f"pid {self.pid}", str(self.socket_path.relative_to(home))]
        if self.age_seconds is not None:
            parts.append(f"up {_duration(self.age_seconds)}")
        if self.rss_bytes is not None:
            parts.append(f"{self.rss_bytes / 2**20:.0f} MiB")
        return ", ".join(parts)


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _proc(pid: int, name: str) -> bytes | None:
    try:
        return Path(f"/proc/{pid}/{name}").read_bytes()
    except OSError:
        return None


def _age(pid: int) -> float | None:
    stat, uptime = _proc(pid, "stat"), Path("/proc/uptime")
    if stat is None or not uptime.is_file():
        return None
    # Field 22 (starttime, clock ticks after boot) comes after the command name's parentheses.
    started = int(stat.rsplit(b")", 1)[1].split()[19]) / os.sysconf("SC_CLK_TCK")
    return max(0.0, float(uptime.read_text().split()[0]) - started)


def _rss(pid: int) -> int | None:
    status = _proc(pid, "status")
    for line in (status or b"").splitlines():
        if line.startswith(b"VmRSS:"):
            return int(line.split()[1]) * 1024
    return None


def home_workers(home: Path) -> list[WorkerInfo]:
    """Every shared worker running for `home`, oldest first."""
    found = [WorkerInfo(pid, path, _age(pid), _rss(pid))
             for path, pid in running_workers(home).items()]
    return sorted(found, key=lambda w: -(w.age_seconds or 0.0))


def _is_worker_of(pid: int, socket_path: Path) -> bool:
    cmdline = _proc(pid, "cmdline")
    if cmdline is None:  # no /proc: the pid file and the live socket beside it are all we have
        return True
    args = cmdline.split(b"\0")
    return os.fsencode(WORKER_MODULE) in args and os.fsencode(str(socket_path)) in args


def stop_workers(home: Path, wait: float = 5.0) -> list[tuple[WorkerInfo, bool]]:
    """SIGTERM every shared worker of `home`; each with whether it was gone within `wait`
    seconds. Its sessions' calls in flight fail; their next call starts a new worker."""
    workers = [w for w in home_workers(home) if _is_worker_of(w.pid, w.socket_path)]
    for worker in workers:
        try:
            os.kill(worker.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + wait
    results = []
    for worker in workers:
        while alive(worker.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        results.append((worker, not alive(worker.pid)))
    return results

