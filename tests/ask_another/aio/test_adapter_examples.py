"""Every example program in docs/examples/ is run by a test."""

from __future__ import annotations

from pathlib import Path

EXAMPLES = Path(__file__).parents[3] / "docs" / "examples"


def test_every_example_is_run_by_a_test() -> None:
    tests = Path(__file__).parent.parent.parent
    sources = "".join(p.read_text() for p in tests.rglob("test_*.py"))
    for path in EXAMPLES.glob("*.py"):
        assert f'"{path.stem}"' in sources, f"docs/examples/{path.name} is run by no test"
