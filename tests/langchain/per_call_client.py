"""langchain-mcp-adapters' default client calling ask-another's tools over HTTP, a session each.

Run by tests/ask_another/server/test_per_call_sessions.py with the Python of a throwaway
environment holding langchain-mcp-adapters (it needs mcp 1.x, which the project's own
environment cannot have beside mcp 2.3):

    python per_call_client.py URL TOKEN CALLS

`MultiServerMCPClient(...).get_tools()` gives tools that open a new session for every call (and
close it with DELETE after). Calls `list_models` CALLS times and prints one JSON line: the calls
that answered, and the first error seen.
"""

import asyncio
import json
import sys
import time

from langchain_mcp_adapters.client import MultiServerMCPClient


async def main(url: str, token: str, calls: int) -> None:
    client = MultiServerMCPClient({"ask": {"transport": "streamable_http", "url": url,
                                           "headers": {"Authorization": f"Bearer {token}"}}})
    tools = {tool.name: tool for tool in await client.get_tools()}
    answered, error = 0, None
    started = time.monotonic()
    for _ in range(calls):
        try:
            await tools["list_models"].ainvoke({})
            answered += 1
        except Exception as exc:  # what the agent would see
            error = error or f"{type(exc).__name__}: {exc}"
    sys.stdout.write(json.dumps({"answered": answered, "error": error,
                                 "seconds": round(time.monotonic() - started, 1)}) + "\n")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
