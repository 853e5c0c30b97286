"""Run the benchmark suites: `uv run python -m bench [SUITE ...] [--quick]`.

Each suite is a module in this package with `async def run(quick: bool) -> list[Row]` or
`def run(quick: bool) -> list[Row]`; suites run one after another so they never share the CPU.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import sys

import trio

from bench.report import Row, print_table, write_json

SUITES = ["supervisors", "supervisors_schedules", "server", "research", "research_quality",
          "consensus", "http", "console", "aio", "soak", "mistakes", "tracing"]


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("suites", nargs="*", metavar="SUITE",
                        help=f"suites to run (default: all of {', '.join(SUITES)})")
    parser.add_argument("--quick", action="store_true",
                        help="tiny sizes: checks that the benchmarks run")
    args = parser.parse_args()
    unknown = sorted(set(args.suites) - set(SUITES))
    if unknown:
        parser.error(f"unknown suite(s) {', '.join(unknown)}; choose from {', '.join(SUITES)}")
    rows: list[Row] = []
    for name in args.suites or SUITES:
        module = importlib.import_module(f"bench.{name}")
        if inspect.iscoroutinefunction(module.run):
            rows += trio.run(module.run, args.quick)
        else:
            rows += module.run(args.quick)
    print_table(rows)
    path = write_json(rows, quick=args.quick)
    print(f"\nwrote {path}")
    failed = [r for r in rows if r.passed is False]
    if failed and not args.quick:
        names = ", ".join(r.name for r in failed)
        print(f"{len(failed)} target(s) missed: {names}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
