"""Who is calling `serve --http`: bearer tokens checked through the SDK's `TokenVerifier`.

Two verifiers, both returning the same identity (the contract the per-user scoping reads through
`mcp.server.auth.middleware.auth_context.get_access_token()`): an `AccessToken` whose `subject`
is the user's stable principal id (users.py: what their rows carry), whose `client_id` is their
name, and whose `scopes` hold `ADMIN_SCOPE` for an admin.

- `TokensFileVerifier`: the tokens file (`TokensFile`, in tokens.py with `local_token`, so the
  `token` commands import no SDK): one SHA-256 hash per user, never a token, and the user's
  random id. The file is re-read when it changes, so a change counts from the next request
  without a restart.
- `JwtVerifier`: an OAuth 2.1 resource server. Tokens are JWTs signed by the configured issuer's
  keys (its JWKS, fetched with httpx in a thread, bounded in size and in its whole duration,
  paused after each fetch, and cached); `iss`, `aud` and `exp` are checked. The user is
  `oauth:ISSUER#SUB`, whatever claim (`ASK_ANOTHER_OAUTH_USER_CLAIM`) names them: a name is
  not an identity, and a tokens-file user's name never gives an issuer's user that user's rows.
  `auth_settings` makes the SDK publish the RFC 9728 protected-resource metadata that points
  clients at the issuer.

A missing or refused token gets the SDK's 401 with `WWW-Authenticate` (its bearer middleware).
"""

from __future__ import annotations

import hmac
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

import trio
from mcp.server.auth.provider import AccessToken, TokenVerifier
from mcp.server.auth.settings import AuthSettings

from ask_another.config import OAuthSettings
from ask_another.errors import ConfigError
from ask_another.logs import get_logger
from ask_another.server.tokens import TokensFile, TokenUser, token_sha256  # the file, SDK-free
from ask_another.users import ADMIN_SCOPE, LOCAL_CLAIM  # the one definitions (users.py)

__all__ = [
    "ADMIN_SCOPE",
    "AnyOfVerifiers",
    "JwtVerifier",
    "TokenUser",
    "TokensFile",
    "TokensFileVerifier",
    "auth_settings",
    "check_jwks",
    "discover_jwks",
]

log = get_logger("ask_another.server.auth")

JWKS_SECONDS: Final = 3600.0  # how long the issuer's key set is used before it is fetched again
FETCH_PAUSE: Final = 30.0  # seconds without another fetch of the keys after one
FETCH_SECONDS: Final = 5.0  # the whole of one fetch of the keys, however slowly they come
KEYS_WAIT: Final = 5.0  # the longest a request waits for the keys before it is refused
JWKS_MAX_BYTES: Final = 1 << 20  # a key set is a few kB; more is not read


class KeysUnavailable(Exception):
    """The issuer's keys could not be had: unreachable, too slow, too large, or useless."""


def _access_token(token: str, user: TokenUser) -> AccessToken:
    return AccessToken(token=token, client_id=user.name, subject=user.principal,
                       scopes=[ADMIN_SCOPE] if user.admin else [])


class LocalTokenVerifier(TokenVerifier):
    """The one token of `local_token`, whose user is the local user."""

    def __init__(self, token: str) -> None:
        self._digest = token_sha256(token)

    async def verify_token(self, token: str) -> AccessToken | None:
        if not hmac.compare_digest(token_sha256(token), self._digest):
            return None
        return AccessToken(token=token, client_id="(local)", scopes=[ADMIN_SCOPE],
                           claims={LOCAL_CLAIM: True})


