"""Benchmark of the `supervisors` actor runtime, side by side with raw trio and pykka.

Every figure is measured in the same run on the same machine, and each of our measurements is
interleaved with its references (ours, raw, pykka, ours, raw, pykka, ...) so that load from
other processes on a shared machine hits every side alike; the reported figure is the median of
the repeats. Each sample runs in its own `trio.run` and only the hot loop is timed.

Memory is measured in a fresh subprocess per size and kind (`python -m bench.supervisors
--memory N --kind ours|raw`), from the peak RSS (`ru_maxrss`) before and after spawning N idle
actors, so one size never pollutes the next.

The references are the floors a reader would reach for instead of our runtime:
- call: a raw trio memory-channel ping-pong between two tasks, and pykka's `ask`;
- cast: raw `send_nowait` into a memory channel drained by one task, and pykka's `tell`;
- spawn and exit: a bare `nursery.start_soon` of a task that returns at once, and pykka
  start/stop (pykka runs actors on threads, so its side is plain synchronous code).
"""

from __future__ import annotations

import argparse
import gc
import json
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import trio

from bench.report import Row

SUITE = "supervisors"

Sample = Callable[[int], float]
"""Runs `n` operations and returns the seconds the hot section took."""


@dataclass(frozen=True)
class Sizes:
    calls: int
    casts: int
    spawns: int
    pykka_spawns: int
    restarts: int
    repeats: int
    memory: tuple[int, ...]


QUICK = Sizes(calls=500, casts=5_000, spawns=300, pykka_spawns=50, restarts=20, repeats=3,
              memory=(1_000,))
FULL = Sizes(calls=20_000, casts=200_000, spawns=5_000, pykka_spawns=1_000, restarts=300,
             repeats=7, memory=(10_000, 100_000))


# --------------------------------------------------------------------------------------------
# Harness


def _timed(sample: Sample, n: int) -> float:
    # As timeit does: no cyclic GC inside the timed section, a clean heap before it.
    gc.collect()
    gc.disable()
    try:
        return sample(n)
    finally:
        gc.enable()


