"""The shared gateway worker (SharedTransport: the stdio server's default), real processes
against the simulator: one worker for every server on a home, its socket's mode, a killed worker
and the next call, its idle exit and the connection it closes as it leaves, a worker per
environment, the fall-back to a private worker. Real stdio servers on one home share it by
default."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import stat
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import trio
from deadlines import generous
from mcp.client.stdio import get_default_environment
from stdio_server import server_parameters, stdio_client_for
from tool_results import text_of

from ask_another.config import Config, ModelEntry
from ask_another.errors import ProviderUnavailable, RateLimited
from ask_another.gateway import ProcessTransport, SharedTransport, open_gateway
from ask_another.gateway import _shared as shared_module
from ask_another.gateway._shared import worker_key
from ask_another.runtime import _transport_kind, describe_gateway, open_runtime
from ask_another.simulator import Fail, Reply, Simulator, Slow

pytestmark = pytest.mark.slow  # starts real worker and server processes

KEY = "sk-test-shared-0123456789"


@pytest.fixture
def home() -> Iterator[Path]:
    # A short path: a unix socket's path is at most 104-108 bytes.
    with tempfile.TemporaryDirectory(prefix="aa-") as directory:
        yield Path(directory)
        _kill_workers(Path(directory))


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _workers(home: Path) -> list[int]:
    """The shared gateway workers listening in `home`, from /proc."""
    needle = f"--shared\0{home / 'gateway'}/".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if needle in (entry / "cmdline").read_bytes() and _alive(int(entry.name)):
                    found.append(int(entry.name))
    return found


def _kill_workers(home: Path) -> None:
    for pid in _workers(home):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


async def _until(condition: object, seconds: float = 30) -> None:
    with trio.fail_after(generous(seconds)):
        while not condition():  # type: ignore[operator]  # noqa: ASYNC110 - other processes
            await trio.sleep(0.05)


async def _continue_after(pid: int, seconds: float) -> None:
    await trio.sleep(seconds)
    os.kill(pid, signal.SIGCONT)


def entry(sim: Simulator) -> ModelEntry:
    env = {"MODEL_X": f"openai/m1;{KEY};{sim.openai_base}", "ASK_ANOTHER_HOME": "/tmp/unused"}
    return Config.from_env(env).models[0]


async def test_two_gateways_on_one_home_use_one_worker(sim: Simulator, home: Path):
    transport = SharedTransport(home, [KEY], idle_exit=30)
    async with open_gateway(transport, [KEY]) as first, \
            open_gateway(SharedTransport(home, [KEY], idle_exit=30), [KEY]) as second:
        one = await first.completion(entry(sim), "one")
        two = await second.completion(entry(sim), "two")
        pids = {first.statistics().worker_pid, second.statistics().worker_pid}
    assert (one.text, two.text) == ("[simulated m1] answer to: one",
                                    "[simulated m1] answer to: two")
    assert len(pids) == 1 and None not in pids and os.getpid() not in pids
    assert _workers(home) == list(pids)  # it outlives the servers that used it
    assert stat.S_IMODE(os.stat(transport.socket_path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(home / "gateway").st_mode) == 0o700


async def test_a_worker_with_no_connection_exits_after_its_idle_time(sim: Simulator,
                                                                    home: Path):
    transport = SharedTransport(home, [KEY], idle_exit=0.5)
    async with open_gateway(transport, [KEY]) as gateway:
        await gateway.completion(entry(sim), "one")
        [pid] = _workers(home)
        # The connection closes after 0.5 s without a call, the worker 0.5 s later.
        await _until(lambda: not _alive(pid))
        assert not transport.socket_path.exists()
        # The next call starts a new one.
        result = await gateway.completion(entry(sim), "two")
        assert result.text == "[simulated m1] answer to: two"
        assert _workers(home) not in ([], [pid])


async def test_a_killed_shared_worker_fails_its_calls_and_the_next_call_starts_one(
        sim: Simulator, home: Path):
    sim.script("m1", [Slow(30)])
    config = Config.from_env({"MODEL_X": f"openai/m1;{KEY};{sim.openai_base}",
                              "ASK_ANOTHER_HOME": str(home), "ASK_ANOTHER_GATEWAY_SHARED": "1"})
    async with open_runtime(config, prewarm_after=0) as runtime:
        gateway = await runtime.gateway()
        failure: list[BaseException] = []

        async def waiting_call() -> None:
            try:
                await gateway.completion(config.models[0], "never answered")
            except ProviderUnavailable as exc:
                failure.append(exc)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(waiting_call)
            await _until(lambda: sim.requests_for("m1"))
            pid = gateway.statistics().worker_pid
            assert pid is not None and _workers(home) == [pid]
            os.kill(pid, signal.SIGKILL)
        assert "The gateway worker stopped" in str(failure[0])
        # The same gateway connects again: the shared worker's end is not this server's crash
        # (it was: each end counted against the supervisor's 3 restarts in 5 s, and a fourth
        # ended every server on the home).
        with trio.fail_after(30):
            result = await gateway.completion(config.models[0], "again")
        assert result.text == "[simulated m1] answer to: again"
        assert await runtime.gateway() is gateway
        assert gateway.statistics().worker_pid not in (None, pid)
        assert _workers(home) == [gateway.statistics().worker_pid]


async def test_two_stdio_servers_on_one_home_share_one_worker_by_default(
        sim: Simulator, home: Path, tmp_path: Path):
    # No ASK_ANOTHER_GATEWAY_SHARED: the stdio server's default. The two differ in variables that
    # only tell sessions apart.
    env = {"ASK_ANOTHER_HOME": str(home), "MODEL_SIM": f"openai/m1;{KEY};{sim.openai_base}",
           "PATH": os.environ["PATH"]}
    other = env | {"PWD": "/somewhere/else", "TERM_SESSION_ID": "w0t1p0:5E1A",
                   "CLAUDE_CODE_SSE_PORT": "51234",
                   # Another GNOME Terminal tab, SSH login and shell prompt: each got a worker of
                   # its own.
                   "GNOME_TERMINAL_SCREEN": "/org/gnome/Terminal/screen/6f0e1c2a",
                   "SSH_CONNECTION": "10.0.0.5 51822 10.0.0.9 22",
                   "SSH_AUTH_SOCK": "/tmp/ssh-XXXXk3L1/agent.4242",
                   "STARSHIP_SESSION_KEY": "4827365019283746"}
    with (tmp_path / "one.log").open("w") as log_one, (tmp_path / "two.log").open("w") as log_two:
        async with stdio_client_for(env, log_one) as one, stdio_client_for(other, log_two) as two:
            answers = [await client.call_tool("completion", {"model": "sim", "prompt": prompt})
                       for client, prompt in ((one, "first"), (two, "second"))]
            shared = _workers(home)
            every = _any_workers(home)
            environment = _environ_of(shared[0])
    assert text_of(answers[0]).startswith("[simulated m1] answer to: first")
    assert text_of(answers[1]).startswith("[simulated m1] answer to: second")
    assert len(shared) == 1
    assert every == shared  # no server started a private worker
    # It outlives the session that started it and serves others: no keys in its environment.
    assert KEY.encode() not in environment and b"MODEL_SIM=" not in environment


def _environ_of(pid: int) -> bytes:
    return Path(f"/proc/{pid}/environ").read_bytes()


def _any_workers(home: Path) -> list[int]:
    """Every gateway worker process (shared or private) started for `home`."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if (b"ask_another.gateway._worker" in (entry / "cmdline").read_bytes()
                        and f"ASK_ANOTHER_HOME={home}\0".encode()
                        in (entry / "environ").read_bytes() and _alive(int(entry.name))):
                    found.append(int(entry.name))
    return sorted(found)