class TokensFileVerifier(TokenVerifier):
    """Bearer tokens whose SHA-256 is in the tokens file; re-reads the file when it changes."""

    def __init__(self, path: Path) -> None:
        self.file = TokensFile(path)
        self._seen: tuple[int, int, int] | None = None
        self._users: list[TokenUser] = []
        self.reload()

    def reload(self) -> None:
        """Read the file now if it changed (a stat per request: microseconds, no thread)."""
        try:
            st = os.stat(self.file.path)
        except FileNotFoundError:
            self._seen, self._users = None, []
            return
        except OSError as exc:  # a home that is a file, a directory we may not enter
            raise ConfigError(f"the tokens file {self.file.path} cannot be read: "
                              f"{exc.strerror or exc}") from None
        seen = (st.st_mtime_ns, st.st_size, st.st_ino)
        if seen != self._seen:
            self._users = self.file.users()
            self._seen = seen

    @property
    def users(self) -> list[TokenUser]:
        return list(self._users)

    async def verify_token(self, token: str) -> AccessToken | None:
        try:
            self.reload()
        except ConfigError as exc:  # edited by hand into something unreadable: refuse all
            log.error("auth.tokens_file_unreadable", error=str(exc))
            return None
        digest = token_sha256(token)
        found = None
        for user in self._users:  # every entry compared, in constant time each
            if hmac.compare_digest(user.sha256, digest):
                found = user
        if found is None:
            return None
        return _access_token(token, found)


class JwtVerifier(TokenVerifier):
    """JWTs signed by the issuer's keys: signature (JWKS), `iss`, `aud` and `exp` checked."""

    FAMILIES: Final = {"RSA": ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512"),
                       "EC": ("ES256", "ES384", "ES512"), "OKP": ("EdDSA",)}
    """The algorithms a token may name, by the kind (`kty`) of the issuer's key it names."""

    def __init__(self, settings: OAuthSettings, audience: str) -> None:
        import jwt  # pyjwt, a dependency of the MCP SDK

        self.settings = settings
        self.audience = audience
        self._jwt = jwt
        self._url = settings.jwks_url  # found in the issuer's metadata at the first fetch if None
        self._keys: dict[str, Any] = {}  # kid -> the issuer's key, from the last useful fetch
        self._fetched_at: float | None = None  # trio time of the last fetch, whatever came
        self._useful_at: float | None = None  # and of the last that brought usable keys
        self._problem: str | None = None  # why the last fetch brought none
        # One fetch of the issuer's keys at a time, waited for here rather than in a worker
        # thread each: tokens naming unknown keys (anyone can send them) must not fill trio's
        # threads, which the SQLite store uses too.
        self._fetching = trio.Lock()

    async def _signing_key(self, kid: str) -> Any:
        """The issuer's key named `kid`, from the key set fetched at most every `FETCH_PAUSE`
        seconds (a `kid` it lacks is refused until then: anyone can send a token naming a
        made-up one) and fetched again after `JWKS_SECONDS` (a key the issuer removed is then
        refused). A key set that cannot be had (unreachable, slower than `FETCH_SECONDS` in
        all, over `JWKS_MAX_BYTES`, not JSON, empty, no usable key) pauses the fetches the
        same way, and the keys of the last useful one are kept meanwhile. A request waits at
        most `KEYS_WAIT` for a fetch; the fetch's thread is abandoned on cancellation, so it
        never holds shutdown."""
        now = trio.current_time()
        if kid in self._keys and self._useful_at is not None \
                and now - self._useful_at < JWKS_SECONDS:
            return self._keys[kid]
        with trio.move_on_after(KEYS_WAIT):
            async with self._fetching:
                now = trio.current_time()
                if self._fetched_at is None or now - self._fetched_at >= FETCH_PAUSE:
                    await self._fetch()
                if kid in self._keys:
                    return self._keys[kid]
                raise self._jwt.PyJWKClientError(
                    self._problem or f"the issuer's key set has no key {kid!r}")
        raise self._jwt.PyJWKClientError(f"the issuer's keys did not come within {KEYS_WAIT:g} s")

    async def _fetch(self) -> None:
        self._fetched_at = trio.current_time()  # a fetch cut short pauses the next ones too
        self._problem = "the fetch of the issuer's keys did not finish"
        try:
            if self._url is None:
                self._url = await trio.to_thread.run_sync(
                    discover_jwks, self.settings.issuer, abandon_on_cancel=True)
            url = self._url
            body = await trio.to_thread.run_sync(fetch_jwks, url, abandon_on_cancel=True)
            keys = self._usable_keys(body, url)
        except (KeysUnavailable, ConfigError) as exc:
            self._problem = str(exc)
            log.warning("auth.jwks_unavailable", reason=self._problem,
                        next_try_seconds=FETCH_PAUSE)
            return
        self._keys, self._problem = keys, None
        self._useful_at = trio.current_time()

    def _usable_keys(self, body: bytes, url: str) -> dict[str, Any]:
        try:
            found = self._jwt.PyJWKSet.from_json(body.decode("utf-8")).keys
        except (ValueError, UnicodeDecodeError, self._jwt.PyJWTError) as exc:
            raise KeysUnavailable(f"{url} is not a JWKS with usable keys ({exc})") from None
        keys = {key.key_id: key for key in found if key.key_id}
        if not keys:
            raise KeysUnavailable(f"{url} has no key with a kid")
        return keys

    async def verify_token(self, token: str) -> AccessToken | None:
        jwt = self._jwt
        try:
            kid = jwt.get_unverified_header(token).get("kid")
            if not isinstance(kid, str):  # the issuer's keys are found by kid only
                raise jwt.InvalidTokenError("the token names no signing key (kid)")
            key = await self._signing_key(kid)
            # Only the algorithms of the key's own kind: pyjwt given an RSA key for a token
            # whose alg is ES256 raised TypeError (a 500 and a traceback per request, with no
            # valid token needed).
            algorithms = self.FAMILIES.get(key.key_type, ())
            claims = jwt.decode(token, key.key, algorithms=list(algorithms),
                                audience=self.audience, issuer=self.settings.issuer,
                                options={"require": ["exp", "iss", "aud", "sub"]}, leeway=30)
        except (jwt.PyJWTError, ConfigError, OSError) as exc:
            log.info("auth.jwt_refused", reason=str(exc))
            return None
        except Exception as exc:  # anything else the library raises on a crafted token: refused
            log.warning("auth.jwt_refused", reason=f"{type(exc).__name__}: {exc}")
            return None
        user = claims.get(self.settings.user_claim)
        if not isinstance(user, str) or not user:
            log.info("auth.jwt_refused", reason=f"no {self.settings.user_claim!r} claim")
            return None
        subject = claims["sub"]
        if not isinstance(subject, str) or not subject:
            log.info("auth.jwt_refused", reason="an empty or non-string 'sub' claim")
            return None
        granted = _scopes(claims)
        admin = self.settings.admin_scope in granted
        # ADMIN_SCOPE is what the tools read (user_of): present for the configured admin scope
        # only, never because the issuer granted a scope of that name to anyone.
        scopes = (granted - {ADMIN_SCOPE}) | ({ADMIN_SCOPE} if admin else set())
        # The id is the issuer's and its subject's, never the claimed name: after `token remove
        # carol`, an issuer's user whose claim is "carol" got carol's jobs and conversations.
        principal = f"oauth:{claims['iss']}#{subject}"
        return AccessToken(token=token, client_id=user, subject=principal, scopes=sorted(scopes),
                           expires_at=int(claims["exp"]), resource=self.audience,
                           claims={"iss": claims["iss"]})


