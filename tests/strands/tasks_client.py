"""strands-agents' MCP client driving ask-another's 2026-07-28 tasks (SEP-2663) over HTTP.

Run by tests/ask_another/server/test_tasks_strands.py with the Python of a throwaway
environment holding strands-agents (it needs mcp < 2.2, which the project's own environment
cannot have beside mcp 2.3):

    python tasks_client.py URL TOKEN

`MCPClient(tasks_config=...)` advertises the tasks extension and turns every call of a tool into
a task when the server declares the extension, polling tasks/get to the end and answering the
task's input requests with its elicitation callback. Prints one JSON line of what it saw.
"""

import json
import sys
import time
from datetime import timedelta
from typing import Any

from mcp.types import ElicitRequestParams, ElicitResult
from strands.tools.mcp import MCPClient, TasksConfig

asked: list[str] = []


async def elicit(_context: Any, params: ElicitRequestParams) -> ElicitResult:
    asked.append(params.message)
    return ElicitResult(action="accept", content={"decision": "allow"})


def text(result: Any) -> str:
    return "".join(block.get("text", "") for block in result["content"])


def main(url: str, token: str) -> None:
    client = MCPClient(url=url, headers={"Authorization": f"Bearer {token}"},
                       elicitation_callback=elicit,
                       tasks_config=TasksConfig(poll_timeout=timedelta(seconds=90),
                                                poll_interval=timedelta(milliseconds=100)))
    seen: dict[str, Any] = {}
    with client:
        session = client._background_thread_session  # what it negotiated
        seen["protocolVersion"] = getattr(session, "protocol_version", None)
        # A research job, a consensus, and an agent job whose read needs approval: each run
        # as a task (call_tool_sync polls it to the end and answers its input requests).
        for name, tool, arguments in (
                ("research", "start_research", {"model": "gdr", "query": "strands tides"}),
                ("consensus", "consensus", {"models": ["fast", "mid"],
                                            "prompt": "Is the sea salty?"}),
                ("agent", "start_research", {"model": "sim", "query": "tides?",
                                             "method": "agent"})):
            result = client.call_tool_sync(f"use-{name}", tool, arguments)
            seen[name] = {"status": result["status"], "text": text(result)}
        seen["asked"] = asked
        # The task lifecycle by hand: submit, read, cancel, read again.
        handle = client.submit_tool_sync("start_research", {"model": "gdr",
                                                            "query": "strands forever"})
        seen["submitted"] = {"type": type(handle).__name__,
                             "taskId": getattr(handle, "task_id", None),
                             "status": getattr(handle, "status", None)}
        task_id = seen["submitted"]["taskId"]
        # Until the job polls its interaction at the provider (it knows the interaction's id
        # then, so the cancel reaches it).
        deadline = time.monotonic() + 30
        state = client.get_task_sync(task_id)
        while not (state.status_message or "").startswith("Gemini interaction") \
                and time.monotonic() < deadline:
            time.sleep(0.1)
            state = client.get_task_sync(task_id)
        seen["read"] = {"status": state.status, "statusMessage": state.status_message}
        client.cancel_task_sync(task_id)
        seen["afterCancel"] = client.get_task_sync(task_id).status
    sys.stdout.write(json.dumps(seen) + "\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
