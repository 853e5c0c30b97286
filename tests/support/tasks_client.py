"""A small MCP Tasks client for the tests: the 2026-07-28 `io.modelcontextprotocol/tasks`
extension on an `mcp.Client` (its claimed ``resultType: "task"``, tasks/get, tasks/update,
tasks/cancel), and raw requests for the methods the SDK's client has no call for.

    async with Client(server, extensions=[TasksClient()]) as client:
        handle = await create_task(client, "start_research", {...})
        task = await tasks_get(client, handle.task_id)
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Literal

import mcp_types as types
import trio
from deadlines import generous
from mcp import Client
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from pydantic import ConfigDict, Field, TypeAdapter

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
_ANY: TypeAdapter[dict[str, Any]] = TypeAdapter(dict[str, Any])


class RawRequest(types.Request[dict[str, Any] | None, str]):
    """Any request, its params as given."""


class TaskHandle(types.Result):
    """A 2026-07-28 `CreateTaskResult`: the task, flat, tagged ``resultType: "task"``."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)
    result_type: Literal["task"] = Field(alias="resultType")
    task_id: str = Field(alias="taskId")
    status: str


async def _unresolved(handle: TaskHandle, ctx: ClaimContext) -> types.CallToolResult:
    raise AssertionError(f"call create_task for a task ({handle.task_id}), not call_tool")


class TasksClient(ClientExtension):
    """Declares the tasks extension on every request and claims its task result."""

    identifier = TASKS_EXTENSION

    def claims(self) -> list[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=TaskHandle, resolve=_unresolved)]


async def request(client: Client, method: str, params: dict[str, Any] | None
                  ) -> dict[str, Any]:
    """Send `method` with `params` (stamped with this client's per-request capabilities on
    2026-07-28); the raw result."""
    return await client.session.send_request(RawRequest(method=method, params=params), _ANY)


async def create_task(client: Client, tool: str, arguments: dict[str, Any]
                      ) -> TaskHandle | types.CallToolResult:
    """Call `tool`; the task the server made of it, or its ordinary result."""
    result = await client.session.call_tool(tool, arguments, allow_claimed=True)
    assert isinstance(result, TaskHandle | types.CallToolResult), result
    return result


async def tasks_get(client: Client, task_id: str) -> dict[str, Any]:
    return await request(client, "tasks/get", {"taskId": task_id})


async def until_status(get: Callable[[str], Awaitable[dict[str, Any]]], task_id: str,
                       statuses: tuple[str, ...], seconds: float = 60) -> dict[str, Any]:
    """Poll `get(task_id)` (a tasks/get) until the task reaches one of `statuses`; that task.
    Fails with the last task seen after `seconds` (real server processes: generous)."""
    task: dict[str, Any] = {}
    seconds = generous(seconds)
    with trio.move_on_after(seconds):
        while True:
            task = await get(task_id)
            if task["status"] in statuses:
                return task
            await trio.sleep(0.05)
    raise AssertionError(f"task {task_id} never reached {statuses} in {seconds:g} s: {task}")


async def until(client: Client, task_id: str, *statuses: str, seconds: float = 60
                ) -> dict[str, Any]:
    """`until_status` through this client's tasks/get."""
    return await until_status(lambda t: tasks_get(client, t), task_id, statuses, seconds)