def _scopes(claims: dict[str, Any]) -> set[str]:
    """The token's scopes: `scope` (RFC 9068, space-separated) or `scp` (a list, some issuers)."""
    found: set[str] = set()
    for name in ("scope", "scp"):
        value = claims.get(name)
        if isinstance(value, str):
            found |= set(value.split())
        elif isinstance(value, list):
            found |= {v for v in value if isinstance(v, str)}
    return found


def fetch_jwks(url: str) -> bytes:
    """The body at `url`: at most `JWKS_MAX_BYTES`, within `FETCH_SECONDS` in all (checked at
    each read, each read waiting at most that too), undecoded (a compressed body is refused as
    not JSON rather than expanded). Raises `KeysUnavailable`. Blocking: run in a thread."""
    import httpx

    ends = time.monotonic() + FETCH_SECONDS
    body = bytearray()
    try:
        with httpx.stream("GET", url, timeout=FETCH_SECONDS,
                          headers={"Accept-Encoding": "identity"}) as response:
            if response.status_code != 200:
                raise KeysUnavailable(f"{url} answered HTTP {response.status_code}")
            for chunk in response.iter_raw():
                body += chunk
                if len(body) > JWKS_MAX_BYTES:
                    raise KeysUnavailable(f"{url} sent more than {JWKS_MAX_BYTES} bytes")
                if time.monotonic() > ends:
                    raise KeysUnavailable(f"{url} took more than {FETCH_SECONDS:g} s")
    except httpx.HTTPError as exc:
        raise KeysUnavailable(f"cannot fetch the issuer's keys from {url}: "
                              f"{exc or type(exc).__name__}") from None
    return bytes(body)