def compare(samples: dict[str, Sample], n: int, repeats: int) -> dict[str, float]:
    """Median seconds per operation for each sample, run interleaved after one warm-up each."""
    for sample in samples.values():
        _timed(sample, max(n // 10, 1))
    runs: dict[str, list[float]] = {name: [] for name in samples}
    for _ in range(repeats):
        for name, sample in samples.items():
            runs[name].append(_timed(sample, n) / n)
    return {name: statistics.median(values) for name, values in runs.items()}


# --------------------------------------------------------------------------------------------
# Raw trio references


def raw_call(n: int) -> float:
    """Ping-pong over two memory channels: the least a request-reply between tasks costs."""

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


def raw_cast(n: int) -> float:
    """`send_nowait` n messages into a channel; stops when the consumer has taken the last."""

    async def main() -> float:
        # Capacity n on both sides: the sender never meets backpressure, so this measures
        # enqueueing plus processing, not a retry policy.
        send, receive = trio.open_memory_channel[int](n)
        done = trio.Event()

        async def consumer() -> None:
            count = 0
            async for _ in receive:
                count += 1
                if count == n:
                    done.set()
                    return

        async with trio.open_nursery() as nursery:
            nursery.start_soon(consumer)
            # Let the consumer block on receive before the clock starts.
            await trio.lowlevel.checkpoint()
            start = time.perf_counter()
            for i in range(n):
                send.send_nowait(i)
            await done.wait()
            elapsed = time.perf_counter() - start
        return elapsed

    return trio.run(main)


async def _noop() -> None:
    pass


async def _started_noop(*, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
    task_status.started()


def raw_spawn(n: int) -> float:
    """n bare `nursery.start_soon` of a task that returns at once, until the nursery is empty."""

    async def main() -> float:
        start = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for _ in range(n):
                nursery.start_soon(_noop)
        return time.perf_counter() - start

    return trio.run(main)


def raw_start(n: int) -> float:
    """n sequential `await nursery.start(...)`: spawn and wait for "started", like spawn does."""

    async def main() -> float:
        start = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for _ in range(n):
                await nursery.start(_started_noop)
        return time.perf_counter() - start

    return trio.run(main)


# --------------------------------------------------------------------------------------------
# pykka references (threads: plain synchronous code)


def _pykka_echo_class() -> type:
    import pykka

    class Echo(pykka.ThreadingActor):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.count = 0

        def on_receive(self, message: object) -> object:
            if message == "count":
                return self.count
            self.count += 1
            return message

    return Echo


def pykka_ask(n: int) -> float:
    echo = _pykka_echo_class()
    ref = echo.start()
    try:
        ref.ask(0)  # the actor's thread is up before the clock starts
        start = time.perf_counter()
        for i in range(n):
            ref.ask(i)
        return time.perf_counter() - start
    finally:
        ref.stop()


def pykka_tell(n: int) -> float:
    """n `tell`s, then one `ask` that the actor answers only after processing all of them."""
    echo = _pykka_echo_class()
    ref = echo.start()
    try:
        ref.ask(0)
        start = time.perf_counter()
        for i in range(n):
            ref.tell(i)
        count = ref.ask("count")
        elapsed = time.perf_counter() - start
        assert count == n + 1, count  # the warm-up ask counted too
        return elapsed
    finally:
        ref.stop()


def pykka_start_stop(n: int) -> float:
    echo = _pykka_echo_class()
    start = time.perf_counter()
    for _ in range(n):
        echo.start().stop()
    return time.perf_counter() - start


# --------------------------------------------------------------------------------------------
# Memory (each size and kind in its own subprocess)


def _rss_kib() -> int:
    # ru_maxrss is in KiB on Linux (bytes on macOS; this benchmark runs on Linux).
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


async def _hold_raw(count: int) -> dict[str, float]:
    """count idle tasks, each blocked on receive from its own channel: a mailbox-only actor."""

    async def idle(receive: trio.MemoryReceiveChannel[object]) -> None:
        async for _ in receive:
            pass

    async with trio.open_nursery() as nursery:
        await trio.lowlevel.checkpoint()
        before = _rss_kib()
        senders = []
        for _ in range(count):
            send, receive = trio.open_memory_channel[object](16)
            senders.append(send)
            nursery.start_soon(idle, receive)
        await trio.sleep(0.05)  # every task has run to its first receive
        after = _rss_kib()
        nursery.cancel_scope.cancel()
    return {"before_kib": before, "after_kib": after}


MEMORY_KINDS: dict[str, Callable[[int], object]] = {"raw": _hold_raw}


def memory_child(kind: str, count: int) -> dict[str, float]:
    """The body of `--memory`: spawn `count` idle actors of `kind` and measure the RSS delta."""
    result: dict[str, float] = trio.run(MEMORY_KINDS[kind], count)  # type: ignore[arg-type]
    delta = result["after_kib"] - result["before_kib"]
    return result | {"kind": kind, "count": count, "delta_kib": delta,
                     "kib_per_actor": delta / count}


def measure_memory(kind: str, count: int) -> dict[str, float]:
    root = Path(__file__).resolve().parent.parent
    done = subprocess.run(
        [sys.executable, "-m", "bench.supervisors", "--memory", str(count), "--kind", kind],
        cwd=root, capture_output=True, text=True, check=False, timeout=600,
    )
    if done.returncode != 0:
        raise RuntimeError(f"memory benchmark {kind}/{count} failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


# --------------------------------------------------------------------------------------------
# The suite


def _us(seconds: float) -> float:
    return seconds * 1e6


def run(quick: bool) -> list[Row]:
    sizes = QUICK if quick else FULL
    rows: list[Row] = []

    call = compare({"raw": raw_call, "pykka": pykka_ask}, sizes.calls, sizes.repeats)
    rows.append(Row(SUITE, "call round trip: raw ping-pong (ref)", _us(call["raw"]), "µs/call"))
    rows.append(Row(SUITE, "call round trip: pykka ask (ref)", _us(call["pykka"]), "µs/call"))

    cast = compare({"raw": raw_cast, "pykka": pykka_tell}, sizes.casts, sizes.repeats)
    rows.append(Row(SUITE, "cast: raw channel (ref)", 1 / cast["raw"], "msg/s", better="higher"))
    rows.append(Row(SUITE, "cast: pykka tell (ref)", 1 / cast["pykka"], "msg/s",
                    better="higher"))

    spawn = compare({"raw": raw_spawn, "start": raw_start}, sizes.spawns, sizes.repeats)
    spawn |= compare({"pykka": pykka_start_stop}, sizes.pykka_spawns, sizes.repeats)
    rows.append(Row(SUITE, "spawn+exit: nursery.start_soon (ref)", _us(spawn["raw"]), "µs"))
    rows.append(Row(SUITE, "spawn+exit: nursery.start (ref)", _us(spawn["start"]), "µs"))
    rows.append(Row(SUITE, "spawn+exit: pykka start/stop (ref)", _us(spawn["pykka"]), "µs"))

    for count in sizes.memory:
        raw = measure_memory("raw", count)
        rows.append(Row(SUITE, f"idle tasks {count:,}: raw trio (ref)", raw["kib_per_actor"],
                        "KiB/actor", extra=raw))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.supervisors", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--memory", type=int, metavar="N",
                        help="measure the RSS of N idle actors in this process and print JSON")
    parser.add_argument("--kind", choices=sorted(MEMORY_KINDS), default="raw")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.memory is not None:
        if args.memory < 1:
            parser.error("--memory needs a positive count")
        print(json.dumps(memory_child(args.kind, args.memory)))
        return 0
    from bench.report import print_table

    print_table(run(args.quick))
    return 0


if __name__ == "__main__":
    sys.exit(main())
