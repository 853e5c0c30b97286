"""The official TypeScript MCP client (npm `@modelcontextprotocol/sdk`, pinned in
tests/ts/package-lock.json), installed in tests/ts by the tests that run it.

A fresh clone has no tests/ts/node_modules: the first test that needs the client runs `npm ci`
there, once per run, under a file lock (pytest-xdist workers may ask at once); every other test
that needs it waits on the same lock and finds it installed. Where npm cannot be used (no node
or npm, or `npm ci` fails, offline say) `install_typescript_client` says why.
"""

from __future__ import annotations

import fcntl
import json
import shutil
import subprocess

from stdio_server import REPO

TS = REPO / "tests" / "ts"
SDK = TS / "node_modules" / "@modelcontextprotocol" / "sdk"


def _installed_is_locked() -> bool:
    locked = json.loads((TS / "package-lock.json").read_text())
    wanted = locked["packages"]["node_modules/@modelcontextprotocol/sdk"]["version"]
    installed = SDK / "package.json"
    return installed.is_file() and json.loads(installed.read_text()).get("version") == wanted


def install_typescript_client() -> str | None:
    """Make sure tests/ts holds the locked client: None once it does, else why it cannot."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        return "node and npm are not installed: the TypeScript client cannot run"
    with (TS / ".npm-ci.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _installed_is_locked():
            return None
        done = subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"],
                              cwd=TS, capture_output=True, text=True, timeout=300, check=False)
        if done.returncode != 0 or not _installed_is_locked():
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            return (f"`npm ci` in tests/ts failed (exit {done.returncode}: {last}): the "
                    "TypeScript client cannot be installed here")
    return None
