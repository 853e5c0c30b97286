"""The gateway's worker process (ProcessTransport), against the simulator over loopback HTTP:
what only the worker has (its own process, idle exit, crash and restart). What both transports
do is tested on both in test_gateway.py."""

from __future__ import annotations

import contextlib
import os
import signal
from functools import partial

import pytest
import trio

from ask_another.config import Config, ModelEntry
from ask_another.errors import AskAnotherError, MalformedResponse, ProviderUnavailable, RateLimited
from ask_another.gateway import ProcessTransport, open_gateway
from ask_another.runtime import open_runtime
from ask_another.simulator import Fail, Malformed, Reply, Simulator, Slow

pytestmark = pytest.mark.slow  # starts real server processes

KEY = "sk-test-worker-0123456789"


def entry(sim: Simulator, model: str = "openai/m1") -> ModelEntry:
    env = {"MODEL_X": f"{model};{KEY};{sim.openai_base}", "ASK_ANOTHER_HOME": "/tmp/unused"}
    return Config.from_env(env).models[0]


async def test_a_completion_runs_in_the_worker_process(sim: Simulator):
    sim.script("gpt-4o", [Reply("ok", usage={"prompt_tokens": 1000, "completion_tokens": 1000})])
    async with open_gateway(ProcessTransport([KEY]), [KEY]) as gateway:
        result = await gateway.completion(entry(sim, "openai/gpt-4o"), "price?")
        pid = gateway.statistics().worker_pid
    assert pid is not None and pid != os.getpid()
    assert result.text == "ok"
    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (1000, 1000)
    assert result.usage.cost_usd == pytest.approx(0.0125)  # priced by litellm in the worker


async def test_failures_arrive_typed_and_scrubbed_of_the_key(sim: Simulator):
    sim.script("m1", [Fail(429, f"slow down, {KEY} is over quota"), Malformed()])
    async with open_gateway(ProcessTransport([KEY]), [KEY]) as gateway:
        with pytest.raises(RateLimited) as limited:
            await gateway.completion(entry(sim), "a")
        with pytest.raises(MalformedResponse):
            await gateway.completion(entry(sim), "b")
    assert "slow down" in str(limited.value)
    assert KEY not in str(limited.value)
    assert limited.value.status == 429


async def test_cancelling_the_caller_aborts_the_request_in_the_worker(sim: Simulator):
    # A provider that reads the request and never answers, and notes when the client hangs up.
    hung_up = trio.Event()

    async def never_answer(stream: trio.SocketStream) -> None:
        while await stream.receive_some(65536):
            pass
        hung_up.set()

    async with trio.open_nursery() as nursery:
        [listener] = await nursery.start(partial(trio.serve_tcp, never_answer, 0, host="127.0.0.1"))
        port = listener.socket.getsockname()[1]
        silent = Config.from_env({"MODEL_X": f"openai/m1;{KEY};http://127.0.0.1:{port}/v1",
                                  "ASK_ANOTHER_HOME": "/tmp/unused"}).models[0]
        async with open_gateway(ProcessTransport([KEY]), [KEY]) as gateway:
            await gateway.completion(entry(sim), "first")  # the worker is up and has litellm
            with trio.move_on_after(1.0) as waited:
                await gateway.completion(silent, "wait forever", timeout=60)
            assert waited.cancelled_caught
            assert gateway.statistics().in_flight == 0
            with trio.fail_after(5):
                await hung_up.wait()  # the worker aborted the HTTP request
            # ... and is still serving.
            result = await gateway.completion(entry(sim), "next")
        nursery.cancel_scope.cancel()
    assert result.text == "[simulated m1] answer to: next"