async def test_the_worker_scrubs_every_connected_servers_keys(sim: Simulator, home: Path):
    # Server A's key shows up in a failure of server B's call: B cannot know A's key, so only the
    # worker, which A's connection told its secrets, can mask it.
    key_a = "sk-test-server-A-5f0e9c1d"
    sim.script("m1", [Reply("ok"), Fail(429, f"quota of {key_a} and {KEY} used up")])
    async with open_gateway(SharedTransport(home, [key_a], idle_exit=30), [key_a]) as first, \
            open_gateway(SharedTransport(home, [KEY], idle_exit=30), [KEY]) as second:
        await first.completion(entry(sim), "A is connected")  # its Hello has been read
        with pytest.raises(RateLimited) as limited:
            await second.completion(entry(sim), "B")
    assert "quota of" in str(limited.value)
    assert key_a not in str(limited.value) and KEY not in str(limited.value)


def test_the_shared_switch_is_parsed_and_unset_by_default():
    base = {"ASK_ANOTHER_HOME": "/tmp/unused"}
    assert Config.from_env(base).gateway_shared is None  # the face decides (runtime._transport)
    assert Config.from_env(base | {"ASK_ANOTHER_GATEWAY_SHARED": "1"}).gateway_shared is True
    assert Config.from_env(base | {"ASK_ANOTHER_GATEWAY_SHARED": "0"}).gateway_shared is False
    bad = Config.from_env(base | {"ASK_ANOTHER_GATEWAY_SHARED": "sometimes"})
    assert bad.gateway_shared is None
    assert [p.variable for p in bad.problems] == ["ASK_ANOTHER_GATEWAY_SHARED"]


