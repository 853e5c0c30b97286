"""Cold start: the server answers `initialize` and `tools/list` without importing its heavy modules.

litellm (seconds), httpx (read_article's fetcher), trafilatura (extraction) and jsonschema (tool
argument checks) are imported at first use. The server process runs with
`PYTHONPROFILEIMPORTTIME=1`, so Python itself writes one stderr line per module as each import
finishes: what the process has imported at any moment can be read from the outside.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from stdio_server import stdio_client_for

pytestmark = pytest.mark.slow  # starts real server processes

HEAVY = ("litellm", "httpx", "httpcore", "trafilatura", "jsonschema")


def imported(stderr_text: str) -> set[str]:
    """Top-level package names from `-X importtime` lines (`import time: self | cum | name`)."""
    names = set()
    for line in stderr_text.splitlines():
        if line.startswith("import time:") and "|" in line:
            name = line.rsplit("|", 1)[1].strip()
            names.add(name.split(".", 1)[0])
    return names


async def test_tools_list_is_answered_before_any_heavy_module_is_imported(tmp_path: Path):
    stderr_path = tmp_path / "stderr.log"
    env = {"ASK_ANOTHER_HOME": str(tmp_path / "home"), "PYTHONPROFILEIMPORTTIME": "1",
           "MODEL_SIM": "openai/m1;sk-test-START-1f2e;http://127.0.0.1:9/v1"}
    with stderr_path.open("w") as stderr:
        async with stdio_client_for(env, stderr) as client:
            tools = {t.name for t in (await client.list_tools()).tools}
            at_tools_list = imported(stderr_path.read_text())
            assert "completion" in tools and "read_article" in tools
            assert {"mcp", "trio"} <= at_tools_list  # the import log is really being read
            assert not at_tools_list & set(HEAVY), sorted(at_tools_list & set(HEAVY))

            # The first read imports the fetcher: the same check sees a lazy import happen.
            result = await client.call_tool("read_article", {"url": "ftp://example.com/a"})
            assert "only http and https" in result.content[0].text  # type: ignore[union-attr]
            assert {"httpx", "httpcore"} <= imported(stderr_path.read_text())
