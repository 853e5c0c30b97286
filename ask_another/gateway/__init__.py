"""The gateway: every provider call, over a thread or a worker-process transport.

`Gateway` is the one interface (completions, Gemini interactions); `ThreadTransport` and
`ProcessTransport` carry its calls to litellm, in this process or in a worker process; the
litellm-facing code both run lives in `_litellm.py`. Importing this package never imports litellm.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ask_another._lazy import lazy_getattr

if TYPE_CHECKING:
    from ask_another.gateway._gateway import Gateway as Gateway
    from ask_another.gateway._gateway import GatewayActor as GatewayActor
    from ask_another.gateway._gateway import GetGateway as GetGateway
    from ask_another.gateway._gateway import Transport as Transport
    from ask_another.gateway._gateway import open_gateway as open_gateway
    from ask_another.gateway._process import ProcessTransport as ProcessTransport
    from ask_another.gateway._process import WorkerStopped as WorkerStopped
    from ask_another.gateway._results import CompletionResult as CompletionResult
    from ask_another.gateway._results import GatewayStatistics as GatewayStatistics
    from ask_another.gateway._results import InteractionState as InteractionState
    from ask_another.gateway._results import SearchHit as SearchHit
    from ask_another.gateway._results import SearchResult as SearchResult
    from ask_another.gateway._results import ToolCall as ToolCall
    from ask_another.gateway._results import Usage as Usage
    from ask_another.gateway._shared import SharedTransport as SharedTransport
    from ask_another.gateway._shared import last_start_seconds as last_start_seconds
    from ask_another.gateway._shared import running_workers as running_workers
    from ask_another.gateway._shared import socket_problem as socket_problem
    from ask_another.gateway._thread import ThreadTransport as ThreadTransport
    from ask_another.gateway._workers import home_workers as home_workers
    from ask_another.gateway._workers import stop_workers as stop_workers

# Each public name and the module it lives in. They are imported at first use (PEP 562):
# the worker process (`python -m ask_another.gateway._worker`) imports this package, and
# needs none of trio, supervisors or the config that the transports and `Gateway` import.
_EXPORTS = {
    "CompletionResult": "ask_another.gateway._results",
    "Gateway": "ask_another.gateway._gateway",
    "GatewayActor": "ask_another.gateway._gateway",
    "GatewayStatistics": "ask_another.gateway._results",
    "GetGateway": "ask_another.gateway._gateway",
    "InteractionState": "ask_another.gateway._results",
    "ProcessTransport": "ask_another.gateway._process",
    "SearchHit": "ask_another.gateway._results",
    "SearchResult": "ask_another.gateway._results",
    "SharedTransport": "ask_another.gateway._shared",
    "ThreadTransport": "ask_another.gateway._thread",
    "ToolCall": "ask_another.gateway._results",
    "Transport": "ask_another.gateway._gateway",
    "Usage": "ask_another.gateway._results",
    "WorkerStopped": "ask_another.gateway._process",
    "home_workers": "ask_another.gateway._workers",
    "last_start_seconds": "ask_another.gateway._shared",
    "open_gateway": "ask_another.gateway._gateway",
    "running_workers": "ask_another.gateway._shared",
    "socket_problem": "ask_another.gateway._shared",
    "stop_workers": "ask_another.gateway._workers",
}

__all__ = [
    "CompletionResult",
    "Gateway",
    "GatewayActor",
    "GatewayStatistics",
    "GetGateway",
    "InteractionState",
    "ProcessTransport",
    "SearchHit",
    "SearchResult",
    "SharedTransport",
    "ThreadTransport",
    "ToolCall",
    "Transport",
    "Usage",
    "WorkerStopped",
    "home_workers",
    "last_start_seconds",
    "open_gateway",
    "running_workers",
    "socket_problem",
    "stop_workers",
]

__getattr__ = lazy_getattr(__name__, _EXPORTS)