async def test_gateways_starting_at_once_start_one_worker(sim: Simulator, home: Path):
    pids: list[int | None] = []

    async def one(n: int) -> None:
        async with open_gateway(SharedTransport(home, [KEY], idle_exit=30), [KEY]) as gateway:
            await gateway.completion(entry(sim), f"n{n}")
            pids.append(gateway.statistics().worker_pid)

    async with trio.open_nursery() as nursery:
        for n in range(4):
            nursery.start_soon(one, n)
    assert len(set(pids)) == 1 and None not in pids
    assert _workers(home) == pids[:1]


async def test_a_stdio_server_told_zero_runs_a_private_worker(sim: Simulator, home: Path,
                                                              tmp_path: Path):
    env = {"ASK_ANOTHER_HOME": str(home), "ASK_ANOTHER_GATEWAY_SHARED": "0",
           "MODEL_SIM": f"openai/m1;{KEY};{sim.openai_base}", "PATH": os.environ["PATH"]}
    with (tmp_path / "server.log").open("w") as log:
        async with stdio_client_for(env, log) as client:
            answer = await client.call_tool("completion", {"model": "sim", "prompt": "mine"})
            private = _any_workers(home)
            shared = _workers(home)
    assert text_of(answer).startswith("[simulated m1] answer to: mine")
    assert len(private) == 1 and shared == []
    assert not (home / "gateway").exists()


@pytest.mark.parametrize(("variable", "per_session", "expected"), [
    (None, True, SharedTransport),  # the stdio server, the people commands
    (None, False, ProcessTransport),  # serve --http, a program embedding the runtime
    ("0", True, ProcessTransport),
    ("1", False, SharedTransport),
])
def test_which_worker_each_face_gets(variable: str | None, per_session: bool,
                                     expected: type) -> None:
    env = {"ASK_ANOTHER_HOME": "/tmp/unused"}
    if variable is not None:
        env["ASK_ANOTHER_GATEWAY_SHARED"] = variable
    assert _transport_kind(Config.from_env(env), None, per_session) is expected


