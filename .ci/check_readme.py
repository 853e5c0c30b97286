#!/usr/bin/env python3
"""Walk the README's commands as a new user would and check what each prints.

A fresh clone of this repository's HEAD in a temporary directory, with its own virtualenv (the
first `uv run` makes it), its own tool directory for `uv tool install` and its own
ASK_ANOTHER_HOME; no MODEL_* variable from the caller. Every step names the command as the
README (or docs/server.md) writes it, and the check fails if that text is no longer there: the
README and this script change together. Four substitutions only: `/path/to/ask-another` is the
clone, `/home/you/.local/bin` the directory `uv tool install` put `ask-another` in, the
simulator's port 8780 is a free one, and `/tmp/ask-another-constraints.txt` is in the walk's
temporary directory.

Last, the README's test command runs on the fresh clone: the whole suite, as a newcomer runs it
(the TypeScript client installs itself there; PostgreSQL and Chromium come from the machine).
`.ci/run` relies on this run instead of one of its own, so CI runs the suite once.

Run it with any Python 3.11+ (standard library only): `python3 .ci/check_readme.py`. `.ci/run`
runs it last. Exit 0 when every step printed what it should.
"""

from __future__ import annotations

import json
import os
import pty
import re
import select
import shlex
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOCS = (REPO / "README.md").read_text() + (REPO / "docs" / "server.md").read_text()
WHEEL = "dist/ask_another-0.1.0-py3-none-any.whl"
TEST_COMMAND = "uv run pytest -n auto"  # the README's Development block: the whole suite


class CheckFailed(Exception):
    pass


def documented(command: str) -> None:
    if command not in DOCS:
        raise CheckFailed(f"the README no longer shows {command!r}: update .ci/check_readme.py")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Walk:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.clone = root / "ask-another"
        self.port = free_port()
        self.env = {k: v for k, v in os.environ.items()
                    if not k.startswith(("MODEL_", "ASK_ANOTHER_", "VIRTUAL_ENV", "UV_PROJECT"))
                    # CI's setting, not a newcomer's: with it every server the suite starts
                    # would compile the MCP SDK again.
                    and k != "PYTHONDONTWRITEBYTECODE"}
        self.env.update(ASK_ANOTHER_HOME=str(root / "home"), UV_TOOL_DIR=str(root / "tools"),
                        UV_TOOL_BIN_DIR=str(root / "bin"), NO_COLOR="1")
        self.steps = 0

    def text(self, command: str) -> str:
        """The README's command as run here."""
        return (command.replace("/path/to/ask-another", str(self.clone))
                .replace("/home/you/.local/bin", str(self.root / "bin"))
                .replace("8780", str(self.port))
                .replace("/tmp/ask-another-constraints.txt", str(self.root / "constraints.txt")))

    def run(self, command: str, *expected: str, where: str = "stdout", code: int = 0,
            env: dict[str, str] | None = None, argv: list[str] | None = None,
            timeout: float = 600, label: str = "") -> str:
        """Run the README's `command` (or, for an installed program, `argv` under `label`)."""
        documented(command)
        command = label or command
        began = time.monotonic()
        done = subprocess.run(argv or shlex.split(self.text(command)), cwd=self.clone,
                              env={**self.env, **(env or {})}, capture_output=True, text=True,
                              timeout=timeout, check=False)
        output = done.stdout if where == "stdout" else done.stderr
        if done.returncode != code:
            raise CheckFailed(f"{command!r} exited {done.returncode}, not {code}:\n"
                              f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
        for piece in expected:
            if piece not in output:
                raise CheckFailed(f"{command!r} did not print {piece!r} on {where}; it printed:\n"
                                  f"{output[-3000:]}")
        self.steps += 1
        print(f"ok  {command}  ({time.monotonic() - began:.1f} s)", flush=True)
        return output


LIST_DISTRIBUTIONS = ("import importlib.metadata as m\n"
                      "for d in m.distributions(): print(f'{d.name}=={d.version}')")


def _normal(name: str) -> str:
    """A distribution's name as PEP 503 compares them."""
    return re.sub(r"[-_.]+", "-", name).lower()


def installed_the_locked_versions(walk: Walk) -> None:
    """The README's two commands that install the tool with uv.lock's versions as constraints
    (a plain `uv tool install` resolves afresh): every package of the tool's environment that
    the lock names must be the lock's version."""
    tools = {"UV_TOOL_DIR": str(walk.root / "locked-tools"),
             "UV_TOOL_BIN_DIR": str(walk.root / "locked-bin")}
    walk.run("uv export --frozen --no-dev --no-hashes --no-emit-project -o "
             "/tmp/ask-another-constraints.txt", env=tools)
    walk.run("uv tool install --constraints /tmp/ask-another-constraints.txt "
             "/path/to/ask-another", "ask-another", where="stderr", env=tools)
    locked = dict(line.split(";")[0].strip().split("==", 1)
                  for line in (walk.root / "constraints.txt").read_text().splitlines()
                  if "==" in line and not line.lstrip().startswith("#"))
    python = walk.root / "locked-tools" / "ask-another" / "bin" / "python"
    listed = subprocess.run([str(python), "-c", LIST_DISTRIBUTIONS], capture_output=True,
                            text=True, check=True).stdout
    wanted = {_normal(name): version for name, version in locked.items()}
    moved = sorted(f"{name} {version} (uv.lock: {wanted[_normal(name)]})"
                   for name, version in (line.split("==", 1) for line in listed.split())
                   if _normal(name) in wanted and wanted[_normal(name)] != version)
    if moved or "openai" not in wanted:
        raise CheckFailed(f"the tool installed with uv.lock as constraints has other versions "
                          f"than the lock: {', '.join(moved) or 'openai is not in the export'}")


def by_hand_on_a_tty(walk: Walk, command: str, *expected: str) -> None:
    """`command` with a terminal for stdin; its stderr must say `expected` within 120 s."""
    documented(command)
    controller, terminal = pty.openpty()
    child = subprocess.Popen(shlex.split(walk.text(command)), cwd=walk.clone, env=walk.env,
                             stdin=terminal, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    os.close(terminal)
    said = b""
    try:
        assert child.stderr is not None
        deadline = time.monotonic() + 120
        while not all(p.encode() in said for p in expected) and time.monotonic() < deadline:
            ready, _, _ = select.select([child.stderr], [], [], 1)
            if ready:
                chunk = os.read(child.stderr.fileno(), 4096)
                if not chunk:
                    break
                said += chunk
        os.write(controller, b"\x04")  # Ctrl-D ends the session
        child.wait(timeout=60)
    finally:
        child.kill()
        os.close(controller)
    for piece in expected:
        if piece.encode() not in said:
            raise CheckFailed(f"{command!r} on a terminal did not say {piece!r}; it said:\n"
                              f"{said.decode(errors='replace')[-2000:]}")
    walk.steps += 1
    print(f"ok  {command}  (on a terminal)", flush=True)


INITIALIZE = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {},
    "clientInfo": {"name": "check_readme", "version": "0"}}})


