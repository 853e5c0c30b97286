"""The MCP face of ask-another: `build_server(config)` makes the `MCPServer`; tools in `tools/`."""

from ask_another.server.app import build_server as build_server
from ask_another.server.app import instructions as instructions
from ask_another.server.app import serve_stdio as serve_stdio

__all__ = ["build_server", "instructions", "serve_stdio"]