async def test_a_killed_worker_fails_its_calls_and_the_supervisor_starts_a_new_one(
        sim: Simulator, tmp_path):
    sim.script("m1", [Slow(30)])
    config = Config.from_env({"MODEL_X": f"openai/m1;{KEY};{sim.openai_base}",
                              "ASK_ANOTHER_HOME": str(tmp_path)})
    async with open_runtime(config, prewarm_after=0) as runtime:  # the default: a worker
        gateway = await runtime.gateway()
        failure: list[BaseException] = []

        async def waiting_call() -> None:
            try:
                await gateway.completion(config.models[0], "never answered")
            except ProviderUnavailable as exc:
                failure.append(exc)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(waiting_call)
            with trio.fail_after(30):
                while not sim.requests_for("m1"):  # noqa: ASYNC110 - the request is in the worker
                    await trio.sleep(0.05)
            pid = gateway.statistics().worker_pid
            assert pid is not None
            os.kill(pid, signal.SIGKILL)
        assert "worker" in str(failure[0])
        fresh = gateway
        with trio.fail_after(30):
            while fresh is gateway:
                await trio.sleep(0.05)
                # Between the crash and the restart the registry has no gateway for a moment.
                with contextlib.suppress(AskAnotherError):
                    fresh = await runtime.gateway()
        result = await fresh.completion(config.models[0], "again")
    assert result.text == "[simulated m1] answer to: again"
    assert fresh.statistics().worker_pid != pid


async def test_an_idle_worker_exits_and_the_next_call_starts_a_new_one(sim: Simulator):
    async with open_gateway(ProcessTransport([KEY], idle_exit=0.5), [KEY]) as gateway:
        with trio.fail_after(30):
            while gateway.statistics().worker_pid is None:  # noqa: ASYNC110 - a process starts
                await trio.sleep(0.05)
        first = gateway.statistics().worker_pid
        assert (await gateway.completion(entry(sim), "one")).text.endswith("one")
        assert gateway.statistics().worker_pid == first  # a call keeps it
        with trio.fail_after(10):
            while gateway.statistics().worker_pid is not None:  # noqa: ASYNC110 - idle exit
                await trio.sleep(0.05)
        assert first is not None
        with pytest.raises(ProcessLookupError):
            os.kill(first, 0)  # gone, and reaped
        result = await gateway.completion(entry(sim), "two")
        second = gateway.statistics().worker_pid
    assert result.text == "[simulated m1] answer to: two"
    assert second is not None and second != first


async def test_a_call_longer_than_the_idle_time_keeps_its_worker(sim: Simulator):
    sim.script("m1", [Slow(1.5)])
    async with open_gateway(ProcessTransport([KEY], idle_exit=0.5), [KEY]) as gateway:
        result = await gateway.completion(entry(sim), "slow")
    assert result.text == "[simulated m1] answer to: slow"


def test_the_idle_time_is_parsed():
    config = Config.from_env({"ASK_ANOTHER_GATEWAY_IDLE": "30", "ASK_ANOTHER_HOME": "/x"})
    assert config.gateway_idle == 30.0
    bad = Config.from_env({"ASK_ANOTHER_GATEWAY_IDLE": "soon", "ASK_ANOTHER_HOME": "/x"})
    assert bad.gateway_idle == 900.0
    assert [p.variable for p in bad.problems] == ["ASK_ANOTHER_GATEWAY_IDLE"]


@pytest.mark.parametrize(("value", "expected", "problems"), [
    ("", None, 0), ("1", True, 0), ("off", False, 0), ("maybe", None, 1)])
def test_the_worker_switch_is_parsed(value: str, expected: bool | None, problems: int):
    config = Config.from_env({"ASK_ANOTHER_GATEWAY_PROCESS": value,
                              "ASK_ANOTHER_HOME": "/tmp/unused"})
    assert config.gateway_process is expected
    assert len(config.problems) == problems


def test_litellms_import_does_not_read_the_users_dotenv_file(tmp_path):
    # Clients start the server in the user's project: its .env is not ours to load.
    import subprocess
    import sys

    (tmp_path / ".env").write_text("ASK_ANOTHER_DOTENV_PROBE=loaded\n")
    probe = ("import os; from ask_another.gateway import _litellm; _litellm.load(); "
             "print(os.environ.get('ASK_ANOTHER_DOTENV_PROBE'))")
    env = {k: v for k, v in os.environ.items() if k != "LITELLM_MODE"}
    done = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == "None", done.stdout
