"""fastmcp 3's client running start_research as a 2025-11-25 task over stdio, with a job that
asks a person.

Run by tests/ask_another/server/test_fastmcp_tasks.py with the Python of a throwaway
environment holding fastmcp 3 (on the Python SDK 1.x):

    python fastmcp_client.py SETTINGS_JSON

`ToolTask.result()` polls tasks/get (and listens to notifications/tasks/status) until the task
ends, and calls tasks/result only then: a question asked only through a pending tasks/result
never reaches its elicitation handler, and the call waits out the permission's timeout. Prints
one JSON line of what it saw (the questions its handler got, the result, or the error).
"""

import asyncio
import json
import sys
from typing import Any

from fastmcp import Client
from fastmcp.client.transports import StdioTransport

asked: list[dict[str, Any]] = []


async def handler(message: str, _response_type: Any, params: Any, _context: Any
                  ) -> dict[str, Any]:
    meta = getattr(params, "meta", None)
    related = (meta.model_dump() if meta is not None else {}).get(
        "io.modelcontextprotocol/related-task")
    asked.append({"message": message, "related": related})
    return {"decision": "allow"}


async def main(settings: dict[str, Any]) -> dict[str, Any]:
    seen: dict[str, Any] = {"asked": asked}
    transport = StdioTransport(settings["command"], settings["args"], env=settings["env"],
                               cwd=settings["cwd"])
    async with Client(transport, elicitation_handler=handler) as client:
        task = await client.call_tool("start_research", {"model": "sim", "query": "tides?",
                                                         "method": "agent"}, task=True)
        seen["task_id"] = task.task_id
        try:
            result = await asyncio.wait_for(task.result(), settings["wait"])
            seen["text"] = "".join(getattr(c, "text", "") for c in result.content)
        except TimeoutError:
            seen["error"] = f"no result within {settings['wait']} s"
    return seen


if __name__ == "__main__":
    with open(sys.argv[1], encoding="utf-8") as file:
        seen = asyncio.run(main(json.load(file)))
    sys.stdout.write(json.dumps(seen) + "\n")
