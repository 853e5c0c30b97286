"""Benchmark of `consensus`: five models at once against one model alone, in the same run.

One real server (stdio subprocess, as a client starts it: completions in its gateway worker
process) and the simulated provider in its own process with a fixed latency (200 ms). After a
warm-up of each kind, the rounds alternate a `completion` with one model and a `consensus` of
five models (same latency each), so both see the same machine load; the figures are the medians.
Target: the consensus within 1.3x of the single call, i.e. bounded by the slowest model rather
than the sum of five.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import trio

from bench.report import Row
from bench.server import REPO, _env, stop_shared_workers

SUITE = "consensus"
PANEL = ["m1", "m2", "m3", "m4", "m5"]


async def _rounds(openai_base: str, rounds: int, home: Path) -> tuple[list[float], list[float]]:
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    models = {f"MODEL_{name.upper()}": f"openai/{name};bench-key;{openai_base}"
              for name in PANEL}
    parameters = StdioServerParameters(command=sys.executable, args=["-m", "ask_another"],
                                       env=_env(home, **models), cwd=str(REPO))
    single: list[float] = []
    panel: list[float] = []
    with (home / "server-stderr.log").open("w") as errlog:
        async with Client(stdio_client(parameters, errlog=errlog),
                          read_timeout_seconds=300) as client:
            async def timed(tool: str, arguments: dict[str, object]) -> float:
                start = time.perf_counter()
                result = await client.call_tool(tool, arguments)
                elapsed = time.perf_counter() - start
                if result.is_error or "failed" in str(result.content[0]):
                    raise RuntimeError(f"{tool} failed: {result.content}")
                return elapsed

            await timed("completion", {"model": "m1", "prompt": "warm up"})
            await timed("consensus", {"models": PANEL, "prompt": "warm up"})
            for i in range(rounds):
                single.append(await timed("completion", {"model": "m1",
                                                         "prompt": f"question {i}"}))
                panel.append(await timed("consensus", {"models": PANEL,
                                                       "prompt": f"question {i}"}))
    return single, panel


def measure(rounds: int, latency: float) -> list[Row]:
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    from ask_another.simulator import Simulator

    with Simulator.process(latency=latency) as urls, tempfile.TemporaryDirectory() as tmp:
        try:
            single, panel = trio.run(_rounds, urls.openai_base, rounds, Path(tmp))
        finally:
            stop_shared_workers(Path(tmp))
    one, five = statistics.median(single), statistics.median(panel)
    extra: dict[str, object] = {
        "rounds": rounds, "latency_s": latency,
        "single_median_s": round(one, 3), "consensus_median_s": round(five, 3),
        "single_max_s": round(max(single), 3), "consensus_max_s": round(max(panel), 3),
        "sum_of_five_s": round(5 * one, 3),
    }
    return [Row(SUITE, f"consensus of {len(PANEL)} models vs one completion "
                f"({latency * 1000:.0f} ms each)", five, "s",
                "one completion, same server, same run", one, target="<= 1.3x one call",
                passed=five <= 1.3 * one, extra=extra)]


def run(quick: bool) -> list[Row]:
    return measure(rounds=3 if quick else 20, latency=0.2)


if __name__ == "__main__":
    from bench.report import print_table

    print_table(run("--quick" in sys.argv))
