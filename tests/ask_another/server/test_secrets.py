"""API keys never leak: not in tool output, not in stderr logs, not in the SQLite file, not in the
CLI's output, even when the provider echoes the key back in an error message."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pycache import PYCACHE
from stdio_server import REPO, stdio_client_for

from ask_another.simulator import Fail, Simulator

pytestmark = pytest.mark.slow  # starts real server processes

FAKE_KEY = "sk-test-NEVER-SHOW-7d1e4c9a2b"


@pytest.fixture
def short_home() -> Iterator[Path]:
    """A home whose shared worker's socket path fits a unix socket (104-108 bytes): under
    pytest-xdist tmp_path is longer (.../popen-gw1/...), the server falls back to a private
    worker, and there is no shared worker's log to scan. Its worker is stopped afterwards."""
    root = Path(tempfile.mkdtemp(prefix="aa-secrets-"))
    try:
        yield root / "home"
    finally:
        for pid_file in (root / "home" / "gateway").glob("*.pid"):
            try:
                os.kill(int(pid_file.read_text()), signal.SIGTERM)
            except (OSError, ValueError):
                pass
        shutil.rmtree(root, ignore_errors=True)


def env_for(sim: Simulator, home: Path) -> dict[str, str]:
    return {
        "ASK_ANOTHER_HOME": str(home),
        "ASK_ANOTHER_LOG_LEVEL": "DEBUG",  # as much logging as there can be
        "MODEL_SIM": f"openai/m1;{FAKE_KEY};{sim.openai_base}",
        "MODEL_OTHER": f"openai/m2;{FAKE_KEY}x;{sim.openai_base}",
        "MODEL_BAD": f"{FAKE_KEY};openai/x;y;z",  # malformed, with the key in it
    }


def assert_no_key(where: str, text: str | bytes) -> None:
    data = text.encode() if isinstance(text, str) else text
    assert FAKE_KEY.encode() not in data, f"the API key leaked into {where}"
    assert FAKE_KEY[8:].encode() not in data, f"part of the API key leaked into {where}"


async def test_every_tool_over_stdio_keeps_the_key_secret(sim: Simulator, tmp_path: Path,
                                                         short_home: Path):
    home = short_home
    stderr_path = tmp_path / "stderr.log"
    outputs: list[str] = []
    with stderr_path.open("w") as stderr:
        async with stdio_client_for(env_for(sim, home), stderr) as client:
            outputs.append(client.instructions or "")
            outputs.append(repr((await client.list_tools()).tools))

            async def run(tool: str, **arguments: Any) -> None:
                result = await client.call_tool(tool, arguments)
                outputs.append(repr(result))

            await run("list_models")
            await run("search_families")
            await run("search_models", search="m")
            await run("completion", model="sim", prompt="hello")
            # Providers do echo keys: OpenAI's 401 says "Incorrect API key provided: sk-...".
            sim.script("m1", [Fail(401, f"Incorrect API key provided: {FAKE_KEY}.")])
            await run("completion", model="sim", prompt="hello again")
            sim.script("m2", [Fail(400, f"bad request for key {FAKE_KEY}x")])
            await run("completion", model="other", prompt="and once more")
            await run("completion", model="nope", prompt="x")
            await run("feedback", issue="all good", tool_name="completion")
    # The provider did receive the key (so the test really exercised it) ...
    assert sim.requests_for("m1")[0].api_key == FAKE_KEY
    assert any("Incorrect API key provided: ********" in o for o in outputs)
    # ... and it appears nowhere else.
    for n, output in enumerate(outputs):
        assert_no_key(f"tool output #{n}", output)
    log = stderr_path.read_text()
    assert "completion.finished" in log and "MODEL_BAD" in log  # the logs were really written
    assert_no_key("stderr", log)
    # The database, its WAL and shared-memory files; the shared gateway worker's log and pid file.
    files = [path for path in home.rglob("*") if path.is_file()]
    assert any(f.name.startswith("ask-another.sqlite3") for f in files)
    assert home / "gateway" / "gateway.log" in files
    for path in files:
        assert_no_key(str(path.relative_to(home)), path.read_bytes())


def test_cli_commands_keep_the_key_secret(sim: Simulator, tmp_path: Path):
    env = {**os.environ, **env_for(sim, tmp_path / "home"), "PYTHONPYCACHEPREFIX": str(PYCACHE)}
    # Each command really ran (a crash with no output would leak nothing either): its exit code
    # and a line it prints. doctor fails for MODEL_BAD; the others skip it and say so.
    expected = {"doctor": (1, b"PROBLEM: MODEL_BAD:"),
                "models": (0, b"openai/m1 (shorthand: sim)"),
                "ask": (0, b"[simulated m1] answer to: hello")}
    for args in (["doctor"], ["models"], ["ask", "sim", "hello"]):
        done = subprocess.run([sys.executable, "-m", "ask_another", *args], env=env, cwd=REPO,
                              capture_output=True, timeout=120)
        code, line = expected[args[0]]
        assert done.returncode == code, (args, done)
        assert line in done.stdout, (args, done.stdout)
        assert_no_key(f"{args[0]} stdout", done.stdout)
        assert_no_key(f"{args[0]} stderr", done.stderr)
