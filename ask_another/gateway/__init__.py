"""The gateway: every provider call, over a thread or a worker-process transport.

`Gateway` is the one interface (completions, Gemini interactions); `ThreadTransport` and
`ProcessTransport` carry its calls to litellm, in this process or in a worker process; the
litellm-facing code both run lives in `_litellm.py`. Importing this package never imports litellm.
"""

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
from ask_another.gateway._thread import ThreadTransport as ThreadTransport

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
    "ThreadTransport",
    "ToolCall",
    "Transport",
    "Usage",
    "WorkerStopped",
    "open_gateway",
]