def test_only_variables_that_tell_sessions_apart_are_left_out_of_the_key():
    env = {"PATH": "/usr/bin", "HOME": "/home/u", "OPENAI_API_BASE": "https://a.example"}
    key = worker_key(env, "INFO", 900.0)
    sessions = env | {"PWD": "/work/project", "OLDPWD": "/", "SHLVL": "3", "TERM_SESSION_ID": "7",
                      "CLAUDE_CODE_SSE_PORT": "41000", "VSCODE_PID": "88",
                      "GNOME_TERMINAL_SCREEN": "/org/gnome/Terminal/screen/1",
                      "XDG_SESSION_ID": "4",
                      "SSH_CLIENT": "10.0.0.5 51822 22", "SSH_CONNECTION": "10.0.0.5 51822 1 22",
                      "SSH_AUTH_SOCK": "/tmp/ssh-a/agent.1", "STARSHIP_SESSION_KEY": "123",
                      "ZELLIJ_PANE_ID": "2", "KITTY_PID": "99", "WINDOW": "1"}
    assert worker_key(sessions, "INFO", 900.0) == key
    # Our own settings travel with each call: sessions with other models share the worker.
    ours = env | {"MODEL_GPT": "openai/gpt-4o;sk-other", "SEARCH_WEB": "tavily;tv-key",
                  "ASK_ANOTHER_CONFIRM_USD": "5"}
    assert worker_key(ours, "INFO", 900.0) == key
    # What litellm could read, and the worker's own settings, make another worker.
    for changed in (env | {"HTTPS_PROXY": "http://proxy:3128"},
                    env | {"OPENAI_API_BASE": "https://b.example"},
                    env | {"SSL_CERT_FILE": "/etc/corp.pem"}):
        assert worker_key(changed, "INFO", 900.0) != key
    assert worker_key(env, "DEBUG", 900.0) != key
    assert worker_key(env, "INFO", 60.0) != key


async def test_servers_with_other_environments_get_other_workers(sim: Simulator, home: Path):
    plain = dict(os.environ)
    proxied = plain | {"HTTPS_PROXY": "http://127.0.0.1:9"}  # only the key sees it here
    async with open_gateway(SharedTransport(home, [KEY], idle_exit=30, environ=plain),
                            [KEY]) as first, \
            open_gateway(SharedTransport(home, [KEY], idle_exit=30, environ=proxied),
                         [KEY]) as second:
        await first.completion(entry(sim), "one")
        await second.completion(entry(sim), "two")
        pids = {first.statistics().worker_pid, second.statistics().worker_pid}
    assert len(pids) == 2 and None not in pids
    assert sorted(_workers(home)) == sorted(pids)  # type: ignore[type-var]


def _leaving_worker(path: Path, connected: list[int]) -> None:
    """A worker leaving as a server connects: the kernel has taken the connection, then the
    listener closes (the socket file goes with it) and the connection closes unserved."""
    path.parent.mkdir(mode=0o700, exist_ok=True)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(1)

    def leave() -> None:
        connection, _ = listener.accept()
        connected.append(1)
        listener.close()
        path.unlink()
        connection.close()

    threading.Thread(target=leave, daemon=True).start()


async def test_a_connection_closed_before_the_workers_ready_is_made_again(sim: Simulator,
                                                                           home: Path):
    transport = SharedTransport(home, [KEY], idle_exit=30)
    connected: list[int] = []
    _leaving_worker(transport.socket_path, connected)
    async with open_gateway(transport, [KEY]) as gateway:
        result = await gateway.completion(entry(sim), "after the race")
        pid = gateway.statistics().worker_pid
    assert connected == [1]  # the first connection went to the leaving worker
    assert result.text == "[simulated m1] answer to: after the race"
    assert _workers(home) == [pid]  # a new worker, started by the second attempt


async def test_a_worker_whose_socket_is_gone_leaves_once_nobody_is_connected(sim: Simulator,
                                                                              home: Path):
    transport = SharedTransport(home, [KEY], idle_exit=20)
    async with open_gateway(transport, [KEY]) as gateway:
        await gateway.completion(entry(sim), "one")
        [pid] = _workers(home)
        transport.socket_path.unlink()  # as when the home is removed
        result = await gateway.completion(entry(sim), "still connected")
        assert result.text == "[simulated m1] answer to: still connected"
    # Its idle exit would be 20 s from now; it checks its socket every 5 s.
    await _until(lambda: not _alive(pid), seconds=15)


def _parent_of(pid: int | None) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


