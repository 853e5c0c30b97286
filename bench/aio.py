"""Benchmark of the asyncio face: `complete` through `ask_another.aio` against the trio face.

Both runtimes are open at once, each in a thread of its own (the trio one under `trio.run`, the
asyncio one under `asyncio.run`, as trio's guest on that loop), each with its gateway worker
process (the default transport of an embedding program), on one simulated provider in its own
process (no latency, so the rows measure our overhead, not a provider's). After a warm-up, the
rounds alternate a batch on one face and a batch on the other (the order swapped each round),
so both see the same machine load: three calls one after another (the per-call latency a host
sees; 160 rounds) or 20 at once (40 rounds). The ratio asyncio / trio is taken per block of
rounds (the medians of the calls each face made in it); the row judges the blocks' median ratio
and `extra` keeps their range and the load average. Target: at most 1.3x.
"""

from __future__ import annotations

import asyncio
import os
import queue
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import trio

from bench.report import Row

SUITE = "aio"
CONCURRENT = 20
Results = queue.Queue[list[float] | BaseException]  # a batch's figures, or the face's failure
TIMEOUT = 600.0  # per call: a worker's first start under a loaded machine takes long


def _config(home: Path, openai_base: str) -> object:
    from ask_another import Config

    return Config.from_env({"ASK_ANOTHER_HOME": str(home),
                            "MODEL_SIM": f"openai/m1;bench-key;{openai_base}",
                            "ASK_ANOTHER_LOG_LEVEL": "warning"})


async def _batch(complete: Callable[[str], Awaitable[object]], kind: str, size: int,
                 gather: Callable[..., Awaitable[object]]) -> list[float]:
    """Seconds per call: each of `size` calls one after another, or `size` at once (one figure:
    the batch's time over `size`)."""
    if kind == "sequential":
        times = []
        for i in range(size):
            start = time.perf_counter()
            await complete(f"question {i}")
            times.append(time.perf_counter() - start)
        return times
    start = time.perf_counter()
    await gather([complete(f"question {i}") for i in range(size)])
    return [(time.perf_counter() - start) / size]


def _trio_face(config: object, orders: queue.Queue[tuple[str, int] | None],
               results: Results) -> None:
    import ask_another

    async def gather(calls: list[Awaitable[object]]) -> None:
        async def one(call: Awaitable[object]) -> None:
            await call

        async with trio.open_nursery() as nursery:
            for call in calls:
                nursery.start_soon(one, call)

    async def main() -> None:
        async with ask_another.open_runtime(config) as rt:  # type: ignore[arg-type]
            async def complete(prompt: str) -> object:
                return await rt.complete("sim", prompt, timeout=TIMEOUT)

            while (order := await trio.to_thread.run_sync(orders.get)) is not None:
                results.put(await _batch(complete, order[0], order[1], gather))

    _reporting(lambda: trio.run(main), results)


def _asyncio_face(config: object, orders: queue.Queue[tuple[str, int] | None],
                  results: Results) -> None:
    import ask_another.aio

    async def gather(calls: list[Awaitable[object]]) -> None:
        await asyncio.gather(*calls)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        async with ask_another.aio.open_runtime(config) as rt:  # type: ignore[arg-type]
            async def complete(prompt: str) -> object:
                return await rt.complete("sim", prompt, timeout=TIMEOUT)

            while (order := await loop.run_in_executor(None, orders.get)) is not None:
                results.put(await _batch(complete, order[0], order[1], gather))

    _reporting(lambda: asyncio.run(main()), results)


def _reporting(face: Callable[[], object], results: Results
               ) -> None:
    """Run a face's thread; its failure goes to the measuring thread rather than leaving it
    waiting."""
    try:
        face()
    except BaseException as exc:
        results.put(exc)


def measure(rounds: int, blocks: int) -> list[Row]:
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    from ask_another.simulator import Simulator

    faces = {"trio": _trio_face, "asyncio": _asyncio_face}
    kinds = {"sequential": (3, rounds * 4), "concurrent": (CONCURRENT, rounds)}  # size, rounds
    figures: dict[tuple[str, str], list[list[float]]] = {
        (face, kind): [] for face in faces for kind in kinds}
    loads = [os.getloadavg()[0]]
    with Simulator.process(latency=0.0) as urls, tempfile.TemporaryDirectory() as tmp:
        channels = {face: (queue.Queue[tuple[str, int] | None](), Results())
                    for face in faces}
        threads = [threading.Thread(target=run, name=face, daemon=True,
                                    args=(_config(Path(tmp) / face, urls.openai_base),
                                          *channels[face]))
                   for face, run in faces.items()]
        def batch(face: str, kind: str, size: int) -> list[float]:
            orders, results = channels[face]
            orders.put((kind, size))
            got = results.get(timeout=2 * TIMEOUT)
            if isinstance(got, BaseException):
                raise RuntimeError(f"the {face} face failed") from got
            return got

        # One face after the other: each worker imports litellm alone (seconds of CPU), then
        # the warm-up (the store, the first connections).
        for thread in threads:
            thread.start()
            batch(thread.name, "sequential", 10)
            batch(thread.name, "concurrent", CONCURRENT)
        for kind, (size, count) in kinds.items():
            for i in range(count):
                for face in (list(faces) if i % 2 == 0 else list(reversed(faces))):
                    figures[(face, kind)].append(batch(face, kind, size))
            loads.append(os.getloadavg()[0])
        for face in faces:
            channels[face][0].put(None)
        for thread in threads:
            thread.join(timeout=120)
    rows = []
    for kind, (size, count) in kinds.items():
        # The ratio per block of rounds (each block both faces' calls at the same moments):
        # the median of the blocks' ratios is the row's, their range says how steady it was.
        block = max(1, count // blocks)
        ratios = []
        for b in range(0, count - block + 1, block):
            ours = [t for batch_ in figures[("asyncio", kind)][b:b + block] for t in batch_]
            theirs = [t for batch_ in figures[("trio", kind)][b:b + block] for t in batch_]
            ratios.append(statistics.median(ours) / statistics.median(theirs))
        ours_all = [t for batch_ in figures[("asyncio", kind)] for t in batch_]
        theirs_all = [t for batch_ in figures[("trio", kind)] for t in batch_]
        median = statistics.median(ratios)
        what = ("one call at a time" if kind == "sequential" else f"{CONCURRENT} at once")
        rows.append(Row(
            SUITE, f"complete through ask_another.aio vs the trio face ({what})",
            statistics.median(ours_all) * 1000, "ms/call",
            "the trio face, same run, interleaved", statistics.median(theirs_all) * 1000,
            target="<= 1.3x the trio face", passed=median <= 1.3,
            extra={"calls_each": len(ours_all) * (1 if kind == "sequential" else size),
                   "blocks": len(ratios), "ratio_median": round(median, 3),
                   "ratio_min": round(min(ratios), 3), "ratio_max": round(max(ratios), 3),
                   "load_average_1m": [round(x, 2) for x in loads],
                   "transport": "a gateway worker process each", "simulator_latency_s": 0.0}))
    return rows


def run(quick: bool) -> list[Row]:
    return measure(rounds=2 if quick else 40, blocks=2 if quick else 8)


if __name__ == "__main__":
    from bench.report import print_table

    print_table(run("--quick" in sys.argv))
