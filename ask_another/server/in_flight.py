"""Requests in flight on a `serve --http` node: bounded per token user, per client address and
in all, below the process's open-files limit, so one token holder cannot take every file.

Each request in flight holds its connection's file (HTTP/1.1 carries one request at a time), and
the long ones hold it for minutes: a handshake-era session's GET event stream, a 2026-07-28
`subscriptions/listen`, a research call waiting for a person. A token holder opening 1,100 of
them filled a node's 1,024 files; hypercorn then could not accept, and other users' `/health`
and calls timed out. Connections that carry no request are bounded by time instead: hypercorn's
keep-alive timer closes one whose headers are not complete, or that idles between requests,
after `KEEP_ALIVE_SECONDS` (server/http.py), and a request without a valid token is answered
`401` at once. `/health` is never counted, so a load balancer's check still answers on a full
node: the files kept back (`reserved_files`) are for it, for idle connections and for the
node's own (its database, its gateway worker's pipes, its logs).
"""

from __future__ import annotations

import collections
import resource
from dataclasses import dataclass
from typing import Any, Final

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from starlette.responses import JSONResponse

from ask_another.config import Config
from ask_another.hosting import ASGIApp, Scope
from ask_another.logs import get_logger
from ask_another.server.context import token_user

__all__ = ["InFlight", "InFlightBounds", "raise_open_files_limit", "reserved_files"]

log = get_logger("ask_another.server.in_flight")

UNBOUNDED_TARGET: Final = 65536
"""The soft limit asked for when the hard one is unlimited (macOS), where setting it to
unlimited fails."""
RETRY_AFTER: Final = "1"


def raise_open_files_limit() -> tuple[int, int]:
    """Raise this process's soft `RLIMIT_NOFILE` to its hard limit (the soft default is often
    1,024, the hard one far higher); returns (the limit now, the limit before). A limit that
    cannot be raised is kept, and logged."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = UNBOUNDED_TARGET if hard == resource.RLIM_INFINITY else hard
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError) as exc:
            log.warning("http.open_files_not_raised", limit=soft, hard_limit=hard,
                        reason=str(exc))
            return soft, soft
        return target, soft
    return (UNBOUNDED_TARGET if soft == resource.RLIM_INFINITY else soft), soft


def reserved_files(limit: int) -> int:
    """Files kept back from requests in flight: a quarter of the limit, at least 128 (the
    node's own files, idle connections, `/health`), but never more than half of it."""
    return min(limit // 2, max(128, limit // 4))


@dataclass(frozen=True)
class InFlightBounds:
    """How many requests may be in flight at once: per token user, per client address (0: no
    bound of that kind) and on the node; each at most `total`."""

    per_user: int
    per_address: int
    total: int

    @classmethod
    def plan(cls, config: Config, open_files: int) -> InFlightBounds:
        total = max(1, open_files - reserved_files(open_files))

        def within(bound: int) -> int:
            return total if bound == 0 else min(bound, total)

        return cls(within(config.requests_per_user), within(config.requests_per_address), total)


class InFlight:
    """ASGI middleware, inside the SDK's authentication (which names the user) and outside
    `WholeBodies` (a body being read is a request in flight), that answers a request over one
    of `bounds` at once, before reading its body: `429` for a user or an address (`503` for a
    full node), with `Retry-After`, a JSON-RPC error line that says which bound and its
    setting, and `Connection: close`, so the refused connection's file is given back at once.
    A refused request is not counted. `/health` is not counted or refused."""

    def __init__(self, app: ASGIApp, bounds: InFlightBounds, exempt: frozenset[str]) -> None:
        self.app = app
        self.bounds = bounds
        self.exempt = exempt
        self.held: collections.Counter[str] = collections.Counter()  # requests in flight

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"] in self.exempt:
            await self.app(scope, receive, send)
            return
        holders = [("node", self.bounds.total)]
        client = scope.get("client")
        if client:
            holders.append((f"address {client[0]}", self.bounds.per_address))
        user = scope.get("user")
        if isinstance(user, AuthenticatedUser):
            holders.append((f"user {token_user(user.access_token).id}", self.bounds.per_user))
        for holder, bound in holders:
            if self.held[holder] >= bound:
                await self._refuse(scope, receive, send, holder, bound)
                return
        names = [holder for holder, _ in holders]
        self.held.update(names)
        try:
            await self.app(scope, receive, send)
        finally:
            self.held.subtract(names)
            for name in names:
                if self.held[name] <= 0:
                    del self.held[name]

    async def _refuse(self, scope: Scope, receive: Any, send: Any, holder: str,
                      bound: int) -> None:
        log.info("http.too_many_requests", holder=holder, bound=bound, path=scope["path"],
                 method=scope["method"])
        kind = holder.split()[0]
        if kind == "node":
            status = 503
            message = (f"this node has {bound} requests in flight, as many as its open-files "
                       "limit allows; retry shortly, or on another node")
        else:
            status = 429
            setting = ("ASK_ANOTHER_REQUESTS_PER_USER" if kind == "user"
                       else "ASK_ANOTHER_REQUESTS_PER_ADDRESS")
            whose = "this token's user" if kind == "user" else "this client address"
            message = (f"too many requests in flight for {whose}: at most {bound} at once "
                       f"({setting}), calls and event streams counted; retry when one of them "
                       "ends")
        await JSONResponse({"jsonrpc": "2.0", "id": None,
                            "error": {"code": -32000, "message": message}},
                           status_code=status,
                           headers={"Retry-After": RETRY_AFTER, "Connection": "close"},
                           )(scope, receive, send)
