"""The shared gateway worker (SharedTransport, `ASK_ANOTHER_GATEWAY_SHARED=1`), real processes
against the simulator: one worker for every server on a home, its socket's mode, a killed worker
and the next call, its idle exit. Two real stdio servers on one home share it."""

from __future__ import annotations

import contextlib
import os
import signal
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
from stdio_server import stdio_client_for
from tool_results import text_of

from ask_another.config import Config, ModelEntry
from ask_another.errors import AskAnotherError, ProviderUnavailable, RateLimited
from ask_another.gateway import SharedTransport, open_gateway
from ask_another.runtime import open_runtime
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
    needle = f"--shared\0{home / 'gateway.sock'}\0".encode()
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
    with trio.fail_after(seconds):
        while not condition():  # type: ignore[operator]  # noqa: ASYNC110 - other processes
            await trio.sleep(0.05)


def entry(sim: Simulator) -> ModelEntry:
    env = {"MODEL_X": f"openai/m1;{KEY};{sim.openai_base}", "ASK_ANOTHER_HOME": "/tmp/unused"}
    return Config.from_env(env).models[0]


async def test_two_gateways_on_one_home_use_one_worker(sim: Simulator, home: Path):
    async with open_gateway(SharedTransport(home, [KEY], idle_exit=30), [KEY]) as first, \
            open_gateway(SharedTransport(home, [KEY], idle_exit=30), [KEY]) as second:
        one = await first.completion(entry(sim), "one")
        two = await second.completion(entry(sim), "two")
        pids = {first.statistics().worker_pid, second.statistics().worker_pid}
    assert (one.text, two.text) == ("[simulated m1] answer to: one",
                                    "[simulated m1] answer to: two")
    assert len(pids) == 1 and None not in pids and os.getpid() not in pids
    assert _workers(home) == list(pids)  # it outlives the servers that used it
    mode = stat.S_IMODE(os.stat(home / "gateway.sock").st_mode)
    assert mode == 0o600


async def test_a_worker_with_no_connection_exits_after_its_idle_time(sim: Simulator,
                                                                    home: Path):
    async with open_gateway(SharedTransport(home, [KEY], idle_exit=0.5), [KEY]) as gateway:
        await gateway.completion(entry(sim), "one")
        [pid] = _workers(home)
        # The connection closes after 0.5 s without a call, the worker 0.5 s later.
        await _until(lambda: not _alive(pid))
        assert not (home / "gateway.sock").exists()
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
        fresh = gateway
        with trio.fail_after(30):
            while fresh is gateway:
                await trio.sleep(0.05)
                with contextlib.suppress(AskAnotherError):
                    fresh = await runtime.gateway()
        result = await fresh.completion(config.models[0], "again")
        assert result.text == "[simulated m1] answer to: again"
        assert fresh.statistics().worker_pid not in (None, pid)
        assert _workers(home) == [fresh.statistics().worker_pid]


async def test_two_stdio_servers_on_one_home_share_one_worker(sim: Simulator, home: Path,
                                                              tmp_path: Path):
    env = {"ASK_ANOTHER_HOME": str(home), "ASK_ANOTHER_GATEWAY_SHARED": "1",
           "MODEL_SIM": f"openai/m1;{KEY};{sim.openai_base}", "PATH": os.environ["PATH"]}
    with (tmp_path / "one.log").open("w") as log_one, (tmp_path / "two.log").open("w") as log_two:
        async with stdio_client_for(env, log_one) as one, stdio_client_for(env, log_two) as two:
            answers = [await client.call_tool("completion", {"model": "sim", "prompt": prompt})
                       for client, prompt in ((one, "first"), (two, "second"))]
            shared = _workers(home)
            every = _any_workers(home)
    assert text_of(answers[0]).startswith("[simulated m1] answer to: first")
    assert text_of(answers[1]).startswith("[simulated m1] answer to: second")
    assert len(shared) == 1
    assert every == shared  # no server started a private worker


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


def test_the_shared_switch_is_parsed_and_off_by_default():
    base = {"ASK_ANOTHER_HOME": "/tmp/unused"}
    assert Config.from_env(base).gateway_shared is False
    assert Config.from_env(base | {"ASK_ANOTHER_GATEWAY_SHARED": "1"}).gateway_shared is True
    bad = Config.from_env(base | {"ASK_ANOTHER_GATEWAY_SHARED": "sometimes"})
    assert bad.gateway_shared is False
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
