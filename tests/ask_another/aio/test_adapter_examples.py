"""The example programs in docs/examples/ as modules the adapter tests run."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

from ask_another.simulator import Reply, SimRequest, Step, ToolCalls
from ask_another.simulator import ToolCall as SimCall

EXAMPLES = Path(__file__).parents[3] / "docs" / "examples"


def example(name: str) -> ModuleType:
    """docs/examples/<name>.py, imported afresh."""
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def host_model(request: SimRequest) -> Step:
    """The framework's model in the adapter tests: a second opinion, a research job, the
    approval the job asks for, then an answer quoting the last tool result."""
    results = [m["content"] for m in request.messages if m["role"] == "tool"]
    if len(results) == 0:
        return ToolCalls([SimCall("second_opinion", {"model": "sim", "prompt": "Is 1 prime?"})])
    if len(results) == 1:
        return ToolCalls([SimCall("research", {"model": "sim", "query": "1 and primes"})])
    if len(results) == 2:
        asked = re.search(r"job_id='(r-\w+)', tool_call_id='(\w+)'", results[1])
        assert asked, results[1]
        return ToolCalls([SimCall("allow_job_tool", {"job_id": asked[1],
                                                     "tool_call_id": asked[2]})])
    return Reply(f"Done. {results[-1]}")


def test_every_example_is_run_by_a_test() -> None:
    tests = Path(__file__).parent.parent.parent
    sources = "".join(p.read_text() for p in tests.rglob("test_*.py"))
    for path in EXAMPLES.glob("*.py"):
        assert f'"{path.stem}"' in sources, f"docs/examples/{path.name} is run by no test"