async def test_a_home_too_long_for_a_socket_falls_back_to_a_private_worker(sim: Simulator,
                                                                           home: Path):
    deep = home / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    transport = SharedTransport(deep, [KEY], idle_exit=30)
    async with open_gateway(transport, [KEY]) as gateway:
        result = await gateway.completion(entry(sim), "private")
        pid = gateway.statistics().worker_pid
        parent = _parent_of(pid)
    assert result.text == "[simulated m1] answer to: private"
    assert transport.fallback is not None and "too long" in transport.fallback
    assert parent == os.getpid()  # this process's own worker
    assert not (deep / "gateway").exists()


async def test_a_file_where_the_workers_directory_goes_falls_back_to_a_private_worker(
        sim: Simulator, home: Path):
    (home / "gateway").write_text("not a directory")
    transport = SharedTransport(home, [KEY], idle_exit=30)
    async with open_gateway(transport, [KEY]) as gateway:
        result = await gateway.completion(entry(sim), "private")
        parent = _parent_of(gateway.statistics().worker_pid)
    assert result.text == "[simulated m1] answer to: private"
    assert transport.fallback is not None and "is not a directory" in transport.fallback
    assert parent == os.getpid()


def _line(message: dict[str, object]) -> bytes:
    return (json.dumps(message) + "\n").encode()


async def test_a_killed_server_loses_only_its_own_calls_in_the_shared_worker(
        sim: Simulator, home: Path, tmp_path: Path):
    sim.script("m1", [Slow(30)])  # the first request (the doomed server's) never answers
    env = {"ASK_ANOTHER_HOME": str(home), "MODEL_SIM": f"openai/m1;{KEY};{sim.openai_base}",
           "PATH": os.environ["PATH"]}
    # Started as the MCP client starts the other one, so both have one worker key.
    parameters = server_parameters(env)
    doomed = await trio.lowlevel.open_process(
        [parameters.command, *parameters.args], env=get_default_environment() | parameters.env,
        cwd=parameters.cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL)
    assert doomed.stdin is not None
    try:
        await doomed.stdin.send_all(b"".join(_line(message) for message in (
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "doomed", "version": "0"}}},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
                "name": "completion", "arguments": {"model": "sim", "prompt": "doomed"}}})))
        await _until(lambda: sim.requests_for("m1"), seconds=60)
        [worker] = _workers(home)
        with (tmp_path / "other.log").open("w") as log:
            async with stdio_client_for(env, log) as other:
                doomed.kill()
                await doomed.wait()
                answer = await other.call_tool("completion", {"model": "sim",
                                                              "prompt": "unharmed"})
                assert _workers(home) == [worker]  # the same worker serves on
    finally:
        with trio.CancelScope(shield=True):
            doomed.kill()
            await doomed.wait()
            await doomed.stdin.aclose()
            if doomed.stdout is not None:
                await doomed.stdout.aclose()
    assert text_of(answer).startswith("[simulated m1] answer to: unharmed")


async def test_a_dead_workers_socket_that_cannot_be_removed_falls_back_to_a_private_worker(
        sim: Simulator, home: Path, tmp_path: Path):
    # As in a read-only gateway/ directory holding a dead worker's socket (root ignores modes,
    # so a directory stands where the socket goes): nobody listens and the file cannot be
    # removed. The server used to crash its gateway at every restart, and its supervisor then
    # ended the server.
    env = {"ASK_ANOTHER_HOME": str(home), "MODEL_SIM": f"openai/m1;{KEY};{sim.openai_base}",
           "PATH": os.environ["PATH"]}
    with (tmp_path / "first.log").open("w") as log:
        async with stdio_client_for(env, log) as first:
            await first.call_tool("completion", {"model": "sim", "prompt": "first"})
    [pid] = _workers(home)
    [socket_path] = (home / "gateway").glob("*.sock")
    os.kill(pid, signal.SIGKILL)
    await _until(lambda: not _alive(pid))
    socket_path.unlink()
    socket_path.mkdir()
    (socket_path / "in the way").write_text("")
    with (tmp_path / "second.log").open("w") as log:
        async with stdio_client_for(env, log) as second:
            answers = [await second.call_tool("completion", {"model": "sim", "prompt": f"n{n}"})
                       for n in range(2)]
            private = _any_workers(home)
    assert [text_of(a).startswith(f"[simulated m1] answer to: n{n}")
            for n, a in enumerate(answers)] == [True, True]
    assert len(private) == 1 and _workers(home) == []
    text = (tmp_path / "second.log").read_text()
    assert "gateway.shared_unavailable" in text and "Is a directory" in text
    assert "supervisor.gave_up" not in text


