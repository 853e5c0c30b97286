"""DNS-rebinding protection for every listener of ours: which `Host` and `Origin` a request may
carry, and the one check of them.

A page of another site whose name an attacker points at 127.0.0.1 (DNS rebinding) reaches a
loopback listener as same-origin, carrying that name in `Host`. On a loopback host, requests
must name a loopback host (or the public URL's, which a reverse proxy on the same machine
passes on); elsewhere nothing is checked, as the MCP SDK does by default. The rule is the MCP
SDK's own (`TransportSecuritySettings`, 421 for a foreign Host, 403 for a foreign Origin): the
MCP endpoint is given `transport_security` and applies it itself, and the console
(`serve --http`'s /console and `ask-another console`) is wrapped in `HostCheck`, which asks the
SDK's middleware the same question, so both answer a request alike.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from starlette.requests import Request

from ask_another.hosting import ASGIApp, Scope, is_loopback

__all__ = ["HostCheck", "transport_security"]


def transport_security(host: str, public_url: str | None) -> TransportSecuritySettings | None:
    """DNS-rebinding protection as the SDK sets it for a loopback host (Host and Origin must be
    loopback ones), plus the public URL's host and origin: a reverse proxy on the same machine
    passes the public Host on. None (the SDK's default, no check) on other hosts."""
    if not is_loopback(host):
        return None
    hosts = ["127.0.0.1:*", "localhost:*", "[::1]:*"]
    origins = ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"]
    if public_url is not None:
        public = urlsplit(public_url)
        hosts.append(public.netloc)
        origins.append(f"{public.scheme}://{public.netloc}")
    return TransportSecuritySettings(enable_dns_rebinding_protection=True,
                                     allowed_hosts=hosts, allowed_origins=origins)


class HostCheck:
    """ASGI middleware: `app` for a request whose Host and Origin `settings` allow, the SDK's
    refusal (421 or 403, before anything is read or a session issued) for any other."""

    def __init__(self, app: ASGIApp, settings: TransportSecuritySettings) -> None:
        self.app = app
        self.check = TransportSecurityMiddleware(settings)

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            # is_post=False: the SDK's Content-Type rule is the MCP endpoint's (JSON-RPC
            # bodies); the console's forms are form-encoded.
            refusal = await self.check.validate_request(Request(scope), is_post=False)
            if refusal is not None:
                await refusal(scope, receive, send)
                return
        await self.app(scope, receive, send)
