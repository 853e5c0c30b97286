"""A real PostgreSQL server for the tests, started from the binaries on the machine.

`PostgresServer.start()` runs `initdb` into a fresh temporary directory and starts `postgres` on
a free loopback port (and a private unix-socket directory), with durability switched off (fsync,
synchronous_commit, full_page_writes: a test server loses nothing it needs on a crash) so that
it starts in a couple of seconds. It waits until the server accepts a connection (polling, with
the server's own log in the error if it dies first), and `stop()` shuts it down and deletes the
directory (`restart()` stops and starts it, and `down()` / `up()` do it in two steps, for tests
of a database that went away).
`new_database()` makes an empty database per test by copying `template0`, which
takes a few milliseconds.

PostgreSQL refuses to run as root, and tests often do (CI containers): as root, the server runs
as the unprivileged `postgres` user through `setpriv` (which execs, so the process we hold IS
the server and stopping it needs no process-group games); otherwise it runs as we are.
Debian's binaries live in /usr/lib/postgresql/<major>/bin, off PATH: `find_bindir()` looks there
(or in `ASK_ANOTHER_TEST_PG_BINDIR`).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psycopg

STARTUP_TIMEOUT = 60.0
UNPRIVILEGED_USER = "postgres"


def find_bindir() -> Path | None:
    """The directory holding `initdb` and `postgres`, or None when PostgreSQL is not installed."""
    configured = os.environ.get("ASK_ANOTHER_TEST_PG_BINDIR")
    candidates = [Path(configured)] if configured else []
    candidates += sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)
    on_path = shutil.which("initdb")
    if on_path:
        candidates.append(Path(on_path).parent)
    for candidate in candidates:
        if (candidate / "initdb").exists() and (candidate / "postgres").exists():
            return candidate
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class PostgresServer:
    bindir: Path
    root: Path  # the temporary directory: data/, sockets/, server.log
    port: int
    process: subprocess.Popen[bytes] | None = None
    _names: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    @property
    def log_path(self) -> Path:
        return self.root / "server.log"

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    @classmethod
    def start(cls, bindir: Path) -> PostgresServer:
        root = Path(tempfile.mkdtemp(prefix="ask-another-pg-"))
        server = cls(bindir=bindir, root=root, port=_free_port())
        try:
            server._init_and_start()
        except BaseException:
            server.stop()
            raise
        return server

    def _as_server_user(self, argv: list[str]) -> list[str]:
        if os.geteuid() != 0:
            return argv
        return ["setpriv", f"--reuid={UNPRIVILEGED_USER}", f"--regid={UNPRIVILEGED_USER}",
                "--init-groups", "--", *argv]

    def _init_and_start(self) -> None:
        data, sockets = self.root / "data", self.root / "sockets"
        sockets.mkdir()
        if os.geteuid() == 0:
            user = pwd.getpwnam(UNPRIVILEGED_USER)
            for path in (self.root, sockets):
                os.chown(path, user.pw_uid, user.pw_gid)
        subprocess.run(
            self._as_server_user([str(self.bindir / "initdb"), "-D", str(data), "-U", "postgres",
                                  "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync",
                                  "--no-instructions"]),
            check=True, capture_output=True)
        self._start_server()

    def _start_server(self) -> None:
        data, sockets = self.root / "data", self.root / "sockets"
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                self._as_server_user([
                    str(self.bindir / "postgres"), "-D", str(data), "-p", str(self.port),
                    "-k", str(sockets), "-c", "listen_addresses=127.0.0.1",
                    "-c", "fsync=off", "-c", "synchronous_commit=off",
                    "-c", "full_page_writes=off", "-c", "max_connections=200",
                ]),
                stdout=log, stderr=subprocess.STDOUT)
        self._wait_until_ready()

    def _wait_until_ready(self) -> None:
        assert self.process is not None
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"PostgreSQL exited with {self.process.returncode}:\n"
                                   f"{self.log_path.read_text(errors='replace')[-2000:]}")
            try:
                psycopg.connect(self.url(), connect_timeout=2).close()
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)  # a poll interval: the loop ends when the server answers
            else:
                return

    def new_database(self) -> str:
        """The URL of a new, empty database of its own."""
        name = f"test_{os.getpid()}_{next(self._names)}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}" TEMPLATE template0')
        return self.url(name)

    def restart(self) -> None:
        """Stop the server (ending every session) and start it again on the same port."""
        self._stop_server()
        self._start_server()

    def down(self) -> None:
        """Stop the server (ending every session), keeping its data; `up()` starts it again on
        the same port: an outage of the database, for as long as the test waits between."""
        self._stop_server()

    def up(self) -> None:
        """Start the server stopped by `down()`; returns once it accepts connections."""
        self._start_server()

    def stop(self) -> None:
        self._stop_server()
        shutil.rmtree(self.root, ignore_errors=True)

    def _stop_server(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)  # "fast" shutdown: ends open sessions
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@contextlib.contextmanager
def own_server() -> Iterator[PostgresServer]:
    """A server of the caller's own, stopped afterwards; the test is skipped where PostgreSQL is
    not installed (.ci/run installs it)."""
    import pytest  # only the fixtures that skip need it

    bindir = find_bindir()
    if bindir is None:
        pytest.skip("PostgreSQL is not installed (apt-get install postgresql)")
    server = PostgresServer.start(bindir)
    try:
        yield server
    finally:
        server.stop()
