"""Leftover shared gateway workers: one for every way of launching the same code, a short
linger once the last server let go, and `ask-another doctor` listing each worker of the home
with its age and memory, and stopping them all with `--stop-workers`."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
from pycache import PYCACHE
from stdio_server import REPO

from ask_another.config import Config
from ask_another.gateway import SharedTransport, open_gateway
from ask_another.gateway._shared import SHARED_LINGER, worker_key
from ask_another.simulator import Simulator


def test_the_ways_of_launching_the_same_code_share_one_worker(monkeypatch: pytest.MonkeyPatch):
    base = {"HOME": "/home/u", "PATH": "/usr/bin", "OPENAI_API_BASE": "https://a.example"}
    key = worker_key(base, "INFO", 900.0)
    # A clone's `uv run` and `uvx --from` run their own virtualenv and say so in PATH, VIRTUAL_ENV
    # and uv's variables; `uv tool install` runs yet another Python executable.
    clone = base | {"PATH": "/work/ask-another/.venv/bin:/usr/bin",
                    "VIRTUAL_ENV": "/work/ask-another/.venv", "VIRTUAL_ENV_PROMPT": "ask-another",
                    "UV": "/usr/local/bin/uv", "UV_RUN_RECURSION_DEPTH": "1"}
    uvx = base | {"PATH": "/root/.cache/uv/archive-v0/x/bin:/usr/bin", "UV": "/usr/bin/uv"}
    assert worker_key(clone, "INFO", 900.0) == key
    assert worker_key(uvx, "INFO", 900.0) == key
    monkeypatch.setattr(sys, "executable", "/root/.local/share/uv/tools/ask-another/bin/python")
    assert worker_key(base, "INFO", 900.0) == key
    # What the worker would see differently still makes another.
    assert worker_key(base | {"HTTPS_PROXY": "http://proxy:3128"}, "INFO", 900.0) != key


def test_a_shared_worker_lingers_two_minutes_not_the_idle_time(tmp_path: Path):
    assert SHARED_LINGER == 120.0
    assert SharedTransport(tmp_path, idle_exit=900.0).worker_idle == SHARED_LINGER
    assert SharedTransport(tmp_path, idle_exit=30.0).worker_idle == 30.0


@pytest.fixture
def home() -> Iterator[Path]:
    # A short path: a unix socket's path is at most 104-108 bytes.
    with tempfile.TemporaryDirectory(prefix="aa-") as directory:
        yield Path(directory)
        for pid_file in (Path(directory) / "gateway").glob("*.pid"):
            with contextlib.suppress(OSError, ValueError):
                os.kill(int(pid_file.read_text()), signal.SIGKILL)


def doctor(env: dict[str, str], *options: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("MODEL_", "ASK_ANOTHER_"))}
    return subprocess.run([sys.executable, "-m", "ask_another", "doctor", *options], cwd=REPO,
                          capture_output=True, text=True, timeout=120,
                          env={**clean, "PYTHONPYCACHEPREFIX": str(PYCACHE), **env})


@pytest.mark.slow  # starts two shared workers and doctor processes
async def test_doctor_lists_every_worker_of_the_home_and_stops_them(sim: Simulator, home: Path):
    env = {"ASK_ANOTHER_HOME": str(home), "MODEL_SIM": f"openai/m1;k;{sim.openai_base}"}
    entry = Config.from_env(env).models[0]
    pids = []
    # Two environments (a proxy setting apart): two workers, as a terminal's and a client's.
    for environ in (dict(os.environ), dict(os.environ) | {"HTTPS_PROXY": "http://127.0.0.1:9"}):
        transport = SharedTransport(home, ["k"], log_level="INFO", idle_exit=900.0,
                                    environ=environ)
        async with open_gateway(transport, ["k"]) as gateway:  # `environ`: for the key only
            await gateway.completion(entry, "start the worker")
            pids.append(gateway.statistics().worker_pid)
    assert None not in pids and len(set(pids)) == 2

    listed = await trio.to_thread.run_sync(doctor, env)
    assert listed.returncode == 0, listed
    lines = [line for line in listed.stdout.splitlines() if line.startswith("worker: ")]
    assert sorted(int(re.findall(r"pid (\d+)", line)[0]) for line in lines) == sorted(pids)
    for line in lines:  # where, how long it has run, how much memory it holds
        assert re.fullmatch(r"worker: pid \d+, gateway/[0-9a-f]{16}\.sock, up \d+ s, \d+ MiB",
                            line), line

    stopped = await trio.to_thread.run_sync(doctor, env, "--stop-workers")
    assert stopped.returncode == 0, stopped
    assert sorted(int(p) for p in re.findall(r"^stopped: worker pid (\d+)", stopped.stdout,
                                             re.MULTILINE)) == sorted(pids)
    assert "worker: pid" not in stopped.stdout  # none left to list
    assert not any(running(pid) for pid in pids)


def running(pid: int) -> bool:
    """Whether `pid` runs (a zombie, not yet reaped by this test process, does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.slow  # starts a process, to have a real zombie
def test_a_stopped_worker_its_parent_has_not_reaped_is_not_listed_as_running(tmp_path: Path):
    # `doctor --stop-workers` said "stopped: worker pid N", then listed pid N among the running
    # workers: a worker whose parent (the session that started it) has not reaped it yet is a
    # zombie, and kill(pid, 0) still finds it.
    from ask_another.gateway import home_workers

    (tmp_path / "gateway").mkdir()
    ended = subprocess.Popen([sys.executable, "-S", "-c", "pass"])
    os.waitid(os.P_PID, ended.pid, os.WEXITED | os.WNOWAIT)  # exited, not reaped: a zombie
    try:
        (tmp_path / "gateway" / "0123456789abcdef.pid").write_text(f"{ended.pid}\n")
        (tmp_path / "gateway" / "0123456789abcdef.sock").touch()
        assert home_workers(tmp_path) == []
    finally:
        ended.wait()


def test_a_pyenv_shim_does_not_give_the_installed_tool_a_worker_of_its_own():
    # A pyenv shim sets PYENV_VERSION, PYENV_DIR, PYENV_HOOK_PATH... for the program it runs: a
    # client launching the tool through one got a second 220 MiB worker beside the terminal's.
    base = {"HOME": "/home/u", "PATH": "/usr/bin"}
    shim = base | {"PYENV_VERSION": "3.11.7", "PYENV_DIR": "/home/u/project",
                   "PYENV_ROOT": "/home/u/.pyenv",
                   "PYENV_HOOK_PATH": "/home/u/.pyenv/pyenv.d:/usr/etc/pyenv.d"}
    assert worker_key(shim, "INFO", 900.0) == worker_key(base, "INFO", 900.0)