async def test_a_relative_home_shares_its_worker(sim: Simulator, home: Path,
                                                 monkeypatch: pytest.MonkeyPatch):
    # The worker runs in the home: a relative socket path would name a place under the home.
    monkeypatch.chdir(home)
    transport = SharedTransport(Path("relative"), [KEY], idle_exit=30)
    try:
        async with open_gateway(transport, [KEY]) as gateway:
            result = await gateway.completion(entry(sim), "relative")
            pid = gateway.statistics().worker_pid
        assert result.text == "[simulated m1] answer to: relative"
        assert transport.fallback is None
        assert _workers(home / "relative") == [pid]
    finally:
        _kill_workers(home / "relative")


async def test_a_shared_worker_that_never_gets_ready_falls_back_to_a_private_worker(
        sim: Simulator, home: Path):
    # Every shared worker is killed once it listens (its pid file is written just before it says
    # so), as by the OOM killer while it imports litellm: after three connections closed before
    # the worker's Ready, the server runs its own worker. It used to crash its gateway each
    # time, until its supervisor gave up and ended it.
    config = Config.from_env({"MODEL_X": f"openai/m1;{KEY};{sim.openai_base}",
                              "ASK_ANOTHER_HOME": str(home), "ASK_ANOTHER_GATEWAY_SHARED": "1"})
    killed: set[int] = set()

    async def killer() -> None:
        while True:
            for pid_file in (home / "gateway").glob("*.pid"):
                with contextlib.suppress(OSError, ValueError):
                    pid = int(pid_file.read_text())
                    os.kill(pid, signal.SIGKILL)
                    killed.add(pid)
            await trio.sleep(0.02)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(killer)
        async with open_runtime(config, prewarm_after=0) as runtime:
            gateway = await runtime.gateway()
            # Three workers killed as they start, then a private one's litellm import.
            with trio.fail_after(generous(60)):
                result = await gateway.completion(config.models[0], "private")
            parent = _parent_of(gateway.statistics().worker_pid)
            assert await runtime.gateway() is gateway
        nursery.cancel_scope.cancel()
    assert result.text == "[simulated m1] answer to: private"
    assert len(killed) >= 3 and parent == os.getpid()


def test_a_worker_that_dies_right_after_it_listens_is_retried_not_given_up(
        home: Path, monkeypatch: pytest.MonkeyPatch):
    # Killed between "listening" and our connect (the test above's killer wins that race on
    # some runs): the socket file is there and refuses. That used to make the server give up
    # sharing at once, as for a socket that can never work; it is the same as a worker closing
    # before its Ready, which the caller retries. A stand-in start: no real kill can be timed
    # into that gap.
    from ask_another.gateway import _shared

    def started_and_killed(path: Path, log_level: str, idle: float) -> None:
        dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        dead.bind(str(path))  # listened, then died: the file stays, nobody accepts
        dead.close()

    monkeypatch.setattr(_shared, "_start_worker", started_and_killed)
    path = home / "gateway" / "k.sock"
    assert _shared.connect_or_start(path, "WARNING", 30) is None
    assert path.exists()  # the next attempt removes it under the lock and starts another


