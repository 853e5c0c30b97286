"""Other people on the machine (issue 30): a second local account (uid 65534, through `setpriv`)
tries to read what a real `ask-another` process left in its home, under the umasks people run
with. The home lives in a directory every account can enter, as a home under /home or a shared
`ASK_ANOTHER_HOME` would."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
from http_server import http_server, process_env, run_cli
from stdio_server import REPO, stdio_client_for
from tool_results import call

from ask_another.simulator import Simulator

pytestmark = [
    pytest.mark.slow,  # real processes
    pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None,
                       reason="needs root and setpriv to act as a second account"),
]

NOBODY = ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups"]


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A directory every account may enter and list (0755), removed afterwards."""
    path = Path(tempfile.mkdtemp(prefix="aa-hostile-local-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def as_nobody(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*NOBODY, *command], capture_output=True, text=True, timeout=30,
                          check=False)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def run_with_umask(umask: int, env: dict[str, str], *args: str
                   ) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["sh", "-c", f"umask {umask:03o} && exec \"$@\"", "sh",
                           "python", "-m", "ask_another", *args],
                          env=process_env(env), cwd=REPO, capture_output=True, text=True,
                          timeout=60, check=False)


@pytest.mark.parametrize("umask", [0o022, 0o000], ids=["umask-022", "umask-000"])
def test_the_home_and_its_files_are_private_whatever_the_umask(open_dir: Path, umask: int):
    # Under 022 the home was 0755 and the store 0644: another account copied the database and
    # read a prompt. Under 000 the home was 0777.
    store_home, tokens_home = open_dir / "store-home", open_dir / "tokens-home"
    done = run_with_umask(umask, {"ASK_ANOTHER_HOME": str(store_home)}, "usage")
    assert done.returncode == 0, done.stderr
    done = run_with_umask(umask, {"ASK_ANOTHER_HOME": str(tokens_home)}, "token", "add", "x")
    assert done.returncode == 0, done.stderr
    database = store_home / "ask-another.sqlite3"
    assert (mode(store_home), mode(database)) == (0o700, 0o600)
    assert (mode(tokens_home), mode(tokens_home / "tokens.json")) == (0o700, 0o600)
    read = as_nobody("cat", str(database))
    assert read.returncode != 0 and "Permission denied" in read.stderr
    assert as_nobody("ls", str(tokens_home)).returncode != 0


async def test_an_existing_open_home_is_tightened_at_start_with_a_log_line(
        sim: Simulator, open_dir: Path):
    home = open_dir / "home"
    env = {"ASK_ANOTHER_HOME": str(home),
           "MODEL_SIM": f"openai/m1;sk-test-LOCAL-HOME-1234;{sim.openai_base}"}
    run_cli(env, "token", "add", "alice", check=True)
    home.chmod(0o755)  # as an older version, or a umask of 022, left it
    assert as_nobody("ls", str(home)).returncode == 0
    async with http_server(env, open_dir / "server.log") as server:
        log = server.log()
    assert mode(home) == 0o700
    assert "home.tightened" in log and "was=0755" in log and "now=0700" in log
    assert as_nobody("ls", str(home)).returncode != 0


def _workers_of(home: Path) -> list[int]:
    needle = f"--shared\0{home / 'gateway'}/".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if needle in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def _kill_workers(home: Path) -> None:
    for pid in _workers_of(home):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


async def test_a_home_another_account_made_gets_no_shared_worker(sim: Simulator, open_dir: Path):
    # An ASK_ANOTHER_HOME in a shared directory that another account made first (or one made
    # under umask 000): they could listen on the worker's socket, and the next session sent
    # them its keys (the Hello) and its prompt, and showed their answer.
    home = open_dir / "home"
    os.chmod(open_dir, 0o1777)  # a shared temporary directory, as /tmp
    made = as_nobody("sh", "-c", f"umask 000 && mkdir -p {home}/gateway")
    assert made.returncode == 0, made.stderr
    env = {"ASK_ANOTHER_HOME": str(home), "PATH": os.environ["PATH"],
           "MODEL_SIM": f"openai/m1;sk-test-LOCAL-WORKER-1234;{sim.openai_base}"}
    try:
        with (open_dir / "stdio.log").open("w") as log:
            async with stdio_client_for(env, log) as client:
                error, text = await call(client, "completion", model="sim", prompt="hi")
        shared = _workers_of(home)
    finally:
        _kill_workers(home)
    assert not error and "answer to: hi" in text, text
    assert shared == [] and list((home / "gateway").iterdir()) == []
    log_text = (open_dir / "stdio.log").read_text()
    assert "gateway.shared_unavailable" in log_text and "belongs to another user" in log_text


