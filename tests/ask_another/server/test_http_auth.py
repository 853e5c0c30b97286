"""The two verifiers of server/auth.py behind a real HTTP server, and the identity a tool sees.

A small `MCPServer` with one `whoami` tool (it reads `get_access_token()`, as the per-user
scoping does) is served by hypercorn's trio worker in the test's own process, with the same
`auth_settings` and verifiers as `serve --http`; an `mcp.Client` calls it over Streamable HTTP in
both eras. The OAuth issuer is a JWKS on a loopback page server, its RSA keys made here.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
import trio
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from http_server import http_client_for
from hypercorn.config import Config as HypercornConfig
from hypercorn.trio import serve
from loopback_pages import Page, PageServer
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import TokenVerifier
from mcp.server.mcpserver import MCPServer
from tool_results import call

from ask_another.config import OAuthSettings
from ask_another.errors import ConfigError
from ask_another.server.auth import (
    ADMIN_SCOPE,
    AnyOfVerifiers,
    JwtVerifier,
    TokensFile,
    TokensFileVerifier,
    auth_settings,
)
from ask_another.server.http import HttpAuth, plan_auth

ERAS = (("auto", "2026-07-28"), ("legacy", "2025-11-25"))
ISSUER = "https://issuer.example"


def whoami_server(auth: HttpAuth) -> MCPServer[Any]:
    server: MCPServer[Any] = MCPServer("whoami", auth=auth.settings,
                                       token_verifier=auth.verifier)

    @server.tool()
    def whoami() -> str:
        token = get_access_token()
        if token is None:
            return "nobody"
        return json.dumps({"client_id": token.client_id, "subject": token.subject,
                           "scopes": token.scopes})

    return server


@asynccontextmanager
async def serving(make: Any) -> AsyncIterator[str]:
    """Serve `make(resource_url)`'s app on a free loopback port; yields the MCP URL."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    app = make(url).streamable_http_app(host="127.0.0.1")
    config = HypercornConfig()
    config.bind = [f"fd://{sock.detach()}"]
    config.accesslog = None
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        await nursery.start(lambda task_status: serve(app, config, shutdown_trigger=stop.wait,
                                                      task_status=task_status))
        try:
            yield url
        finally:
            stop.set()


async def whoami(url: str, token: str, mode: str) -> dict[str, Any]:
    async with http_client_for(url, token, mode) as client:
        error, text = await call(client, "whoami")
    assert not error, text
    return json.loads(text)  # type: ignore[no-any-return]


