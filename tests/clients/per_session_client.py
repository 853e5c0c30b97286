"""Two real clients that open a stdio session per call or per run, as their users write them,
run with the Python of a throwaway environment that holds them (tests/ask_another/server/
test_per_session_clients.py builds it): one step of a scenario per process, its answer as one
JSON line on stdout.

    python per_session_client.py langchain-start SERVER_JSON MODEL METHOD QUERY
    python per_session_client.py langchain-check SERVER_JSON JOB_ID
    python per_session_client.py agents-start SERVER_JSON MODEL METHOD QUERY
    python per_session_client.py agents-answer SERVER_JSON JOB_ID

SERVER_JSON is the stdio server to run: {"command", "args", "env", "cwd"}.

- langchain-mcp-adapters' documented default: `MultiServerMCPClient(...).get_tools()`, whose
  tools each open a new stdio session (a new server process) for every call and close it after.
- The OpenAI Agents SDK: each run wrapped in `async with MCPServerStdio(...)`, the server
  stopped when the block ends.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import time
from typing import Any

# start_research's wait: long enough, on a loaded machine, for the job to reach its provider
# (a Gemini interaction resumes on takeover only once its id is stored), short enough to
# return before the job ends.
START_WAIT = 20


def text_of(result: Any) -> str:
    """A tool's answer as text, whichever shape the client gives it in."""
    if isinstance(result, str):
        return result
    content = getattr(result, "content", result)
    if isinstance(content, list):
        return "\n".join(str(getattr(c, "text", None) or (c.get("text") if isinstance(c, dict)
                                                           else c)) for c in content)
    return str(content)


async def langchain(mode: str, server: dict[str, Any], args: list[str]) -> dict[str, Any]:
    from langchain_mcp_adapters.client import MultiServerMCPClient

    client = MultiServerMCPClient({"ask": {"transport": "stdio", **server}})
    tools = {tool.name: tool for tool in await client.get_tools()}  # a session of its own
    if mode == "start":
        model, method, query = args
        answer = await tools["start_research"].ainvoke(
            {"model": model, "method": method, "query": query, "timeout": START_WAIT})
        return {"text": text_of(answer)}
    (job_id,) = args
    return {"text": text_of(await tools["check_research"].ainvoke({"job_id": job_id}))}


async def agents(mode: str, server: dict[str, Any], args: list[str]) -> dict[str, Any]:
    from agents.mcp import MCPServerStdio

    async with MCPServerStdio(params=server, client_session_timeout_seconds=60) as mcp:
        if mode == "start":
            model, method, query = args
            answer = await mcp.call_tool("start_research", {"model": model, "method": method,
                                                            "query": query,
                                                            "timeout": START_WAIT})
            return {"text": text_of(answer)}
        # The next run: answer what the job waits for, then wait for its end.
        (job_id,) = args
        deadline = time.monotonic() + 90
        answered: dict[str, str] = {}
        text = ""
        while time.monotonic() < deadline:
            text = text_of(await mcp.call_tool("check_research", {"job_id": job_id}))
            if '"completed"' in text or " is failed" in text or " is cancelled" in text:
                break
            if "waiting for permission" in text:
                for call_id in set(re.findall(r"\bcall-[A-Za-z0-9_-]+", text)) - set(answered):
                    reply = await mcp.call_tool("answer_permission", {
                        "job_id": job_id, "tool_call_id": call_id, "decision": "allow"})
                    answered[call_id] = text_of(reply)
            await asyncio.sleep(0.2)
        return {"text": text, "answered": answered}


def main() -> None:
    kind, _, mode = sys.argv[1].partition("-")
    server = json.loads(sys.argv[2])
    run = langchain if kind == "langchain" else agents
    sys.stdout.write(json.dumps(asyncio.run(run(mode, server, sys.argv[3:]))) + "\n")


if __name__ == "__main__":
    main()
