"""The OpenAI Agents SDK's MCP client against ask-another over stdio, with its defaults.

Run by tests/ask_another/server/test_openai_agents.py with the Python of a throwaway environment
holding openai-agents:

    python openai_agents_client.py SETTINGS_JSON

SETTINGS_JSON names the server's command, arguments, working directory and environment.
`MCPServerStdio` is left at its default `client_session_timeout_seconds` (5 s): a call that
takes longer fails with "Request 'tools/call' timed out" and the agent never sees its result.
Each listed tool is converted to a function tool as an agent with `convert_schemas_to_strict`
would; the tools it could not make strict are listed. Prints one JSON line of what it saw.
"""

import asyncio
import json
import sys
import time
from typing import Any

from agents import Agent
from agents.mcp import MCPServerStdio, MCPUtil


async def main(settings: dict[str, Any]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    async with MCPServerStdio(params={"command": settings["command"], "args": settings["args"],
                                      "env": settings["env"], "cwd": settings["cwd"]},
                              name="ask-another") as server:
        seen["timeout"] = server.client_session_timeout_seconds
        tools = await server.list_tools()
        agent = Agent(name="probe")
        converted = [MCPUtil.to_function_tool(tool, server, True, agent) for tool in tools]
        seen["tools"] = len(tools)
        seen["not_strict"] = sorted(t.name for t in converted if not t.strict_json_schema)
        began = time.monotonic()
        try:
            result = await server.call_tool("start_research", {"model": "gdr",
                                                               "query": "agents forever"})
            seen["start"] = {"text": "".join(getattr(c, "text", "") for c in result.content),
                             "is_error": result.is_error}
        except Exception as exc:  # what the agent would see instead of a result
            seen["start"] = {"error": f"{type(exc).__name__}: {exc}"}
        seen["start_seconds"] = round(time.monotonic() - began, 2)
    return seen


if __name__ == "__main__":
    with open(sys.argv[1], encoding="utf-8") as file:
        seen = asyncio.run(main(json.load(file)))
    sys.stdout.write(json.dumps(seen) + "\n")
