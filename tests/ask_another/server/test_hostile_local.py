"""Other people on the machine (issue 30): a second local account (uid 65534, through `setpriv`)
tries to read what a real `ask-another` process left in its home, under the umasks people run
with. The home lives in a directory every account can enter, as a home under /home or a shared
`ASK_ANOTHER_HOME` would."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from http_server import http_server, process_env, run_cli
from stdio_server import REPO

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
