"""Benchmark of the `supervisors` actor runtime, side by side with raw trio, pykka and triotp.

Every figure is measured in the same run on the same machine, and each of our measurements is
interleaved with its references (ours, raw, pykka, ours, raw, pykka, ...) so that load from
other processes on a shared machine hits every side alike; the reported figure is the median of
the repeats. Each sample runs in its own `trio.run` and only the hot loop is timed.

Memory is measured in a fresh subprocess per size and kind (`python -m bench.supervisors
--memory N --kind ours|raw`): the peak RSS (`ru_maxrss`) after spawning N idle actors minus the
RSS just before, so one size never pollutes the next; the median of a few processes is kept.

The call round trip is also measured in fresh processes, three rounds in a rotating order
(ours, raw trio, pykka, pykka pinned to one CPU; `--calls N --kind K`), with wall and CPU time
per call: see "The call round trip in fresh processes" below for why pykka's figure moves.

Restart latency has no reference: it is the time from an exception in a child's `handle_cast`
to the restarted child answering a call, under a one_for_one supervisor, crash reports included.
Run-loop passes and task steps per operation (load-independent) are recorded in the JSON extras.

The references are the floors a reader would reach for instead of our runtime:
- call: a raw trio memory-channel ping-pong between two tasks, the same over two asyncio
  Queues (under `asyncio.run`: what the round trip costs in the standard library's loop), and
  pykka's `ask`; the timeout's own cost is ours with the default 5 s timeout against ours with
  `timeout=None`;
- cast: raw `send_nowait` into a memory channel drained by one task, and pykka's `tell`;
- spawn and exit: see below; pykka start/stop runs actors on threads, so its side is plain
  synchronous code, one actor at a time.

Spawn and exit, exactly (the figure is total wall time / N, timed until everything has ended):
- ours, the target row: `STARTERS` tasks call `await sup.start_child(spec)` in a loop, N
  children in all, concurrently, under one DynamicSupervisor. Each child is temporary and ends
  on its own: its `init` casts itself a message and handling it calls `self.stop()`, so it goes
  through init (inside `start_child`, which returns only after init), its message loop,
  `terminate` and its exit. The clock stops when the last child has exited and the supervisor
  has answered `count_children()` with no children (asserted): a temporary child is not
  monitored, the supervisor drops exited ones when it looks. Every start is a call round trip
  to the supervisor (init runs in the supervisor's task), every child has its cancel scope.
- reference: one task calls `nursery.start_soon(noop)` N times; the clock stops when the nursery
  block exits, i.e. once every task has run and returned. These tasks wait for nothing and
  nobody is told they ended, so this is a floor, not an equivalent.
- extra rows, one child at a time: `await start_child` then `await terminate_child` (the
  supervisor's shutdown ladder), and bare `spawn` then `await ref.stop()`, each against N
  sequential `await nursery.start(fn)` (a task that reports "started" and returns), which
  also waits for its task at every step; and the supervised sequential figure against pykka.

triotp 0.3.1 needs Python >= 3.13: its rows come from bench/supervisors_triotp.py run by the
interpreter named in ``TRIOTP_PYTHON`` (see that file), which also measures raw trio in its own
interpreter; those rows say "not measured" when the variable is unset. triotp's figures are from
a separate process and interpreter, run once before ours, so compare them loosely. Its spawn
row is a triotp dynamic supervisor starting children that are plain tasks returning at once.
pykka's memory row is at the smallest size only (10,000 in a full run): each pykka actor is a
thread, and 100,000 threads is not practical here.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import logging
import os
import resource
import statistics
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pykka
import structlog
import trio
from trio._core import wait_all_tasks_blocked  # type: ignore[attr-defined]

from bench.report import Row
from supervisors import (
    Actor,
    ActorRef,
    Caller,
    ExitReason,
    child_spec,
    spawn,
    start_dynamic_supervisor,
    start_supervisor,
)

SUITE = "supervisors"

T = TypeVar("T")
Sample = Callable[[int], float]
"""Runs `n` operations and returns the seconds the hot section took."""


STARTERS = 16
"""Tasks starting children at once in the concurrent spawn benchmark (say, requests in flight)."""


@dataclass(frozen=True)
class Sizes:
    calls: int
    casts: int
    spawns: int
    pykka_spawns: int
    restarts: int
    repeats: int
    memory: tuple[int, ...]
    memory_runs: int
    crashed: int


QUICK = Sizes(calls=300, casts=3_000, spawns=200, pykka_spawns=30, restarts=20, repeats=3,
              memory=(1_000,), memory_runs=1, crashed=1_000)
FULL = Sizes(calls=10_000, casts=100_000, spawns=2_000, pykka_spawns=500, restarts=300,
             repeats=5, memory=(10_000, 100_000), memory_runs=3, crashed=100_000)


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


_instruments: list[trio.abc.Instrument] = []


def _run(main: Callable[[], Awaitable[T]]) -> T:
    """`trio.run`, with the instruments `scheduling` installs (none while timing)."""
    return trio.run(main, instruments=_instruments)


class _Scheduling(trio.abc.Instrument):
    def __init__(self) -> None:
        self.batches = 0
        self.steps = 0

    def before_io_wait(self, timeout: float) -> None:
        # Once per pass of trio's run loop: every task rescheduled in one pass runs in the next.
        self.batches += 1

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        self.steps += 1


def scheduling(sample: Sample, n: int) -> dict[str, float]:
    """Scheduler passes and task steps per operation: unlike times, these do not depend on
    the machine or its load. Setup costs cancel out in the difference of two sizes."""
    counts = []
    for size in (n, 2 * n):
        counter = _Scheduling()
        _instruments.append(counter)
        try:
            sample(size)
        finally:
            _instruments.remove(counter)
        counts.append(counter)
    return {"run_loop_passes": (counts[1].batches - counts[0].batches) / n,
            "task_steps": (counts[1].steps - counts[0].steps) / n}


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

    return _run(main)


def asyncio_call(n: int) -> float:
    """The same ping-pong over two `asyncio.Queue`s between two asyncio tasks."""

    async def main() -> float:
        requests: asyncio.Queue[int | None] = asyncio.Queue(1)
        replies: asyncio.Queue[int] = asyncio.Queue(1)

        async def server() -> None:
            while (message := await requests.get()) is not None:
                await replies.put(message)

        serving = asyncio.create_task(server())
        start = time.perf_counter()
        for i in range(n):
            await requests.put(i)
            await replies.get()
        elapsed = time.perf_counter() - start
        await requests.put(None)
        await serving
        return elapsed

    return asyncio.run(main())


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

    return _run(main)


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

    return _run(main)


def raw_start(n: int) -> float:
    """n sequential `await nursery.start(...)`: spawn and wait for "started", like spawn does."""

    async def main() -> float:
        start = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for _ in range(n):
                await nursery.start(_started_noop)
        return time.perf_counter() - start

    return _run(main)


# --------------------------------------------------------------------------------------------
# pykka references (threads: plain synchronous code)


class _PykkaEcho(pykka.ThreadingActor):
    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def on_receive(self, message: object) -> object:
        if message == "count":
            return self.count
        self.count += 1
        return message


def pykka_ask(n: int) -> float:
    ref = _PykkaEcho.start()
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
    ref = _PykkaEcho.start()
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
    start = time.perf_counter()
    for _ in range(n):
        _PykkaEcho.start().stop()
    return time.perf_counter() - start


# --------------------------------------------------------------------------------------------
# Our runtime


class _Echo(Actor):
    async def handle_call(self, msg: Any, caller: Caller) -> Any:
        return msg


class _Counter(Actor):
    async def init(self, total: int, done: trio.Event) -> None:
        self.left = total
        self.done = done

    async def handle_cast(self, msg: Any) -> None:
        self.left -= 1
        if self.left == 0:
            self.done.set()


class _Idle(Actor):
    pass


@dataclass
class _Tally:
    """Counts down the children of the concurrent spawn benchmark as they terminate."""

    left: int
    done: trio.Event = field(default_factory=trio.Event)


class _OneShot(Actor):
    """A child that ends on its own: init queues it one message, handling it stops the actor."""

    async def init(self, tally: _Tally) -> None:
        self.tally = tally
        self.ref.cast(None)

    async def handle_cast(self, msg: Any) -> None:
        self.stop()

    async def terminate(self, reason: ExitReason) -> None:
        self.tally.left -= 1
        if self.tally.left == 0:
            self.tally.done.set()


class _BenchCrash(Exception):
    """Raised on purpose by `_Crashy` to measure restarts."""


@dataclass
class _Probe:
    """Where each incarnation of `_Crashy` reports itself and the moment it crashed."""

    ref: ActorRef | None = None
    started: trio.Event = field(default_factory=trio.Event)
    crashed_at: float = 0.0


class _Crashy(Actor):
    async def init(self, probe: _Probe) -> None:
        self.probe = probe
        probe.ref = self.ref
        probe.started.set()

    async def handle_call(self, msg: Any, caller: Caller) -> Any:
        return msg

    async def handle_cast(self, msg: Any) -> None:
        self.probe.crashed_at = time.perf_counter()
        raise _BenchCrash("crash on purpose")


def ours_call(n: int, timeout: float | None = 5.0) -> float:
    """`await ref.call(msg)` n times, with the default 5 s timeout unless told otherwise."""

    async def main() -> float:
        async with trio.open_nursery() as nursery:
            ref = await spawn(nursery, _Echo)
            await ref.call(0)
            start = time.perf_counter()
            for i in range(n):
                await ref.call(i, timeout=timeout)
            elapsed = time.perf_counter() - start
            await ref.stop()
        return elapsed

    return _run(main)


def ours_call_no_timeout(n: int) -> float:
    return ours_call(n, timeout=None)


def ours_cast(n: int) -> float:
    """n `ref.cast(msg)`; stops when the actor has handled the last one."""

    async def main() -> float:
        done = trio.Event()
        async with trio.open_nursery() as nursery:
            # Mailbox of n, as the raw channel: no backpressure, so no retry policy is measured.
            ref = await spawn(nursery, _Counter, n, done, mailbox_size=n)
            start = time.perf_counter()
            for i in range(n):
                ref.cast(i)
            await done.wait()
            elapsed = time.perf_counter() - start
            await ref.stop()
        return elapsed

    return _run(main)


def ours_spawn_concurrent(n: int) -> float:
    """n children started by `STARTERS` tasks at once under a DynamicSupervisor, each ending on
    its own; until every child has exited and the supervisor has processed every exit."""

    async def main() -> float:
        tally = _Tally(n)
        spec = child_spec(_OneShot, tally, restart="temporary")
        share, rest = divmod(n, STARTERS)

        async def starter(count: int) -> None:
            for _ in range(count):
                await sup.start_child(spec)

        async with trio.open_nursery() as nursery:
            sup = await start_dynamic_supervisor(nursery)
            start = time.perf_counter()
            async with trio.open_nursery() as starters:
                for i in range(STARTERS):
                    starters.start_soon(starter, share + (i < rest))
            await tally.done.wait()
            # Every child has exited: the supervisor must now count none of them.
            counts = await sup.count_children()
            elapsed = time.perf_counter() - start
            assert counts.specs == 0, counts
            await sup.stop()
        return elapsed

    return _run(main)


def ours_spawn_supervised(n: int) -> float:
    """n sequential `start_child` + `terminate_child` under a DynamicSupervisor."""

    async def main() -> float:
        spec = child_spec(_Idle, restart="temporary")
        async with trio.open_nursery() as nursery:
            sup = await start_dynamic_supervisor(nursery)
            start = time.perf_counter()
            for _ in range(n):
                ref = await sup.start_child(spec)
                await sup.terminate_child(ref)
            elapsed = time.perf_counter() - start
            await sup.stop()
        return elapsed

    return _run(main)


def ours_spawn_bare(n: int) -> float:
    """n sequential `spawn` + `ref.stop()` in a plain nursery: the runtime without a supervisor."""

    async def main() -> float:
        async with trio.open_nursery() as nursery:
            start = time.perf_counter()
            for _ in range(n):
                ref = await spawn(nursery, _Idle)
                await ref.stop()
            elapsed = time.perf_counter() - start
        return elapsed

    return _run(main)


def ours_restart_latencies(n: int, *, crash_reports: bool = True) -> list[float]:
    """Seconds from a crash inside `handle_cast` to the restarted child answering a call,
    under a one_for_one supervisor, n times. `crash_reports=False` filters every log event out,
    to show what the crash reports cost."""

    async def main() -> list[float]:
        probe = _Probe()
        spec = child_spec(_Crashy, probe, id="crashy")
        latencies: list[float] = []
        async with trio.open_nursery() as nursery:
            # The default intensity (3 in 5 s) would give up at once: allow every restart.
            sup = await start_supervisor(nursery, [spec], "one_for_one", max_restarts=n + 6,
                                         max_seconds=3600)
            # The first restarts warm caches (linecache reads source files for tracebacks).
            for i in range(n + 5):
                old = probe.ref
                assert old is not None
                probe.started = trio.Event()
                old.cast("crash")
                await probe.started.wait()
                new = probe.ref
                assert new is not None and new is not old
                await new.call("ping")
                if i >= 5:
                    latencies.append(time.perf_counter() - probe.crashed_at)
            await sup.stop()
        return latencies

    # Crash reports are logged with their tracebacks, as in production, but to /dev/null as
    # JSON lines rather than to the terminal, so formatting them is part of the measurement.
    with open(os.devnull, "w") as sink:
        structlog.configure(
            processors=[structlog.processors.add_log_level,
                        structlog.processors.format_exc_info,
                        structlog.processors.JSONRenderer()],
            wrapper_class=structlog.make_filtering_bound_logger(
                logging.INFO if crash_reports else logging.CRITICAL),
            logger_factory=structlog.PrintLoggerFactory(sink),
            cache_logger_on_first_use=False,
        )
        try:
            return _run(main)
        finally:
            structlog.reset_defaults()


# --------------------------------------------------------------------------------------------
# Memory (each size and kind in its own subprocess)


def _peak_rss_kib() -> int:
    # ru_maxrss is in KiB on Linux (bytes on macOS; this benchmark runs on Linux).
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _current_rss_kib() -> int:
    """RSS now. The baseline must be the current RSS, not the peak: importing modules peaks
    higher than where the heap settles, and a peak baseline would hide the first megabytes
    the actors take."""
    try:
        with open("/proc/self/statm") as statm:
            pages = int(statm.read().split()[1])
    except OSError:
        return _peak_rss_kib()
    return pages * (os.sysconf("SC_PAGE_SIZE") // 1024)


async def _spawn_raw(nursery: trio.Nursery, count: int) -> list[object]:
    """count idle tasks, each blocked on receive from its own channel: a mailbox-only actor."""

    async def idle(receive: trio.MemoryReceiveChannel[object]) -> None:
        async for _ in receive:
            pass

    senders: list[object] = []
    for _ in range(count):
        send, receive = trio.open_memory_channel[object](16)
        senders.append(send)
        nursery.start_soon(idle, receive)
    return senders


async def _spawn_ours(nursery: trio.Nursery, count: int) -> list[object]:
    """count idle actors from `spawn`, each waiting on its (default-sized) mailbox."""
    return [await spawn(nursery, _Idle) for _ in range(count)]


MEMORY_KINDS: dict[str, Callable[[trio.Nursery, int], Awaitable[list[object]]]] = {
    "raw": _spawn_raw,
    "ours": _spawn_ours,
}


def pykka_memory_child(count: int) -> None:
    """`--memory N --kind pykka`: N idle pykka actors (threads); print the RSS delta as JSON."""
    before = _current_rss_kib()
    refs = [_PykkaEcho.start() for _ in range(count)]
    for ref in refs[-10:]:
        ref.ask(0)
    after = _peak_rss_kib()
    print(json.dumps({"kind": "pykka", "count": count, "delta_kib": after - before,
                      "kib_per_actor": (after - before) / count}), flush=True)
    pykka.ActorRegistry.stop_all(block=False)
    os._exit(0)


def triotp_results(sizes: Sizes) -> dict[str, Any] | str:
    """triotp's measurements from its own interpreter (see bench/supervisors_triotp.py), or
    why there are none."""
    python = os.environ.get("TRIOTP_PYTHON")
    if not python:
        return ("not measured: set TRIOTP_PYTHON to a Python >= 3.13 with triotp 0.3.1 "
                "(see bench/supervisors_triotp.py)")
    script = Path(__file__).resolve().parent / "supervisors_triotp.py"
    memory = [str(count) for count in sizes.memory]
    done = subprocess.run(
        [python, str(script), "--calls", str(sizes.calls), "--casts", str(sizes.casts // 10),
         "--spawns", str(sizes.spawns), "--repeats", str(sizes.repeats), "--memory", *memory],
        capture_output=True, text=True, check=False, timeout=1800,
    )
    if done.returncode != 0:
        return f"failed: {done.stderr.strip().splitlines()[-1:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


async def _all_idle() -> None:
    """Return once every other task is blocked (every actor idle in its mailbox).

    This is `trio.testing.wait_all_tasks_blocked`, taken from where trio defines it because
    importing trio.testing imports pytest (~1 s per measuring process). Counting runnable tasks
    is not enough: tasks in the run loop's current batch are not counted, and trio runs a batch
    in random order, so that returned before the new tasks had run in half the processes.
    """
    await wait_all_tasks_blocked()


def memory_child(kind: str, count: int, *, heap: bool = False) -> None:
    """The body of `--memory`: spawn `count` idle actors of `kind`, print the RSS delta as JSON.

    With `heap`, also trace Python allocations (tracemalloc): the bytes each actor holds on the
    Python heap (the RSS figure then includes tracemalloc's own overhead). Exits the process
    straight after printing: tearing down 100,000 tasks takes seconds here and is not measured.
    """

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            await _all_idle()
            if heap:
                tracemalloc.start()
            heap_before = tracemalloc.get_traced_memory()[0]
            before = _current_rss_kib()
            start = time.perf_counter()
            handles = await MEMORY_KINDS[kind](nursery, count)
            await _all_idle()
            elapsed = time.perf_counter() - start
            after = _peak_rss_kib()
            delta = after - before
            result = {"kind": kind, "count": len(handles), "before_kib": before,
                      "after_kib": after, "after_current_kib": _current_rss_kib(),
                      "delta_kib": delta, "kib_per_actor": delta / count,
                      "spawn_seconds": elapsed}
            if heap:
                heap_delta = tracemalloc.get_traced_memory()[0] - heap_before
                result["heap_bytes_per_actor"] = heap_delta / count
            print(json.dumps(result), flush=True)
            os._exit(0)

    trio.run(main)


def measure_memory(kind: str, count: int, *, heap: bool = False) -> dict[str, float]:
    root = Path(__file__).resolve().parent.parent
    done = subprocess.run(
        [sys.executable, "-m", "bench.supervisors", "--memory", str(count), "--kind", kind,
         *(["--heap"] if heap else [])],
        cwd=root, capture_output=True, text=True, check=False, timeout=600,
    )
    if done.returncode != 0:
        raise RuntimeError(f"memory benchmark {kind}/{count} failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


class _StatefulCrash(Actor):
    """An actor with some state that crashes on its first cast, with a local in the frame."""

    async def init(self) -> None:
        self.state = bytearray(1024)

    async def handle_cast(self, msg: Any) -> None:
        scratch = bytearray(1024)
        raise _BenchCrash(f"crash on purpose ({len(scratch)} bytes of scratch)")


def crashed_child(count: int) -> None:
    """`--crashed N`: N actors crash (each with 1 KiB of state and a 1 KiB local in the crashed
    frame) while a ref to each is kept; print the Python heap they still hold (tracemalloc)
    as JSON. Crash reports go through structlog to a processor that drops them."""

    def drop(*_: Any) -> Any:
        raise structlog.DropEvent

    structlog.configure(processors=[drop])

    async def main() -> None:
        refs: list[ActorRef] = []
        async with trio.open_nursery() as nursery:
            gc.collect()
            tracemalloc.start()
            before = tracemalloc.get_traced_memory()[0]
            start = time.perf_counter()
            for i in range(count):
                ref = await spawn(nursery, _StatefulCrash)
                ref.cast("crash")
                refs.append(ref)
                if i % 1000 == 999:
                    await _all_idle()
            await _all_idle()
        elapsed = time.perf_counter() - start
        assert not any(ref.alive for ref in refs)
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
        print(json.dumps({"count": count, "held_bytes": held, "bytes_per_actor": held / count,
                          "seconds": elapsed}), flush=True)
        os._exit(0)

    trio.run(main)


def measure_crashed(count: int) -> dict[str, float]:
    root = Path(__file__).resolve().parent.parent
    done = subprocess.run([sys.executable, "-m", "bench.supervisors", "--crashed", str(count)],
                          cwd=root, capture_output=True, text=True, check=False, timeout=1200)
    if done.returncode != 0:
        raise RuntimeError(f"crashed-actors benchmark failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


# --------------------------------------------------------------------------------------------
# The call round trip in fresh processes, rounds interleaved (against pykka's ask)
#
# pykka's ask is a round trip between two threads: the caller queues the message and blocks on
# a future, the actor's thread wakes, answers and wakes the caller. What that costs depends on
# where the two threads run more than on pykka: handed across two CPUs, each wake-up is an
# inter-processor wake of a CPU that may have gone idle (on a virtual machine, a halted vCPU
# the hypervisor must reschedule), tens of microseconds each; on one CPU it is a context
# switch. So the same code measured 14 µs and 80-95 µs on different runs. Each round here runs
# ours, raw trio, pykka, and pykka with the process pinned to one CPU, each in a fresh process
# (no state, thread or switch interval left by an earlier sample), and records wall and CPU
# time per call: a wall time far above the CPU time is time spent waiting for a wake-up.

CALL_KINDS: dict[str, Sample] = {"ours": ours_call, "raw": raw_call, "pykka": pykka_ask,
                                 "pykka_one_cpu": pykka_ask}


def call_child(kind: str, n: int) -> None:
    """`--calls N --kind K`: N call round trips of kind K in this fresh process; JSON out."""
    if kind.endswith("_one_cpu"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # before any thread starts
    sample = CALL_KINDS[kind]
    _timed(sample, max(n // 10, 1))
    cpu = time.process_time()
    wall = _timed(sample, n)
    cpu = time.process_time() - cpu
    print(json.dumps({"kind": kind, "us_wall": _us(wall / n), "us_cpu": _us(cpu / n)}),
          flush=True)


def fresh_call_rounds(n: int, rounds: int) -> dict[str, list[dict[str, float]]]:
    """Every kind of `CALL_KINDS` once per round, each in a fresh process, the order rotated
    from round to round."""
    root = Path(__file__).resolve().parent.parent
    kinds = list(CALL_KINDS)
    runs: dict[str, list[dict[str, float]]] = {kind: [] for kind in kinds}
    for r in range(rounds):
        for kind in kinds[r % len(kinds):] + kinds[:r % len(kinds)]:
            done = subprocess.run(
                [sys.executable, "-m", "bench.supervisors", "--calls", str(n), "--kind", kind],
                cwd=root, capture_output=True, text=True, check=False, timeout=600)
            if done.returncode != 0:
                raise RuntimeError(f"call benchmark {kind} failed:\n{done.stderr}")
            runs[kind].append(json.loads(done.stdout.strip().splitlines()[-1]))
    return runs


def _fresh_rows(runs: dict[str, list[dict[str, float]]], n: int) -> list[Row]:
    def median(kind: str, key: str = "us_wall") -> float:
        return statistics.median(run[key] for run in runs[kind])

    def spread(kind: str, key: str = "us_wall") -> list[float]:
        return [round(min(run[key] for run in runs[kind]), 2),
                round(max(run[key] for run in runs[kind]), 2)]

    ratios = [o["us_wall"] / p["us_wall"] for o, p in zip(runs["ours"], runs["pykka"],
                                                          strict=True)]
    extra: dict[str, object] = {
        "calls": n, "rounds": len(runs["ours"]), "statistic": "median of fresh processes",
        "ratio_range": [round(min(ratios), 3), round(max(ratios), 3)],
        "us_wall_range": {kind: spread(kind) for kind in runs},
        "us_cpu": {kind: round(median(kind, "us_cpu"), 2) for kind in runs},
        "loadavg": " ".join(Path("/proc/loadavg").read_text().split()[:3]),
        "runs": runs}
    return [
        Row(SUITE, "call round trip (fresh processes)", median("ours"), "µs/call",
            "pykka ask", median("pykka"), extra=extra),
        Row(SUITE, "call round trip (fresh processes)", median("ours"), "µs/call",
            "raw trio ping-pong", median("raw"), extra=extra),
        Row(SUITE, "pykka ask: across CPUs vs pinned to one", median("pykka"), "µs/call",
            "pykka ask, one CPU", median("pykka_one_cpu"), extra=extra),
    ]


# --------------------------------------------------------------------------------------------
# The suite


def _us(seconds: float) -> float:
    return seconds * 1e6


def _within(ratio: float | None, limit: float) -> bool | None:
    return None if ratio is None else ratio <= limit


def _triotp_row(rows: list[Row], name: str, ours: float, unit: str, triotp: Any,
                key: str, extra: dict[str, object], *, scale: Callable[[float], float] = _us,
                better: str = "lower") -> None:
    """A row of ours against triotp (from its own interpreter), or one saying why not."""
    if isinstance(triotp, str):
        rows.append(Row(SUITE, name, scale(ours), unit, "triotp", None, better=better,
                        extra={"triotp": triotp}))
        return
    measured = triotp[key]
    info: dict[str, object] = {"triotp_python": triotp["python"], "triotp": measured}
    if "raw" in measured:
        info["triotp_ratio_to_raw_trio_in_its_interpreter"] = measured["triotp"] / measured["raw"]
    rows.append(Row(SUITE, name, scale(ours), unit, f"triotp (py{triotp['python']})",
                    scale(measured["triotp"]), better=better, extra=extra | info))


def run(quick: bool) -> list[Row]:
    sizes = QUICK if quick else FULL
    rows: list[Row] = []
    note = {"repeats": sizes.repeats, "statistic": "median"}
    # triotp first, in its own interpreter: nothing of ours runs meanwhile.
    triotp = triotp_results(sizes)

    call = compare({"ours": ours_call, "raw": raw_call, "pykka": pykka_ask,
                    "ours_no_timeout": ours_call_no_timeout, "asyncio": asyncio_call},
                   sizes.calls, sizes.repeats)
    extra = note | {
        "calls": sizes.calls,
        "us_per_call": {k: _us(v) for k, v in call.items()},
        "scheduling_per_call": {k: scheduling(fn, 200) for k, fn in
                                [("ours", ours_call), ("ours_no_timeout", ours_call_no_timeout),
                                 ("raw", raw_call)]},
    }
    row = Row(SUITE, "call round trip", _us(call["ours"]), "µs/call",
              "raw trio ping-pong", _us(call["raw"]), target="<= 1.2x", extra=extra)
    row.passed = _within(row.ratio, 1.2)
    rows.append(row)
    rows.append(Row(SUITE, "call round trip (timeout=None)", _us(call["ours_no_timeout"]),
                    "µs/call", "raw trio ping-pong", _us(call["raw"]), extra=extra))
    row = Row(SUITE, "call timeout's own cost", _us(call["ours"]), "µs/call",
              "ours, timeout=None", _us(call["ours_no_timeout"]), target="<= 1.25x",
              extra=extra)
    row.passed = _within(row.ratio, 1.25)
    rows.append(row)
    rows.append(Row(SUITE, "call round trip", _us(call["ours"]), "µs/call",
                    "asyncio Queue ping-pong", _us(call["asyncio"]), extra=extra))
    rows.append(Row(SUITE, "call round trip", _us(call["ours"]), "µs/call", "pykka ask",
                    _us(call["pykka"]), extra=extra))
    _triotp_row(rows, "call round trip", call["ours"], "µs/call", triotp, "call", extra)
    rows += _fresh_rows(fresh_call_rounds(sizes.calls, 3), sizes.calls)

    cast = compare({"ours": ours_cast, "raw": raw_cast, "pykka": pykka_tell}, sizes.casts,
                   sizes.repeats)
    extra = note | {
        "messages": sizes.casts,
        "includes": "enqueue + handling every message",
        "scheduling_per_message": {k: scheduling(fn, 500) for k, fn in
                                   [("ours", ours_cast), ("raw", raw_cast)]},
    }
    row = Row(SUITE, "cast throughput", 1 / cast["ours"], "msg/s", "raw trio channel",
              1 / cast["raw"], better="higher", target=">= 0.5x", extra=extra)
    row.passed = None if row.ratio is None else row.ratio >= 0.5
    rows.append(row)
    rows.append(Row(SUITE, "cast throughput", 1 / cast["ours"], "msg/s", "pykka tell",
                    1 / cast["pykka"], better="higher", extra=extra))
    _triotp_row(rows, "cast throughput", cast["ours"], "msg/s", triotp, "cast", extra,
                scale=lambda seconds: 1 / seconds, better="higher")

    spawn_ = compare({"ours": ours_spawn_concurrent, "raw": raw_spawn}, sizes.spawns,
                     sizes.repeats)
    extra = note | {
        "spawns": sizes.spawns,
        "starters": STARTERS,
        "ours": f"{STARTERS} tasks await start_child concurrently under one DynamicSupervisor; "
                "each temporary child casts itself one message in init and stops on it; timed "
                "until every child has exited and count_children() reports none",
        "reference": "one task calls nursery.start_soon(noop) n times; timed until the "
                     "nursery block exits (every task has run)",
        "us_per_spawn": {k: _us(v) for k, v in spawn_.items()},
        "scheduling_per_spawn": {k: scheduling(fn, 200) for k, fn in
                                 [("ours", ours_spawn_concurrent), ("raw", raw_spawn)]},
    }
    row = Row(SUITE, "spawn+exit (supervised, concurrent)", _us(spawn_["ours"]), "µs",
              "nursery.start_soon", _us(spawn_["raw"]), target="<= 6x", extra=extra)
    row.passed = _within(row.ratio, 6)
    rows.append(row)
    _triotp_row(rows, "spawn+exit (supervised, concurrent)", spawn_["ours"], "µs", triotp,
                "spawn", extra)

    one = compare({"ours": ours_spawn_supervised, "bare": ours_spawn_bare, "start": raw_start},
                  sizes.spawns, sizes.repeats)
    one |= compare({"pykka": pykka_start_stop}, sizes.pykka_spawns, sizes.repeats)
    extra = note | {
        "spawns": sizes.spawns,
        "pykka_spawns": sizes.pykka_spawns,
        "ours": "one at a time: await start_child, then await terminate_child",
        "bare": "one at a time: await spawn, then await ref.stop()",
        "reference": "one at a time: await nursery.start(fn), fn reports started and returns",
        "us_per_spawn": {k: _us(v) for k, v in one.items()},
    }
    rows.append(Row(SUITE, "spawn+exit (supervised, one at a time)", _us(one["ours"]), "µs",
                    "await nursery.start", _us(one["start"]), extra=extra))
    rows.append(Row(SUITE, "spawn+exit (supervised, one at a time)", _us(one["ours"]), "µs",
                    "pykka start/stop", _us(one["pykka"]), extra=extra))
    rows.append(Row(SUITE, "spawn+exit (bare spawn/stop, one at a time)", _us(one["bare"]), "µs",
                    "await nursery.start", _us(one["start"]), extra=extra))

    latencies = ours_restart_latencies(sizes.restarts)
    unlogged = ours_restart_latencies(sizes.restarts, crash_reports=False)
    cut = statistics.quantiles(latencies, n=10)
    rows.append(Row(SUITE, "restart latency (one_for_one)", _us(statistics.median(latencies)),
                    "µs", extra={"restarts": len(latencies), "statistic": "median",
                                 "p10_us": _us(cut[0]), "p90_us": _us(cut[-1]),
                                 "max_us": _us(max(latencies)),
                                 "median_us_without_crash_reports":
                                     _us(statistics.median(unlogged)),
                                 "logging": "structlog JSON lines to /dev/null, tracebacks "
                                            "formatted",
                                 "measured": "crash in handle_cast -> restarted child answers"}))

    ours_by_count: dict[int, float] = {}
    for count in sizes.memory:
        # Fresh processes agree to a few KiB; the median of a few guards against a stray one.
        runs: dict[str, list[dict[str, float]]] = {"ours": [], "raw": []}
        for _ in range(sizes.memory_runs):
            for kind, results in runs.items():
                results.append(measure_memory(kind, count))
        ours_kib = statistics.median(r["delta_kib"] for r in runs["ours"])
        raw_kib = statistics.median(r["delta_kib"] for r in runs["raw"])
        ours_by_count[count] = ours_kib / count
        memory: dict[str, object] = {
            "statistic": f"median of {sizes.memory_runs} processes",
            "ours_kib_per_actor": ours_kib / count,
            "raw_kib_per_actor": raw_kib / count,
            "measured": "peak RSS after spawning minus RSS before, in a fresh process",
            "ours": "spawn(nursery, Idle) per actor, default mailbox",
            "runs": runs,
        }
        name = f"idle actors ({count:,})"
        row = Row(SUITE, name, ours_kib / count, "KiB/actor", "raw idle trio tasks",
                  raw_kib / count, extra=memory)
        if count >= 100_000:
            memory["ours_mib"] = ours_kib / 1024
            row.target = "< 1 GiB in all"
            row.passed = ours_kib < 1024 * 1024
        rows.append(row)
        if isinstance(triotp, str):
            rows.append(Row(SUITE, name, ours_kib / count, "KiB/actor", "triotp", None,
                            extra={"triotp": triotp}))
        elif str(count) in triotp["memory_kib"]:
            rows.append(Row(SUITE, name, ours_kib / count, "KiB/actor",
                            f"triotp gen_servers (py{triotp['python']})",
                            triotp["memory_kib"][str(count)] / count, extra=memory))
    crashed = measure_crashed(sizes.crashed)
    row = Row(SUITE, f"crashed actors held by refs ({sizes.crashed:,})",
              crashed["held_bytes"] / 2**20, "MiB", target="< 50 MiB at 100,000",
              extra=crashed | {"measured": "tracemalloc: Python heap still held after each "
                                           "actor crashed (1 KiB state, 1 KiB local in the "
                                           "crashed frame), a ref kept to each"})
    if sizes.crashed >= 100_000:
        row.passed = crashed["held_bytes"] < 50 * 2**20
    rows.append(row)
    pykka_count = min(sizes.memory)
    pykka_kib = measure_memory("pykka", pykka_count)["delta_kib"]
    rows.append(Row(SUITE, f"idle actors ({pykka_count:,})", ours_by_count[pykka_count],
                    "KiB/actor", "pykka idle actors (threads)", pykka_kib / pykka_count,
                    extra={"pykka_count": pykka_count}))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.supervisors", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--memory", type=int, metavar="N",
                        help="measure the RSS of N idle actors in this process and print JSON")
    parser.add_argument("--calls", type=int, metavar="N",
                        help="time N call round trips of --kind in this process; print JSON")
    parser.add_argument("--kind", choices=sorted({*MEMORY_KINDS, "pykka", *CALL_KINDS}),
                        default="raw")
    parser.add_argument("--crashed", type=int, metavar="N",
                        help="measure the heap N crashed actors hold through kept refs; JSON")
    parser.add_argument("--heap", action="store_true",
                        help="with --memory: also trace the Python heap (slower)")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.calls is not None:
        call_child(args.kind, args.calls)
        return 0
    if args.crashed is not None:
        crashed_child(args.crashed)
        return 0
    if args.memory is not None:
        if args.memory < 1:
            parser.error("--memory needs a positive count")
        if args.kind == "pykka":
            pykka_memory_child(args.memory)
        memory_child(args.kind, args.memory, heap=args.heap)
    from bench.report import print_table

    print_table(run(args.quick))
    return 0


if __name__ == "__main__":
    sys.exit(main())
