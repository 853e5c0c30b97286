"""The MCP face of ask-another: `build_server(config)` makes the `MCPServer`; tools in `tools/`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ask_another._lazy import lazy_getattr

if TYPE_CHECKING:
    from ask_another.server.app import build_server as build_server
    from ask_another.server.app import instructions as instructions
    from ask_another.server.app import serve_stdio as serve_stdio

# Imported at first use (PEP 562), like the package faces of ask_another and ask_another.gateway:
# `ask-another serve` opens the lifespan (server/lifespan.py) before the SDK's import, which
# app.py starts.
_EXPORTS = {
    "build_server": "ask_another.server.app",
    "instructions": "ask_another.server.app",
    "serve_stdio": "ask_another.server.app",
}

__all__ = ["build_server", "instructions", "serve_stdio"]

__getattr__ = lazy_getattr(__name__, _EXPORTS)
