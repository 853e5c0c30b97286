"""triotp's side of bench/supervisors.py, run by an interpreter that has triotp 0.3.1.

triotp needs Python >= 3.13 and this project runs on 3.11, so bench/supervisors.py runs this
file with the interpreter named by ``TRIOTP_PYTHON`` (make one with ``uv venv --python 3.13
/tmp/triotp && uv pip install --python /tmp/triotp/bin/python triotp==0.3.1``). It imports only
the standard library, trio and triotp, measures triotp and the same raw trio references in its
own interpreter (so triotp's ratios to raw trio are like for like), and prints one JSON object.

    python bench/supervisors_triotp.py --calls N --casts N --spawns N --repeats R
    python bench/supervisors_triotp.py --memory N     # one fresh process per size
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import statistics
import subprocess
import sys
import time
import types
from collections.abc import Callable
from typing import Any

import trio
from trio._core import wait_all_tasks_blocked  # type: ignore[attr-defined]
from triotp import dynamic_supervisor, gen_server, mailbox, supervisor  # type: ignore[import-not-found]


def _echo_module() -> types.ModuleType:
    """A gen_server callback module: replies with the message, counts casts."""
    module = types.ModuleType("bench_echo")

    async def init(_: Any) -> dict[str, int]:
        return {"casts": 0}

    async def handle_call(message: Any, caller: Any, state: dict[str, int]) -> Any:
        if message == "count":
            return gen_server.Reply(payload=state["casts"]), state
        return gen_server.Reply(payload=message), state

    async def handle_cast(message: Any, state: dict[str, int]) -> Any:
        state["casts"] += 1
        return gen_server.NoReply(), state

    async def handle_info(message: Any, state: Any) -> Any:
        return gen_server.NoReply(), state

    async def terminate(reason: Any, state: Any) -> None:
        pass

    module.init = init  # type: ignore[attr-defined]
    module.handle_call = handle_call  # type: ignore[attr-defined]
    module.handle_cast = handle_cast  # type: ignore[attr-defined]
    module.handle_info = handle_info  # type: ignore[attr-defined]
    module.terminate = terminate  # type: ignore[attr-defined]
    return module


ECHO = _echo_module()


def _node(main: Callable[[], Any]) -> float:
    async def run() -> float:
        mailbox._init()  # what triotp.node.run does before starting applications
        result: float = await main()
        return result

    return trio.run(run)


def triotp_call(n: int) -> float:
    async def main() -> float:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(gen_server.start, ECHO, None, "echo")
            await wait_all_tasks_blocked()
            await gen_server.call("echo", 0, timeout=5)
            start = time.perf_counter()
            for i in range(n):
                await gen_server.call("echo", i, timeout=5)  # as our call: a 5 s timeout
            elapsed = time.perf_counter() - start
            nursery.cancel_scope.cancel()
        return elapsed

    return _node(main)


def triotp_cast(n: int) -> float:
    """n casts, then a call answered after all of them (triotp's mailbox is unbuffered, so
    each cast waits for the server to take it)."""

    async def main() -> float:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(gen_server.start, ECHO, None, "echo")
            await wait_all_tasks_blocked()
            start = time.perf_counter()
            for i in range(n):
                await gen_server.cast("echo", i)
            count = await gen_server.call("echo", "count")
            elapsed = time.perf_counter() - start
            assert count == n, count
            nursery.cancel_scope.cancel()
        return elapsed

    return _node(main)


def triotp_spawn(n: int) -> float:
    """n temporary children started by 16 tasks through one dynamic supervisor; each child
    is a task that returns at once (triotp's children are tasks, not gen_servers); timed until
    every child has run."""

    async def main() -> float:
        left = n
        done = trio.Event()

        async def child() -> None:
            nonlocal left
            left -= 1
            if left == 0:
                done.set()

        spec = supervisor.child_spec(
            id="child", task=child, args=[], restart=supervisor.restart_strategy.TEMPORARY
        )
        async with trio.open_nursery() as nursery:
            mid = await nursery.start(dynamic_supervisor.start, supervisor.options())
            share, rest = divmod(n, 16)

            async def starter(count: int) -> None:
                for _ in range(count):
                    await dynamic_supervisor.start_child(mid, spec)

            start = time.perf_counter()
            async with trio.open_nursery() as starters:
                for i in range(16):
                    starters.start_soon(starter, share + (i < rest))
            await done.wait()
            elapsed = time.perf_counter() - start
            nursery.cancel_scope.cancel()
        return elapsed

    return _node(main)


def raw_call(n: int) -> float:
    async def main() -> float:
        request_send, request_receive = trio.open_memory_channel[int](1)
        reply_send, reply_receive = trio.open_memory_channel[int](1)

        async def server() -> None:
            async for message in request_receive:
                await reply_send.send(message)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(server)
            start = time.perf_counter()
            for i in range(n):
                await request_send.send(i)
                await reply_receive.receive()
            elapsed = time.perf_counter() - start
            await request_send.aclose()
        return elapsed

    return trio.run(main)


async def _noop() -> None:
    pass


def raw_spawn(n: int) -> float:
    async def main() -> float:
        start = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for _ in range(n):
                nursery.start_soon(_noop)
        return time.perf_counter() - start

    return trio.run(main)


def _timed(sample: Callable[[int], float], n: int) -> float:
    gc.collect()
    gc.disable()
    try:
        return sample(n)
    finally:
        gc.enable()


def compare(samples: dict[str, Callable[[int], float]], n: int, repeats: int) -> dict[str, float]:
    for sample in samples.values():
        _timed(sample, max(n // 10, 1))
    runs: dict[str, list[float]] = {name: [] for name in samples}
    for _ in range(repeats):
        for name, sample in samples.items():
            runs[name].append(_timed(sample, n) / n)
    return {name: statistics.median(values) for name, values in runs.items()}


def _current_rss_kib() -> int:
    with open("/proc/self/statm") as statm:
        pages = int(statm.read().split()[1])
    return pages * (os.sysconf("SC_PAGE_SIZE") // 1024)


def memory_child(count: int) -> None:
    """`count` idle gen_servers (each waiting on its mailbox); print the RSS delta as JSON."""

    async def main() -> float:
        async with trio.open_nursery() as nursery:
            await wait_all_tasks_blocked()
            before = _current_rss_kib()
            for _ in range(count):
                nursery.start_soon(gen_server.start, ECHO, None, None)
            await wait_all_tasks_blocked()
            after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            print(json.dumps({"count": count, "delta_kib": after - before}), flush=True)
            os._exit(0)
        return 0.0

    _node(main)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--casts", type=int, default=10_000)
    parser.add_argument("--spawns", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--memory", type=int, nargs="*", default=[])
    parser.add_argument("--memory-child", type=int)
    args = parser.parse_args()
    if args.memory_child is not None:
        memory_child(args.memory_child)
        return 0
    results: dict[str, Any] = {"python": sys.version.split()[0]}
    results["call"] = compare({"triotp": triotp_call, "raw": raw_call}, args.calls, args.repeats)
    results["cast"] = compare({"triotp": triotp_cast}, args.casts, args.repeats)
    results["spawn"] = compare({"triotp": triotp_spawn, "raw": raw_spawn}, args.spawns,
                               args.repeats)
    memory: dict[str, float] = {}
    for count in args.memory:
        done = subprocess.run([sys.executable, __file__, "--memory-child", str(count)],
                              capture_output=True, text=True, check=True, timeout=900)
        memory[str(count)] = json.loads(done.stdout.strip().splitlines()[-1])["delta_kib"]
    results["memory_kib"] = memory
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
