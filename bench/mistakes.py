"""A mistake the configuration can show answers at once: `ask-another ask` end to end.

An unknown model (`ask sin "Is 1 prime?"`), an empty prompt and a misspelled provider
(`MODEL_GPT4="opanai/gpt-4o;..."`) are refused before any gateway worker starts (no litellm
import), so each should answer in under 1.5 s on an idle machine (issue 41). Each is run as a
real subprocess, start to exit, in interleaved rounds with two references: `python -c pass` (the
interpreter's own start) and `ask-another --help` (the CLI's start, with nothing to check). Each
round runs the five commands in a rotated order, so a burst of load lands on all of them; the
load average is recorded each round. Every mistake must exit 1 with its one line, and the home
must hold no worker afterwards: a run that measured something else raises.

`--quick`: one round, no warm-up pass (five processes, a few seconds).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.report import Row
from bench.server import REPO, SERVER, _env

SUITE = "mistakes"
TARGET_S = 1.5
# Nothing listens there: a call that got past the checks would fail, not answer.
CLOSED = "http://127.0.0.1:9/v1"

MISTAKES = {
    "ask, an unknown model": (["ask", "sin", "Is 1 prime?"], "Model not allowed: 'sin'."),
    "ask, an empty prompt": (["ask", "sim", "  "], "the prompt is empty"),
    "ask, a misspelled provider": (["ask", "gpt4", "Is 1 prime?"],
                                   "MODEL_GPT4: litellm knows no provider 'opanai'"),
}
REFERENCES = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "ask-another --help": [*SERVER, "--help"],
}


def _command(name: str) -> list[str]:
    return [*SERVER, *MISTAKES[name][0]] if name in MISTAKES else REFERENCES[name]


def _timed(command: list[str], env: dict[str, str]
           ) -> tuple[float, subprocess.CompletedProcess[str]]:
    start = time.perf_counter()
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=120, check=False)
    return time.perf_counter() - start, done


def _check(name: str, expected: str, done: subprocess.CompletedProcess[str]) -> None:
    said = [line for line in done.stderr.splitlines() if not line.startswith("… ")]
    if done.returncode != 1 or not said or not said[0].startswith(expected):
        raise RuntimeError(f"{name}: expected exit 1 and {expected!r}, got {done.returncode}: "
                           f"{done.stderr[-400:]!r}")


def run(quick: bool) -> list[Row]:
    rounds = 1 if quick else 10
    samples: dict[str, list[float]] = {name: [] for name in [*MISTAKES, *REFERENCES]}
    loads: list[float] = []
    with tempfile.TemporaryDirectory(prefix="aa-mistakes-") as tmp:
        home = Path(tmp)
        env = _env(home, MODEL_SIM=f"openai/m1;key;{CLOSED}",
                   MODEL_GPT4=f"opanai/gpt-4o;key;{CLOSED}")
        names = list(samples)
        # A first pass not counted (not in quick mode): the bytecode and page caches warm, as a
        # person's second mistake finds them.
        for name in names if not quick else []:
            _timed(_command(name), env)
        for r in range(rounds):
            loads.append(os.getloadavg()[0])
            for name in names[r % len(names):] + names[:r % len(names)]:
                took, done = _timed(_command(name), env)
                if name in MISTAKES:
                    _check(name, MISTAKES[name][1], done)
                else:
                    done.check_returncode()
                samples[name].append(took)
        workers = list((home / "gateway").glob("*.pid")) if (home / "gateway").exists() else []
        if workers:
            raise RuntimeError(f"a mistake started a gateway worker: {workers}")
    loads.append(os.getloadavg()[0])
    extra: dict[str, object] = {
        "rounds": rounds, "load_average_1m": [round(x, 2) for x in loads],
        "samples_s": {name: [round(t, 3) for t in times] for name, times in samples.items()},
        "python_c_pass_s": round(statistics.median(samples["python -c pass"]), 3),
    }
    help_s = statistics.median(samples["ask-another --help"])
    rows = []
    for name in MISTAKES:
        median = statistics.median(samples[name])
        ratios = [m / h for m, h in zip(samples[name], samples["ask-another --help"],
                                        strict=True)]
        rows.append(Row(SUITE, name, median, "s", "ask-another --help", help_s,
                        target=f"< {TARGET_S:g} s (idle machine)", passed=median < TARGET_S,
                        extra=extra | {"ratio_median": statistics.median(ratios)}))
    return rows