async def test_a_gateway_closed_while_its_worker_gets_ready_closes_at_once(
        sim: Simulator, home: Path):
    # A session that ends while the worker it started imports litellm (Ctrl-C at a terminal
    # soon after the start): its close waited for the worker's Ready (seconds on a busy
    # machine; 10 s at most), and before that for 10 s and the idle time. The worker is held
    # stopped here, so it cannot get ready before the close: the close must not wait for it.
    transport = SharedTransport(home, [KEY], idle_exit=30)
    async with trio.open_nursery() as nursery:
        async with open_gateway(transport, [KEY]) as gateway:
            await _until(lambda: list((home / "gateway").glob("*.pid")))
            [pid_file] = (home / "gateway").glob("*.pid")
            await _until(lambda: pid_file.read_text().strip().isdigit())
            pid = int(pid_file.read_text())
            os.kill(pid, signal.SIGSTOP)
            # Only so that a close that waits for the Ready fails the test rather than hangs.
            nursery.start_soon(_continue_after, pid, 20)
            assert not gateway.statistics().ready
            closing = trio.current_time()
        # At once (milliseconds), where the old close waited for the stopped worker (and,
        # here, the 20 s until it is continued).
        assert trio.current_time() - closing < min(generous(5), 15)
        nursery.cancel_scope.cancel()
    os.kill(pid, signal.SIGCONT)
    assert _workers(home) == [pid]  # it starts on, for the next session
    async with open_gateway(SharedTransport(home, [KEY], idle_exit=30), [KEY]) as gateway:
        result = await gateway.completion(entry(sim), "the worker serves on")
        assert gateway.statistics().worker_pid == pid
    assert result.text == "[simulated m1] answer to: the worker serves on"


def test_doctor_says_each_server_has_its_own_worker_where_none_can_be_shared(home: Path):
    # It said "one worker shared by the sessions on this home" while every server fell back.
    deep = home / ("d" * 60) / ("e" * 60)
    line = describe_gateway(Config.from_env({"ASK_ANOTHER_HOME": str(home)}))
    assert line.startswith("one worker shared by the sessions on this home")
    (home / "gateway").write_text("not a directory")
    for where, reason in ((deep, "too long for a unix socket"), (home, "is not a directory")):
        line = describe_gateway(Config.from_env({"ASK_ANOTHER_HOME": str(where)}))
        assert line.startswith("a worker process of each server's own: no shared one, ")
        assert reason in line


async def test_a_call_made_as_the_shared_worker_dies_goes_to_the_next_one(sim: Simulator,
                                                                          home: Path):
    # The call comes before this server has read the connection's end: nothing reached the dead
    # worker, so it is sent to the next one. It used to fail with "The gateway worker stopped".
    async with open_gateway(SharedTransport(home, [KEY], idle_exit=30), [KEY]) as gateway:
        await gateway.completion(entry(sim), "first")
        [pid] = _workers(home)
        os.kill(pid, signal.SIGKILL)
        # Blocking on purpose, so trio does not see the connection's end first. Until the
        # process is reaped (this process started it), a thread of it may hold the socket open.
        while Path(f"/proc/{pid}").exists():  # noqa: ASYNC240 - see above
            time.sleep(0.01)  # noqa: ASYNC251 - see above
        result = await gateway.completion(entry(sim), "right after")
        assert gateway.statistics().worker_pid not in (None, pid)
    assert result.text == "[simulated m1] answer to: right after"


async def test_a_socket_connected_by_an_abandoned_connect_is_closed_not_leaked(
        home: Path, monkeypatch: pytest.MonkeyPatch):
    # A close while the connect's thread waited (on the flock, or on a starting worker) abandons
    # the thread; the socket it connected afterwards was dropped with trio's discarded result
    # and closed by the garbage collector (a ResourceWarning in the whole suite). The thread's
    # blocking step is held here so that the cancel comes first, whatever the machine's load.
    release, finished = threading.Event(), threading.Event()
    ours, theirs = socket.socketpair()

    def connect_when_released(path: Path, log_level: str, idle: float,
                              starting: Callable[[], None]) -> socket.socket:
        release.wait(generous(30))
        finished.set()
        return ours

    monkeypatch.setattr(shared_module, "connect_or_start", connect_when_released)
    with trio.move_on_after(0.05):
        await shared_module._connect_in_thread(SharedTransport(home, [KEY], idle_exit=30), "info")
    release.set()
    await trio.to_thread.run_sync(finished.wait, generous(30))
    await _until(lambda: ours.fileno() == -1)  # closed in the thread, just after it returns
    theirs.close()
