"""Shared output for every benchmark suite: one table on stdout and one JSON file per run.

A suite returns a list of `Row`s; `ratio` is always "ours / reference" for the metric named in
`unit`, so a reader can tell at a glance which way is better from the `better` column (for a row
measured in interleaved rounds, the median of the rounds' ratios, `extra["ratio_median"]`).
"""

from __future__ import annotations

import json
import os
import platform
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path


@dataclass
class Row:
    suite: str
    name: str
    value: float
    unit: str
    reference: str | None = None
    reference_value: float | None = None
    better: str = "lower"  # "lower" or "higher": which direction of `value` is better
    target: str | None = None
    passed: bool | None = None
    extra: dict[str, object] = field(default_factory=dict)

    @property
    def ratio(self) -> float | None:
        # A row measured in rounds judges its target on the median of the per-round ratios
        # (bench/http.py): the table shows that one, not the ratio of the two medians, so that a
        # row's "ok" and its ratio never disagree (1.50x shown beside NO).
        median = self.extra.get("ratio_median")
        if isinstance(median, int | float):
            return float(median)
        if self.reference_value in (None, 0):
            return None
        return self.value / self.reference_value  # type: ignore[operator]


def _fmt(value: float | None) -> str:
    if value is None:
        return "-"
    if value == 0 or abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 1:
        return f"{value:,.2f}"
    return f"{value:.3g}"


def print_table(rows: list[Row]) -> None:
    header = ["suite", "benchmark", "ours", "unit", "reference", "ref value", "ratio", "target",
              "ok"]
    body = [
        [
            r.suite,
            r.name,
            _fmt(r.value),
            r.unit,
            r.reference or "-",
            _fmt(r.reference_value),
            "-" if r.ratio is None else f"{r.ratio:.2f}x",
            r.target or "-",
            {True: "yes", False: "NO", None: "-"}[r.passed],
        ]
        for r in rows
    ]
    widths = [max(len(str(x)) for x in col) for col in zip(header, *body, strict=False)]
    for line in [header, ["-" * w for w in widths], *body]:
        print("  ".join(str(x).ljust(w) for x, w in zip(line, widths, strict=False)))


def write_json(rows: list[Row], *, quick: bool, directory: Path | None = None) -> Path:
    directory = directory or Path(os.environ.get("BENCH_RESULTS", "bench/results"))
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"bench-{time.strftime('%Y%m%d-%H%M%S')}{'-quick' if quick else ''}.json"
    payload = {
        "quick": quick,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "rows": [asdict(r) | {"ratio": r.ratio} for r in rows],
    }
    path.write_text(json.dumps(payload, indent=2))
    return path
