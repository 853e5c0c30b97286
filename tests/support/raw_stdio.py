"""A raw JSON-RPC client over a real `python -m ask_another` on stdio, for what the SDK's Python
client will not send or read (2025-11-25 task-augmented tools/call, whose result is a task and
not a CallToolResult): one JSON object per line each way.

    async with raw_stdio(env, stderr, capabilities={"elicitation": {}}) as rpc:
        created = await rpc.request("tools/call", {..., "task": {}})

Server requests (an elicitation) are answered by `on_request(method, params)`; notifications are
kept in `rpc.notifications`.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import IO, Any

import trio
from deadlines import generous
from http_server import process_env
from stdio_server import server_parameters
from tasks_client import until_status

OnRequest = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]


def allowing(asked: list[dict[str, Any]]) -> OnRequest:
    """An `on_request` that accepts every server request with ``decision: allow`` (an
    elicitation's answer), keeping each in `asked` (its method and params) to assert on."""

    async def on_request(method: str, params: dict[str, Any]) -> dict[str, Any]:
        asked.append({"method": method, **params})
        return {"action": "accept", "content": {"decision": "allow"}}

    return on_request


class RpcError(Exception):
    def __init__(self, error: dict[str, Any]) -> None:
        self.code = error.get("code")
        self.message = str(error.get("message"))
        self.data = error.get("data")
        super().__init__(f"{self.code}: {self.message}")


class RawClient:
    def __init__(self, process: trio.Process, on_request: OnRequest | None) -> None:
        self.process = process
        self.on_request = on_request
        self.notifications: list[dict[str, Any]] = []
        self.initialize_result: dict[str, Any] = {}
        self._arrived = trio.Event()
        self._next = 0
        self._waiting: dict[int, trio.MemorySendChannel[dict[str, Any]]] = {}
        self._lock = trio.Lock()

    async def _send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        async with self._lock:
            await self.process.stdin.send_all((json.dumps(message) + "\n").encode())

    async def request(self, method: str, params: dict[str, Any] | None = None,
                      seconds: float = 60) -> dict[str, Any]:
        """The result of `method`; raises `RpcError` for an error answer."""
        self._next += 1
        request_id = self._next
        send, receive = trio.open_memory_channel[dict[str, Any]](1)
        self._waiting[request_id] = send
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        await self._send(message)
        with trio.fail_after(generous(seconds)):
            answer = await receive.receive()
        if "error" in answer:
            raise RpcError(answer["error"])
        result: dict[str, Any] = answer["result"]
        return result

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        await self._send({"jsonrpc": "2.0", "method": method, **({"params": params}
                                                                  if params else {})})

    async def read_loop(self, nursery: trio.Nursery) -> None:
        assert self.process.stdout is not None
        buffer = b""
        async for chunk in self.process.stdout:
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                if line.strip():
                    self._dispatch(json.loads(line), nursery)

    def _dispatch(self, message: dict[str, Any], nursery: trio.Nursery) -> None:
        if "method" not in message:
            sender = self._waiting.pop(message["id"], None)
            if sender is not None:
                sender.send_nowait(message)
        elif "id" in message:
            nursery.start_soon(self._answer, message)
        else:
            self.notifications.append(message)
            self._arrived.set()
            self._arrived = trio.Event()

    async def notified(self, method: str, **params: Any) -> dict[str, Any]:
        """The first notification `method` whose params include `params`, waited for."""
        while True:
            for message in self.notifications:
                given = message.get("params") or {}
                if message["method"] == method and all(given.get(k) == v
                                                       for k, v in params.items()):
                    return message
            await self._arrived.wait()

    async def _answer(self, message: dict[str, Any]) -> None:
        if self.on_request is None:
            reply: dict[str, Any] = {"error": {"code": -32601, "message": "not supported"}}
        else:
            reply = {"result": await self.on_request(message["method"],
                                                     message.get("params") or {})}
        await self._send({"jsonrpc": "2.0", "id": message["id"], **reply})


@asynccontextmanager
async def raw_stdio(env: dict[str, str], stderr: IO[str], *,
                    capabilities: dict[str, Any] | None = None,
                    on_request: OnRequest | None = None) -> AsyncIterator[RawClient]:
    """A 2025-11-25 session with a real server process, initialized."""
    params = server_parameters(env)
    process = await trio.lowlevel.open_process(
        [params.command, *params.args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=stderr, env=process_env(params.env or {}), cwd=params.cwd)
    client = RawClient(process, on_request)
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(client.read_loop, nursery)
            client.initialize_result = await client.request("initialize", {
                "protocolVersion": "2025-11-25", "capabilities": capabilities or {},
                "clientInfo": {"name": "raw-tasks-test", "version": "0"}})
            await client.notify("notifications/initialized")
            yield client
            nursery.cancel_scope.cancel()
    finally:
        if process.returncode is None:
            process.kill()
        with trio.CancelScope(shield=True):
            await process.wait()


async def raw_until(rpc: RawClient, task_id: str, *statuses: str, seconds: float = 60
                    ) -> dict[str, Any]:
    """`until_status` through this raw client's tasks/get."""
    return await until_status(lambda t: rpc.request("tasks/get", {"taskId": t}), task_id,
                              statuses, seconds)