def check_jwks(settings: OAuthSettings) -> str:
    """What `doctor` says of the issuer: where its keys are and how many, fetched now. Raises
    `ConfigError` with the reason when they cannot be found or fetched. Blocking: a thread."""
    import httpx

    url = settings.jwks_url or discover_jwks(settings.issuer)
    try:
        response = httpx.get(url, timeout=10)
        keys = response.json().get("keys") if response.status_code == 200 else None
    except httpx.HTTPError as exc:
        raise ConfigError(f"cannot fetch the issuer's keys from {url}: {exc}") from None
    except (ValueError, AttributeError):
        keys = None
    if not isinstance(keys, list) or not keys:
        raise ConfigError(f"{url} is not a JWKS with keys (HTTP {response.status_code}); "
                          "check ASK_ANOTHER_OAUTH_JWKS_URL")
    return f"{len(keys)} key(s) at {url}"


def discover_jwks(issuer: str) -> str:
    """The issuer's `jwks_uri`, from its RFC 8414 metadata (or OpenID Connect discovery).
    Blocking: run in a thread."""
    import httpx

    base = issuer.rstrip("/")
    tried = []  # what each place said: an unreachable issuer is not one without a jwks_uri
    for path in ("/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"):
        try:
            response = httpx.get(base + path, timeout=10)
            if response.status_code != 200:
                tried.append(f"{path}: HTTP {response.status_code}")
                continue
            body = response.json()
        except httpx.HTTPError as exc:
            tried.append(f"{path}: cannot connect ({exc or type(exc).__name__})")
            continue
        except ValueError:
            tried.append(f"{path}: not JSON")
            continue
        uri = body.get("jwks_uri") if isinstance(body, dict) else None
        if isinstance(uri, str) and uri:
            return uri
        tried.append(f"{path}: no jwks_uri")
    raise ConfigError(f"cannot find the signing keys (JWKS) of the issuer {issuer} "
                      f"({'; '.join(tried)}); check ASK_ANOTHER_OAUTH_ISSUER, or set "
                      "ASK_ANOTHER_OAUTH_JWKS_URL")


class AnyOfVerifiers(TokenVerifier):
    """The first verifier that accepts the token (OAuth users and tokens-file users at once)."""

    def __init__(self, verifiers: Sequence[TokenVerifier]) -> None:
        self.verifiers = tuple(verifiers)

    async def verify_token(self, token: str) -> AccessToken | None:
        for verifier in self.verifiers:
            found = await verifier.verify_token(token)
            if found is not None:
                return found
        return None


def auth_settings(resource_url: str, oauth: OAuthSettings | None) -> AuthSettings:
    """The SDK's auth settings: with OAuth, the resource server that publishes its RFC 9728
    metadata (and names it in `WWW-Authenticate`); without, bearer tokens only."""
    if oauth is None:
        # `issuer_url` is required by the model but used only for the metadata, which a tokens
        # file has none of (no resource_server_url: no metadata route).
        return AuthSettings.model_validate({"issuer_url": resource_url,
                                            "resource_server_url": None})
    # Strings, not AnyHttpUrl: the settings keep a path-less issuer as written (no "/" added),
    # and RFC 8414 compares issuers as exact strings.
    return AuthSettings.model_validate({"issuer_url": oauth.issuer,
                                        "resource_server_url": resource_url,
                                        "validate_token_resource": False})  # we check `aud`
