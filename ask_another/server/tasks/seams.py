"""The provisional SDK parts the tasks adapter relies on, each checked by name:
tests/ask_another/server/test_task_seams.py fails with the names an SDK upgrade moved."""

from __future__ import annotations

import inspect
from dataclasses import fields

from mcp.server.context import ServerRequestContext
from mcp.server.extension import Extension, MethodBinding
from mcp.server.mcpserver import MCPServer
from mcp.server.session import ServerSession
from mcp_types.methods import SPEC_CLIENT_METHODS

__all__ = ["seam_problems"]


def seam_problems() -> list[str]:
    """The provisional SDK parts this module relies on that are missing or changed, each named
    (empty while they hold)."""
    init = inspect.signature(MCPServer.__init__).parameters
    problems = [f"MCPServer({name}=...) is gone" for name in ("middleware", "extensions")
                if name not in init]
    if not isinstance(getattr(MCPServer, "middleware", None), property):
        problems.append("MCPServer.middleware (the list of Server.middleware) is gone")
    context = {f.name for f in fields(ServerRequestContext)}
    problems += [f"ServerRequestContext.{name} is gone"
                 for name in ("session", "lifespan_context", "protocol_version", "method",
                              "params", "request_id") if name not in context]
    binding = {f.name for f in fields(MethodBinding)}
    if not {"method", "params_type", "handler", "protocol_versions"} <= binding:
        problems.append(f"MethodBinding's fields changed: {sorted(binding)}")
    intercept = list(inspect.signature(Extension.intercept_tool_call).parameters)
    if intercept != ["self", "params", "ctx", "call_next"]:
        problems.append(f"Extension.intercept_tool_call(params, ctx, call_next) changed: "
                        f"{intercept}")
    lowlevel = getattr(MCPServer("probe"), "_lowlevel_server", None)
    if lowlevel is None or not callable(getattr(lowlevel, "add_request_handler", None)):
        problems.append("MCPServer._lowlevel_server.add_request_handler is gone")
    if "_connection" not in ServerSession.__init__.__code__.co_names:
        problems.append("ServerSession._connection (a 2025 subscription's connection) is gone")
    if "subscriptions" not in init:
        problems.append("MCPServer(subscriptions=...) (the subscription bus) is gone")
    claimed = sorted({"tasks/get", "tasks/update", "tasks/cancel"} & SPEC_CLIENT_METHODS)
    if claimed:
        problems.append(f"the SDK now serves {claimed} itself: MethodBinding refuses them")
    return problems