LISTENER = """
import socket, sys
listener = socket.socket(fileno=int(sys.argv[1]))
listener.listen(1)
print("listening", flush=True)
listener.settimeout(30)
conn, _ = listener.accept()
conn.settimeout(3)
received = b""
try:
    while chunk := conn.recv(65536):
        received += chunk
except TimeoutError:
    pass
print(len(received), flush=True)
"""


def test_a_worker_socket_another_user_listens_on_is_sent_nothing(open_dir: Path) -> None:
    # The socket is in a private gateway/ directory, but the process listening on it is
    # another account's (SO_PEERCRED: whoever called listen): the server must not send its
    # Hello, which carries its keys, and must fall back to a private worker.
    from ask_another.gateway._shared import Unshareable, connect_or_start

    home = open_dir / "home"
    (home / "gateway").mkdir(parents=True, mode=0o700)
    home.chmod(0o700)
    path = home / "gateway" / "k.sock"
    bound = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    bound.bind(str(path))
    fd = bound.fileno()
    with subprocess.Popen([*NOBODY, sys.executable, "-c", LISTENER, str(fd)],
                          stdout=subprocess.PIPE, text=True, pass_fds=[fd],
                          stdin=subprocess.DEVNULL) as listener:
        assert listener.stdout is not None
        bound.close()
        assert listener.stdout.readline() == "listening\n"
        with pytest.raises(Unshareable, match=r"another user's \(uid 65534\); nothing was sent"):
            connect_or_start(path, "WARNING", 30)
        received = listener.stdout.readline()
    assert received == "0\n"


async def test_the_shared_worker_closes_a_connection_from_another_user(sim: Simulator,
                                                                         open_dir: Path):
    from ask_another.config import Config
    from ask_another.gateway import open_gateway
    from ask_another.gateway._shared import SharedTransport

    key = "sk-test-LOCAL-PEER-1234"
    home = open_dir / "home"
    home.mkdir(mode=0o700)
    transport = SharedTransport(home, [key], idle_exit=30)
    entry = Config.from_env({"MODEL_X": f"openai/m1;{key};{sim.openai_base}",
                             "ASK_ANOTHER_HOME": str(home)}).models[0]
    try:
        async with open_gateway(transport, [key]) as gateway:
            await gateway.completion(entry, "the worker runs")
            # As if the modes had been loosened by hand: another account can now connect.
            for directory in (home, home / "gateway"):
                directory.chmod(0o711)
            transport.socket_path.chmod(0o666)
            probe = ("import socket, sys\n"
                     "s = socket.socket(socket.AF_UNIX)\n"
                     f"s.connect({str(transport.socket_path)!r})\n"
                     "s.settimeout(20)\n"
                     "print(len(s.recv(65536)), flush=True)\n")
            done = await trio.to_thread.run_sync(as_nobody, sys.executable, "-c", probe)
    finally:
        _kill_workers(home)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "0\n"  # closed at once: not even the Ready
    assert "gateway.peer_refused" in (home / "gateway" / "gateway.log").read_text()
    # Every file the worker made in the home is 0600 whatever the umask (its pid file was 0644).
    made = [path for path in (home / "gateway").iterdir() if not path.is_socket()]
    assert made and all(mode(path) == 0o600 for path in made), [
        (path.name, oct(mode(path))) for path in made]


async def test_no_auth_on_loopback_does_not_serve_other_local_accounts(sim: Simulator,
                                                                      open_dir: Path):
    # uid 65534 listed the owner's jobs and could spend the keys: --no-auth served every local
    # account as the local user, an admin.
    home = open_dir / "home"
    env = {"ASK_ANOTHER_HOME": str(home),
           "MODEL_SIM": f"openai/m1;sk-test-LOCAL-NOAUTH-1234;{sim.openai_base}"}
    initialize = ('{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":'
                  '"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"0"}}}')
    async with http_server(env, open_dir / "server.log", "--no-auth") as server:
        def post_as_nobody(*headers: str) -> subprocess.CompletedProcess[str]:
            return as_nobody("curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST",
                             "-H", "Content-Type: application/json", "-H",
                             "Accept: application/json, text/event-stream", *headers,
                             "-d", initialize, server.url)

        refused = await trio.to_thread.run_sync(post_as_nobody)
        token_file = home / "local-token"
        read = as_nobody("cat", str(token_file))
        owner = await trio.to_thread.run_sync(
            post_as_nobody, "-H", f"Authorization: Bearer {token_file.read_text().strip()}")
    assert refused.stdout == "401", refused
    assert read.returncode != 0 and "Permission denied" in read.stderr
    assert owner.stdout == "200", owner  # the token, not the account, is what counts