async def status_of(url: str, token: str | None) -> httpx.Response:
    headers = {"Accept": "application/json, text/event-stream",
               "MCP-Protocol-Version": "2025-11-25"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    async with httpx.AsyncClient() as http:
        return await http.post(url, headers=headers, json={
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": "raw", "version": "0"}}})


async def test_tokens_file_users_reach_the_tools_by_id_and_admins_carry_the_scope(
        tmp_path: Path):
    tokens = TokensFile(tmp_path / "tokens.json")
    alice, bob = tokens.add("alice", admin=True), tokens.add("bob")
    alice_id, bob_id = (u.principal for u in tokens.users())
    assert alice_id.startswith("token:alice:") and bob_id.startswith("token:bob:")
    verifier = TokensFileVerifier(tmp_path / "tokens.json")

    def make(url: str) -> MCPServer[Any]:
        return whoami_server(HttpAuth(auth_settings(url, None), verifier, ""))

    async with serving(make) as url:
        for mode, _era in ERAS:
            assert await whoami(url, alice, mode) == {
                "client_id": "alice", "subject": alice_id, "scopes": [ADMIN_SCOPE]}
            assert await whoami(url, bob, mode) == {
                "client_id": "bob", "subject": bob_id, "scopes": []}
        refused = await status_of(url, None)
        assert refused.status_code == 401
        # No OAuth: no metadata to point at.
        assert "resource_metadata" not in refused.headers["www-authenticate"]


def test_the_tokens_file_holds_hashes_and_a_hand_broken_file_is_one_line(tmp_path: Path):
    path = tmp_path / "tokens.json"
    token = TokensFile(path).add("alice")
    assert token not in path.read_text()
    # Rotating keeps the user (their id, so their jobs); the old token stops at once.
    (before,) = TokensFile(path).users()
    verifier = TokensFileVerifier(path)
    rotated = TokensFile(path).rotate("alice")
    (after,) = TokensFile(path).users()
    assert after.principal == before.principal and after.sha256 != before.sha256
    assert trio.run(verifier.verify_token, token) is None
    found = trio.run(verifier.verify_token, rotated)
    assert found is not None and found.subject == before.principal
    path.write_text("{not json")
    with pytest.raises(Exception, match=r"is not an ask-another tokens file \(not JSON"):
        TokensFile(path).users()


class Issuer:
    """An OAuth issuer's signing keys, and its JWKS as a loopback page."""

    def __init__(self) -> None:
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key()))
        self.jwks = json.dumps({"keys": [{**public, "kid": "k1", "use": "sig",
                                          "alg": "RS256"}]}).encode()

    def token(self, audience: str, *, subject: str = "carol", scope: str = "mcp",
              issuer: str = ISSUER, expires_in: float = 300, key: Any = None,
              **claims: Any) -> str:
        now = int(time.time())
        body = {"iss": issuer, "aud": audience, "sub": subject, "scope": scope, "iat": now,
                "exp": now + int(expires_in), **claims}
        return jwt.encode(body, key or self.key, algorithm="RS256", headers={"kid": "k1"})


async def test_oauth_tokens_of_the_issuer_are_checked_on_its_jwks(tmp_path: Path, nursery: Any):
    pages = await PageServer().start(nursery)
    issuer = Issuer()
    jwks_url = pages.add("/jwks.json", Page(issuer.jwks, content_type="application/json"))
    settings = OAuthSettings(ISSUER, jwks_url=jwks_url, admin_scope="team:admin")
    seen: dict[str, TokenVerifier] = {}

    def make(url: str) -> MCPServer[Any]:
        from ask_another.config import Config

        config = Config(home=tmp_path, oauth=settings)
        auth = plan_auth(config, "127.0.0.1", url, no_auth=False)
        assert auth.verifier is not None
        seen["verifier"] = auth.verifier
        return whoami_server(auth)

    async with serving(make) as url:
        for mode, _era in ERAS:
            assert await whoami(url, issuer.token(url), mode) == {
                "client_id": "carol", "subject": f"oauth:{ISSUER}#carol", "scopes": ["mcp"]}
            admin = issuer.token(url, subject="dana", scope="mcp team:admin")
            assert await whoami(url, admin, mode) == {
                "client_id": "dana", "subject": f"oauth:{ISSUER}#dana",
                "scopes": sorted([ADMIN_SCOPE, "mcp", "team:admin"])}
            # With another admin scope configured, a token the issuer gave a scope named
            # ask-another:admin (any user may be able to ask for one) makes no admin: the
            # tools read that name (user_of), so it was one.
            plain = issuer.token(url, subject="erin", scope=f"mcp {ADMIN_SCOPE}")
            assert await whoami(url, plain, mode) == {
                "client_id": "erin", "subject": f"oauth:{ISSUER}#erin", "scopes": ["mcp"]}

        # Each broken token: refused with the challenge, which names the resource metadata.
        for bad in (issuer.token(url, expires_in=-120),  # expired (past the 30 s leeway)
                    issuer.token("https://another.example/mcp"),  # another audience
                    issuer.token(url, issuer="https://elsewhere.example"),  # another issuer
                    issuer.token(url, key=issuer.other),  # not signed by the issuer's keys
                    issuer.token(url).rsplit(".", 1)[0] + ".AAAA",  # a forged signature
                    "not-a-jwt"):
            refused = await status_of(url, bad)
            assert refused.status_code == 401, bad
            challenge = refused.headers["www-authenticate"]
            assert 'error="invalid_token"' in challenge
            metadata_url = url.replace("/mcp", "/.well-known/oauth-protected-resource/mcp")
            assert f'resource_metadata="{metadata_url}"' in challenge

        # RFC 9728: the protected-resource metadata names this resource and its issuer.
        async with httpx.AsyncClient() as http:
            metadata = (await http.get(metadata_url)).json()
        assert metadata["resource"] == url
        assert metadata["authorization_servers"] == [ISSUER]

    # The JWKS was fetched once and its keys cached for every later token.
    assert [r.target for r in pages.requests] == ["/jwks.json"]
    assert isinstance(seen["verifier"], AnyOfVerifiers)
    assert [type(v) for v in seen["verifier"].verifiers] == [TokensFileVerifier, JwtVerifier]


async def test_a_token_whose_alg_does_not_fit_the_issuers_key_is_a_401(tmp_path: Path,
                                                                     nursery: Any,
                                                                     caplog: Any):
    # A JWT with alg ES256/ES384/ES512 naming the issuer's RSA kid: pyjwt raised TypeError,
    # uncaught, so each such request (no valid token needed) was a 500 and a traceback.
    from ask_another.config import Config

    pages = await PageServer().start(nursery)
    issuer = Issuer()
    jwks_url = pages.add("/jwks.json", Page(issuer.jwks, content_type="application/json"))
    config = Config(home=tmp_path, oauth=OAuthSettings(ISSUER, jwks_url=jwks_url))

    def make(url: str) -> MCPServer[Any]:
        return whoami_server(plan_auth(config, "127.0.0.1", url, no_auth=False))

    async with serving(make) as url:
        body = {"iss": ISSUER, "aud": url, "sub": "x", "exp": int(time.time()) + 300}
        for alg, curve in (("ES256", ec.SECP256R1()), ("ES384", ec.SECP384R1()),
                           ("ES512", ec.SECP521R1())):
            forged = jwt.encode(body, ec.generate_private_key(curve), algorithm=alg,
                                headers={"kid": "k1"})
            assert (await status_of(url, forged)).status_code == 401, alg
        # An HMAC-signed one and alg none name the kid too.
        for alg, key in (("HS256", "a shared secret that no issuer gave out"), ("none", None)):
            forged = jwt.encode(body, key, algorithm=alg, headers={"kid": "k1"})
            assert (await status_of(url, forged)).status_code == 401, alg
        carol = await whoami(url, issuer.token(url), "auto")
        assert carol["subject"] == f"oauth:{ISSUER}#carol"
    assert "Traceback" not in caplog.text


async def test_an_issuers_user_named_like_a_tokens_file_user_is_another_user(tmp_path: Path,
                                                                              nursery: Any):
    # A name is no identity: the issuer's user is its `iss` and `sub`, whatever the user claim
    # (here a username they may choose) says; the tokens-file user is their token's id.
    from ask_another.config import Config

    pages = await PageServer().start(nursery)
    issuer = Issuer()
    jwks_url = pages.add("/jwks.json", Page(issuer.jwks, content_type="application/json"))
    tokens = TokensFile(tmp_path / "tokens.json")
    ci = tokens.add("ci")
    (ci_user,) = tokens.users()
    config = Config(home=tmp_path, oauth=OAuthSettings(ISSUER, jwks_url=jwks_url,
                                                       user_claim="preferred_username"))

    def make(url: str) -> MCPServer[Any]:
        return whoami_server(plan_auth(config, "127.0.0.1", url, no_auth=False))

    async with serving(make) as url:
        named_ci = issuer.token(url, subject="8d1f-uuid", preferred_username="ci")
        assert await whoami(url, named_ci, "auto") == {
            "client_id": "ci", "subject": f"oauth:{ISSUER}#8d1f-uuid", "scopes": ["mcp"]}
        assert await whoami(url, ci, "auto") == {"client_id": "ci",
                                                 "subject": ci_user.principal, "scopes": []}
        # A token without a subject names nobody.
        no_sub = jwt.encode({"iss": ISSUER, "aud": url, "exp": int(time.time()) + 300,
                             "preferred_username": "ci"}, issuer.key, algorithm="RS256",
                            headers={"kid": "k1"})
        assert (await status_of(url, no_sub)).status_code == 401


async def test_tokens_naming_unknown_keys_do_not_fetch_the_jwks_again_while_it_fails(
        tmp_path: Path, nursery: Any):
    # PyJWKClient's cooldown starts only after a successful fetch: while the issuer's JWKS
    # failed, every request with a made-up `kid` (no token needed) fetched it again, each in a
    # trio worker thread waiting on the client's lock, so a flood filled the threads the SQLite
    # store needs. Now one fetch, then none for FETCH_PAUSE, and a token without a kid, none.
    from ask_another.config import Config

    pages = await PageServer().start(nursery)
    issuer = Issuer()
    jwks_url = pages.add("/jwks.json", Page(b"down", status=500))
    config = Config(home=tmp_path, oauth=OAuthSettings(ISSUER, jwks_url=jwks_url))

    def make(url: str) -> MCPServer[Any]:
        return whoami_server(plan_auth(config, "127.0.0.1", url, no_auth=False))

    async with serving(make) as url:
        body = {"iss": ISSUER, "aud": url, "sub": "x", "exp": int(time.time()) + 300}
        for n in range(20):
            forged = jwt.encode(body, issuer.key, algorithm="RS256", headers={"kid": f"k{n}"})
            assert (await status_of(url, forged)).status_code == 401
        kidless = jwt.encode(body, issuer.key, algorithm="RS256")
        assert (await status_of(url, kidless)).status_code == 401
    assert [r.target for r in pages.requests] == ["/jwks.json"]


async def test_a_known_key_is_kept_while_the_jwks_cannot_be_fetched(nursery: Any,
                                                                   mock_clock: Any):
    # Fetched again after JWKS_SECONDS (a key the issuer removed is then refused), but an
    # issuer that is down locks no one out who has a known key.
    from ask_another.server.auth import JWKS_SECONDS

    pages = await PageServer().start(nursery)
    issuer = Issuer()
    jwks_url = pages.add("/jwks.json", Page(issuer.jwks, content_type="application/json"))
    verifier = JwtVerifier(OAuthSettings(ISSUER, jwks_url=jwks_url), "https://ask.example/mcp")
    token = issuer.token("https://ask.example/mcp")
    assert await verifier.verify_token(token) is not None
    pages.add("/jwks.json", Page(b"down", status=500))
    mock_clock.jump(JWKS_SECONDS + 1)  # the hour is up: the next look-up fetches
    found = await verifier.verify_token(token)
    assert found is not None and found.subject == f"oauth:{ISSUER}#carol"
    assert [r.target for r in pages.requests] == ["/jwks.json", "/jwks.json"]


async def test_oauth_finds_the_jwks_in_the_issuers_metadata(nursery: Any):
    pages = await PageServer().start(nursery)
    issuer = Issuer()
    jwks_url = pages.add("/keys", Page(issuer.jwks, content_type="application/json"))
    own = pages.url("")
    pages.add("/.well-known/oauth-authorization-server", Page(
        json.dumps({"issuer": own, "jwks_uri": jwks_url}).encode(),
        content_type="application/json"))
    verifier = JwtVerifier(OAuthSettings(own), "https://ask.example/mcp")
    found = await verifier.verify_token(issuer.token("https://ask.example/mcp", issuer=own))
    assert found is not None and found.client_id == "carol"
    assert await verifier.verify_token(issuer.token("https://ask.example/mcp")) is None


async def test_an_issuer_without_keys_is_told_from_one_that_cannot_be_reached(nursery: Any):
    # Both were "publishes no jwks_uri": an issuer URL with a typo sent the admin looking for a
    # setting instead of at the URL.
    from ask_another.server.auth import discover_jwks

    pages = await PageServer().start(nursery)
    pages.add("/.well-known/openid-configuration", Page(b'{"issuer": "x"}',
                                                         content_type="application/json"))
    with pytest.raises(ConfigError) as keyless:
        await trio.to_thread.run_sync(discover_jwks, pages.url(""))
    assert "/.well-known/oauth-authorization-server: HTTP 404" in str(keyless.value)
    assert "/.well-known/openid-configuration: no jwks_uri" in str(keyless.value)

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{sock.getsockname()[1]}"
    with pytest.raises(ConfigError) as unreachable:
        await trio.to_thread.run_sync(discover_jwks, closed)
    assert f"cannot find the signing keys (JWKS) of the issuer {closed}" in str(unreachable.value)
    assert "/.well-known/openid-configuration: cannot connect" in str(unreachable.value)


async def test_doctor_s_check_of_the_issuer_finds_its_keys_or_says_why(nursery: Any):
    # doctor said nothing of the issuer: a wrong one showed only at the first refused token.
    from ask_another.server.auth import check_jwks

    pages = await PageServer().start(nursery)
    issuer = Issuer()
    jwks_url = pages.add("/keys", Page(issuer.jwks, content_type="application/json"))
    own = pages.url("")
    pages.add("/.well-known/openid-configuration", Page(
        json.dumps({"issuer": own, "jwks_uri": jwks_url}).encode(),
        content_type="application/json"))
    found = await trio.to_thread.run_sync(check_jwks, OAuthSettings(own))
    assert found == f"1 key(s) at {jwks_url}"
    not_keys = pages.add("/not-keys", Page(b'{"hello": 1}', content_type="application/json"))
    with pytest.raises(ConfigError, match=f"{not_keys} is not a JWKS with keys"):
        await trio.to_thread.run_sync(check_jwks, OAuthSettings(own, jwks_url=not_keys))


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can give a file to another user")
def test_token_add_as_root_keeps_the_tokens_file_the_services(tmp_path: Path):
    # Root running `token add` without `sudo -u` renamed a root-owned 0600 file over the
    # service user's: the running service could no longer read it, and refused every token.
    import pwd

    service = pwd.getpwnam("nobody")
    home = tmp_path / "home"
    home.mkdir()
    os.chown(home, service.pw_uid, service.pw_gid)
    tokens = TokensFile(home / "tokens.json")
    tokens.add("alice")  # a new file: its directory's owner
    assert (home / "tokens.json").stat().st_uid == service.pw_uid
    tokens.add("bob")  # rewritten: the file's owner kept
    st = (home / "tokens.json").stat()
    assert (st.st_uid, st.st_gid) == (service.pw_uid, service.pw_gid)
    assert st.st_mode & 0o777 == 0o600
    assert [u.name for u in tokens.users()] == ["alice", "bob"]
    assert (home / "tokens.json.lock").stat().st_uid == service.pw_uid
