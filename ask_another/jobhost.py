"""The job host: `python -m ask_another.jobhost HOME`, the one process per home that runs the jobs
the per-session faces leave when they end (docs/architecture.md, "Where a job lives").

A per-session face (the stdio server, a people command, the console) starts it, detached, the
first time it starts, holds or finds an unfinished job (research/host.py, `ensure_host`: under
the flock of `jobs/host.lock`; its own session, in the home, its stderr to `jobs/host.log`).
It holds `jobs/host.pid` for its life, prints `ready` and opens the runtime with no MCP face:
the store, the home's shared gateway worker (litellm stays in one process per home: the host is
one more client of the worker; it never imports litellm itself) and the job supervisor, whose
`JobOwner` takes over the jobs a session handed back as it ended within a second (it sweeps at
every request poll) and those of a killed session once their lease expires. It answers
requests for its jobs (cancel, permission answers) through `research_requests`, as any owner.

It leaves by itself once the store has held no unfinished job for `ASK_ANOTHER_HOST_LINGER`
seconds (60): under the start lock, after looking once more, so a session that starts a job as
it leaves starts a new host rather than counting on this one. It leaves at once when its pid
file is gone (the home was removed). SIGTERM (`ask-another doctor --stop-workers`), SIGINT and
SIGHUP end it in order: its runtime closes and hands its jobs back, for the next host.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Final

import trio

from ask_another import tracing
from ask_another.config import Config
from ask_another.hosting import until_signalled
from ask_another.logs import get_logger
from ask_another.research.host import (
    READY,
    HostUnavailable,
    give_up_pid_file,
    hold_pid_file,
    host_lock,
    pid_file_gone,
)
from ask_another.runtime import Runtime, open_runtime
from ask_another.store.jobs import job_store

__all__ = ["main"]

log = get_logger("ask_another.jobhost")

LOOK_EVERY: Final = 0.5  # seconds between two looks at the store for unfinished jobs


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        sys.stderr.write("usage: python -m ask_another.jobhost HOME (started by the sessions "
                         "on HOME)\n")
        return 2
    home = Path(args[0]).absolute()
    try:
        pid_file = hold_pid_file(home)
    except HostUnavailable as exc:
        sys.stderr.write(f"ask-another job host: {exc}\n")
        return 1
    if pid_file is None:
        sys.stderr.write(f"ask-another job host: another one runs for {home}\n")
        return 1
    # Ready: the starter waits for this line under the start lock. stdout is nobody's after it.
    os.write(sys.stdout.fileno(), READY)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    config = Config.from_env({**os.environ, "ASK_ANOTHER_HOME": str(home)})
    tracing.configure()
    trio.run(_host, config, home, pid_file)
    return 0


async def _host(config: Config, home: Path, pid_file: int) -> None:
    async def run() -> None:
        async with open_runtime(config, prewarm_after=None, job_host=True) as runtime:
            log.info("jobhost.started", pid=os.getpid(), home=str(home),
                     linger=config.host_linger)
            await _linger(runtime, home, pid_file, config.host_linger)

    await until_signalled((signal.SIGTERM, signal.SIGINT, signal.SIGHUP), run)
    log.info("jobhost.stopped", pid=os.getpid())


async def _linger(runtime: Runtime, home: Path, pid_file: int, linger: float) -> None:
    """Return once the store has held no unfinished job for `linger` seconds (the pid file
    given up, under the start lock), or the pid file is gone."""
    store = job_store(await runtime.database())
    idle_since = trio.current_time()
    while True:
        await trio.sleep(LOOK_EVERY)
        if pid_file_gone(home, pid_file):
            log.info("jobhost.home_gone", home=str(home))
            return
        now = trio.current_time()
        if await store.unfinished():
            idle_since = now
            continue
        if now - idle_since < linger:
            continue
        lock = await trio.to_thread.run_sync(host_lock, home)
        try:
            if await store.unfinished():  # started just now, by a session that counts on us
                idle_since = now
                continue
            give_up_pid_file(home, pid_file)
            log.info("jobhost.idle", lingered=round(now - idle_since, 1))
            return
        finally:
            os.close(lock)


if __name__ == "__main__":
    sys.exit(main())
