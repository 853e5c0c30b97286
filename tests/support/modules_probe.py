"""`python tests/support/modules_probe.py` runs `python -m ask_another` as it is, plus a probe: on
SIGUSR1 the process writes the names of the modules it has imported, one a line, to the file
named by `ASK_ANOTHER_TEST_MODULES_FILE`. What the server process itself holds in `sys.modules`
can then be read from outside, apart from its gateway worker (a separate process, not probed).
"""

from __future__ import annotations

import os
import runpy
import signal
import sys
from pathlib import Path
from types import FrameType

PROBE = Path(__file__).resolve()


def _dump(_signum: int, _frame: FrameType | None) -> None:
    path = Path(os.environ["ASK_ANOTHER_TEST_MODULES_FILE"])
    partial = path.with_suffix(".partial")
    partial.write_text("\n".join(sorted(sys.modules)))
    partial.replace(path)  # a reader never sees half a list


def modules_of(pid: int, path: Path) -> set[str]:
    """Signal the probed process `pid` and return the modules it has imported."""
    import time

    path.unlink(missing_ok=True)
    os.kill(pid, signal.SIGUSR1)
    deadline = time.monotonic() + 10
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"process {pid} did not write its module list")
        time.sleep(0.02)
    return set(path.read_text().split())


def probed_pid(marker: str) -> int:
    """The one running probe whose environment holds `marker` (e.g. its ASK_ANOTHER_HOME=...)."""
    from processes import processes_with  # here: the probed process imports nothing more

    found = [pid for pid, cmdline in processes_with(marker) if str(PROBE).encode() in cmdline]
    if len(found) != 1:
        raise LookupError(f"expected one probed server, found {found}")
    return found[0]


if __name__ == "__main__":
    signal.signal(signal.SIGUSR1, _dump)
    sys.argv = ["ask_another", *sys.argv[1:]]
    runpy.run_module("ask_another", run_name="__main__", alter_sys=True)