def answers_initialize(walk: Walk, label: str, argv: list[str], env: dict[str, str]) -> None:
    """A client set-up's command, started as the client would, answers `initialize` on stdout."""
    child = subprocess.Popen(argv, cwd=walk.root, env={**walk.env, **env}, text=True,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
    try:
        reply, _ = child.communicate(INITIALIZE + "\n", timeout=300)
    finally:
        child.kill()
    first = reply.splitlines()[0] if reply else ""
    if '"serverInfo"' not in first or '"ask-another"' not in first:
        raise CheckFailed(f"{label} did not answer initialize; stdout: {reply[:500]!r}")
    walk.steps += 1
    print(f"ok  {label}  (answers initialize)", flush=True)


def client_setups(walk: Walk) -> None:
    """The README's Claude Code line and its JSON set-up (Claude Desktop, Gemini CLI), run with
    the command `uv tool install` installed (on PATH for Claude Code, by full path in JSON)."""
    readme = (REPO / "README.md").read_text()
    claude = re.search(r"claude mcp add ask-another (.*?)\n  -- (.*?)\n", readme)
    if claude is None:
        raise CheckFailed("the README's `claude mcp add` line is gone: update the check")
    on_path = {"PATH": f"{walk.root / 'bin'}{os.pathsep}{walk.env.get('PATH', '')}"}
    answers_initialize(walk, "claude mcp add ... -- " + claude.group(2),
                       shlex.split(walk.text(claude.group(2))), on_path)
    block = re.search(r"```json\n(.*?)```", readme, re.DOTALL)
    if block is None:
        raise CheckFailed("the README's JSON client set-up is gone: update the check")
    server = json.loads(block.group(1))["mcpServers"]["ask-another"]
    env = {k: walk.text(v) for k, v in server["env"].items()}
    answers_initialize(walk, "the README's mcpServers JSON",
                       [walk.text(server["command"]), *(walk.text(a) for a in server["args"])],
                       env)


def walk_the_readme(root: Path) -> int:
    walk = Walk(root)
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(walk.clone)], check=True)
    print(f"fresh clone of {REPO} HEAD in {walk.clone}", flush=True)

    # Install: run from the clone (the first `uv run` makes a fresh .venv in it).
    walk.run("uv run --no-dev ask-another --help", "serve MCP on stdio", "MODEL_<NAME>",
             "ASK_ANOTHER_HOME", "ask-another demo")
    if not (walk.clone / ".venv").is_dir():
        raise CheckFailed("`uv run` made no .venv in the fresh clone")
    # Quick start.
    walk.run("uv run --no-dev ask-another demo", "SIMULATED provider", "── completion",
             "[simulated sim-chat] answer to: Is 1729", "── cancel_research", timeout=300)
    # The run commands install the runtime only: no test tools in the clone's .venv yet.
    tools = sorted(p.name for p in (walk.clone / ".venv" / "bin").iterdir()
                   if p.name in ("pytest", "ruff", "mypy"))
    if tools:
        raise CheckFailed(f"the README's run commands installed the test tools: {tools}")
    simulator = "uv run --no-dev python -m ask_another.simulator --port 8780"
    documented(simulator)
    served = subprocess.Popen(shlex.split(walk.text(simulator)), cwd=walk.clone, env=walk.env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert served.stderr is not None
        listening = served.stderr.readline()
        if "simulator.listening" not in listening:
            raise CheckFailed(f"{simulator!r} did not say it listens: {listening!r}")
        walk.steps += 1
        print(f"ok  {simulator}", flush=True)
        model = 'export MODEL_SIM="openai/m1;any-key;http://127.0.0.1:8780/v1"'
        documented(model)
        walk.env["MODEL_SIM"] = walk.text("openai/m1;any-key;http://127.0.0.1:8780/v1")
        walk.run("uv run --no-dev ask-another doctor", "configuration OK",
                 "model: openai/m1 (shorthand: sim, openai)")
        walk.run("uv run --no-dev ask-another models", "Allowed models (1):", "openai/m1")
        walk.run('uv run --no-dev ask-another ask sim "Is 1 prime?"',
                 "[simulated m1] answer to: Is 1 prime?")
        walk.run('uv run --no-dev ask-another research sim "Why are there tides?"',
                 "# Research Report: Why are there tides?", timeout=300)
        by_hand_on_a_tty(walk, "uv run --no-dev ask-another", "ask-another is an MCP server",
                         "waiting on stdin", "ask-another demo")

        # The other installs: the clone by path, installed as a tool, and a built wheel.
        walk.run("uvx --from /path/to/ask-another ask-another --help", "MODEL_<NAME>",
                 "serve MCP on stdio")
        walk.run("uv tool install /path/to/ask-another", "ask-another", where="stderr")
        client_setups(walk)
        installed = str(root / "bin" / "ask-another")
        walk.run("ask-another models", "openai/m1", argv=[installed, "models"],
                 label="ask-another models  (the installed tool)")
        walk.run("uv build", WHEEL, where="stderr")
        if not (walk.clone / WHEEL).is_file():
            raise CheckFailed(f"`uv build` made no {WHEEL}")
        installed_the_locked_versions(walk)
        wheel_tools = {"UV_TOOL_DIR": str(root / "wheel-tools"),
                       "UV_TOOL_BIN_DIR": str(root / "wheel-bin")}
        walk.run(f"uv tool install {WHEEL}", "ask-another", where="stderr", env=wheel_tools)
        from_wheel = str(root / "wheel-bin" / "ask-another")
        walk.run("ask-another doctor", "configuration OK",
                 argv=[from_wheel, "doctor"], env=wheel_tools,
                 label="ask-another doctor  (installed from the wheel)")
        # A wheel has no docs/: its --help carries the reference itself.
        help_text = walk.run("uv run --no-dev ask-another --help", "ASK_ANOTHER_PERMISSIONS",
                             argv=[from_wheel, "--help"], env=wheel_tools,
                             label="ask-another --help  (installed from the wheel)")
        if "See docs/" in help_text:
            raise CheckFailed("the installed wheel's --help points at docs/, which it lacks")
    finally:
        served.terminate()
        served.wait(timeout=30)

    # Development: the fast subset is selected by the marker; the README's test command runs the
    # whole suite on this fresh clone (.venv gets the dev group now, tests/ts its node_modules).
    walk.run('uv run pytest -n auto -m "not slow"', "deselected",
             argv=["uv", "run", "pytest", "-m", "not slow", "--collect-only", "-q"],
             label='uv run pytest -m "not slow" --collect-only')
    tests = walk.run(TEST_COMMAND, " passed", timeout=1800)
    # The suite's own closing lines (what was skipped and why, then the counts) last, so CI's
    # log ends with what ran rather than only that the walk passed.
    summary = tests.rstrip().splitlines()
    start = next((n for n, line in enumerate(summary) if "short test summary info" in line),
                 len(summary) - 1)
    print(f"README check: {walk.steps} commands printed what the README says", flush=True)
    print("\n".join(summary[start:]), flush=True)
    return 0


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="ask-another-readme-") as root:
        try:
            return walk_the_readme(Path(root))
        except (CheckFailed, subprocess.TimeoutExpired, subprocess.CalledProcessError) as exc:
            print(f"README check FAILED: {exc}", file=sys.stderr)
            return 1


if __name__ == "__main__":
    sys.exit(main())
