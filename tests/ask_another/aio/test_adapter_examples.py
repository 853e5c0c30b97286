"""The example programs in docs/examples/ as modules the adapter tests run."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

EXAMPLES = Path(__file__).parents[3] / "docs" / "examples"


def example(name: str) -> ModuleType:
    """docs/examples/<name>.py, imported afresh."""
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_example_is_run_by_a_test() -> None:
    tests = Path(__file__).parent.parent.parent
    sources = "".join(p.read_text() for p in tests.rglob("test_*.py"))
    for path in EXAMPLES.glob("*.py"):
        assert f'"{path.stem}"' in sources, f"docs/examples/{path.name} is run by no test"
