"""Cold start: the server answers `initialize` and `tools/list` without importing its heavy modules.

litellm (seconds) never loads in the server process at all (its gateway worker has it, see
test_stdio_light_server.py); httpx (read_article's fetcher), trafilatura (extraction) and
jsonschema (tool argument checks) are imported at first use. The server runs under
tests/support/modules_probe.py, which reports the process's own `sys.modules` on request (the
gateway worker, which does import litellm and httpx, is another process and not counted).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
from modules_probe import modules_of, probed_pid
from stdio_server import stdio_client_for

pytestmark = pytest.mark.slow  # starts real server processes

HEAVY = ("litellm", "httpx", "httpcore", "trafilatura", "jsonschema")


def top_level(modules: set[str]) -> set[str]:
    return {name.split(".", 1)[0] for name in modules}


async def test_tools_list_is_answered_before_any_heavy_module_is_imported(tmp_path: Path):
    home = tmp_path / "home"
    listing = tmp_path / "modules.txt"
    env = {"ASK_ANOTHER_HOME": str(home), "ASK_ANOTHER_TEST_MODULES_FILE": str(listing),
           "MODEL_SIM": "openai/m1;sk-test-START-1f2e;http://127.0.0.1:9/v1"}
    with (tmp_path / "stderr.log").open("w") as stderr:
        async with stdio_client_for(env, stderr, probe=True) as client:
            tools = {t.name for t in (await client.list_tools()).tools}
            server = probed_pid(f"ASK_ANOTHER_HOME={home}")
            at_tools_list = top_level(await trio.to_thread.run_sync(modules_of, server, listing))
            assert "completion" in tools and "read_article" in tools
            assert {"mcp", "trio"} <= at_tools_list  # the module list is really being read
            assert not at_tools_list & set(HEAVY), sorted(at_tools_list & set(HEAVY))

            # The first read imports the fetcher: the same check sees a lazy import happen.
            result = await client.call_tool("read_article", {"url": "ftp://example.com/a"})
            assert "only http and https" in result.content[0].text  # type: ignore[union-attr]
            after = top_level(await trio.to_thread.run_sync(modules_of, server, listing))
            assert {"httpx", "httpcore"} <= after
            assert "litellm" not in after
