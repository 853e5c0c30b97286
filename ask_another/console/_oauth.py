"""Logging in to the console through the OAuth issuer: the authorization code flow with PKCE.

With `ASK_ANOTHER_OAUTH_ISSUER` and the console's client id at that issuer
(`ASK_ANOTHER_OAUTH_CONSOLE_CLIENT_ID`, a public client whose redirect URI is
``PUBLIC/console/login/oauth/callback``), the login page offers "Log in with ISSUER": the
console sends the browser to the issuer's `authorization_endpoint` (from its RFC 8414 metadata)
with a PKCE challenge, a `state` and the MCP endpoint as the `resource` (RFC 8707, so the token's
audience is the one the MCP face checks); the issuer sends it back with a code, which the console
exchanges at the `token_endpoint` for an access token. That token is checked by the same
verifier as a pasted one (signature, issuer, audience, expiry), and the session lasts no longer
than it. The state and the PKCE verifier travel in a short-lived cookie signed with the console's
key, so any node sharing the key can finish a login another began.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlencode

import httpx

from ask_another.logs import get_logger

__all__ = ["STATE_COOKIE", "OAuthLogin", "Started"]

log = get_logger("ask_another.console")

STATE_COOKIE: Final = "ask_another_console_oauth"
STATE_SECONDS: Final = 600.0  # a login begun must be finished within this
HTTP_SECONDS: Final = 10.0


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


@dataclass(frozen=True)
class Started:
    """A login begun: where to send the browser, and the state cookie to set."""

    url: str
    cookie: str


class OAuthLogin:
    """The console's client of the issuer (see the module docstring)."""

    def __init__(self, issuer: str, client_id: str, redirect_uri: str, resource: str,
                 key: bytes) -> None:
        self.issuer = issuer
        self.client_id = client_id
        self.redirect_uri = redirect_uri
        self.resource = resource
        self._key = key
        self._endpoints: tuple[str, str] | None = None

    def _sign(self, body: bytes) -> str:
        return _b64(hmac.new(self._key, b"oauth-state:" + body, hashlib.sha256).digest())

    async def endpoints(self) -> tuple[str, str] | None:
        """The issuer's authorization and token endpoints, from its metadata (kept once found);
        None, logged, when the issuer does not say them or cannot be reached."""
        if self._endpoints is not None:
            return self._endpoints
        base = self.issuer.rstrip("/")
        async with httpx.AsyncClient(timeout=HTTP_SECONDS) as client:
            for path in ("/.well-known/oauth-authorization-server",
                         "/.well-known/openid-configuration"):
                try:
                    response = await client.get(base + path)
                    body = response.json() if response.status_code == 200 else None
                except (httpx.HTTPError, ValueError) as exc:
                    log.warning("console.oauth_metadata_failed", url=base + path, error=str(exc))
                    continue
                if not isinstance(body, dict):
                    continue
                authorize, token = body.get("authorization_endpoint"), body.get("token_endpoint")
                if isinstance(authorize, str) and isinstance(token, str):
                    self._endpoints = (authorize, token)
                    return self._endpoints
        log.warning("console.oauth_no_endpoints", issuer=self.issuer)
        return None

    async def begin(self, next_path: str | None) -> Started | None:
        """The redirect to the issuer for a new login (None: the issuer's endpoints are not
        known), returning to `next_path` afterwards."""
        found = await self.endpoints()
        if found is None:
            return None
        verifier = secrets.token_urlsafe(48)
        state = secrets.token_urlsafe(16)
        challenge = _b64(hashlib.sha256(verifier.encode()).digest())
        query = urlencode({"response_type": "code", "client_id": self.client_id,
                           "redirect_uri": self.redirect_uri, "state": state,
                           "code_challenge": challenge, "code_challenge_method": "S256",
                           "resource": self.resource})
        body = json.dumps({"s": state, "v": verifier, "n": next_path or "",
                           "e": time.time() + STATE_SECONDS}, separators=(",", ":")).encode()
        separator = "&" if "?" in found[0] else "?"
        return Started(f"{found[0]}{separator}{query}", f"{_b64(body)}.{self._sign(body)}")

    def returned(self, cookie: str | None, state: str | None) -> tuple[str, str] | None:
        """(the PKCE verifier, the path to go on to) of the login `cookie` began, if `state` is
        the one it was sent with and it is not too old; else None."""
        if not cookie or not state or cookie.count(".") != 1:
            return None
        body_text, signature = cookie.split(".")
        try:
            body = base64.urlsafe_b64decode(body_text + "=" * (-len(body_text) % 4))
            fields = json.loads(body)
        except ValueError:
            return None
        if not hmac.compare_digest(self._sign(body), signature):
            return None
        if not hmac.compare_digest(str(fields.get("s")), state):
            return None
        if float(fields.get("e", 0)) <= time.time():
            return None
        return str(fields["v"]), str(fields.get("n") or "")

    async def exchange(self, code: str, verifier: str) -> str | None:
        """The access token the issuer gives for `code`, or None (refused, logged)."""
        found = await self.endpoints()
        if found is None:
            return None
        try:
            async with httpx.AsyncClient(timeout=HTTP_SECONDS) as client:
                response = await client.post(found[1], data={
                    "grant_type": "authorization_code", "code": code,
                    "redirect_uri": self.redirect_uri, "client_id": self.client_id,
                    "code_verifier": verifier, "resource": self.resource})
            body = response.json()
        except (httpx.HTTPError, ValueError) as exc:
            log.warning("console.oauth_exchange_failed", error=str(exc))
            return None
        token = body.get("access_token") if isinstance(body, dict) else None
        if response.status_code != 200 or not isinstance(token, str):
            log.warning("console.oauth_exchange_refused", status=response.status_code,
                        error=body.get("error") if isinstance(body, dict) else None)
            return None
        return token
