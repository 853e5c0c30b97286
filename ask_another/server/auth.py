"""Who is calling `serve --http`: bearer tokens checked through the SDK's `TokenVerifier`.

Two verifiers, both returning the same identity (the contract the per-user scoping reads through
`mcp.server.auth.middleware.auth_context.get_access_token()`): an `AccessToken` whose `subject`
is the user's stable principal id (users.py: what their rows carry), whose `client_id` is their
name, and whose `scopes` hold `ADMIN_SCOPE` for an admin.

- `TokensFileVerifier`: a JSON file (`ASK_ANOTHER_TOKENS_FILE`, default `tokens.json` in the
  home) holding one SHA-256 hash per user, never a token, and the user's random id.
  `ask-another token add NAME` makes a random token, prints it once and stores its hash
  (`TokensFile`); `token rotate NAME` replaces the token and keeps the id (the same user);
  `token remove NAME` keeps the id among the removed ones, so a user added later under that
  name gets another id and never the removed user's jobs. The file is re-read when it changes,
  so a change counts from the next request without a restart.
- `JwtVerifier`: an OAuth 2.1 resource server. Tokens are JWTs signed by the configured issuer's
  keys (its JWKS, fetched with pyjwt's `PyJWKClient` in a thread and cached); `iss`, `aud` and
  `exp` are checked. The user is `oauth:ISSUER#SUB`, whatever claim
  (`ASK_ANOTHER_OAUTH_USER_CLAIM`) names them: a name is not an identity, and a tokens-file
  user's name never gives an issuer's user that user's rows. `auth_settings` makes the SDK
  publish the RFC 9728 protected-resource metadata that points clients at the issuer.

A missing or refused token gets the SDK's 401 with `WWW-Authenticate` (its bearer middleware).
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import hashlib
import hmac
import json
import os
import re
import secrets
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import trio
from mcp.server.auth.provider import AccessToken, TokenVerifier
from mcp.server.auth.settings import AuthSettings

from ask_another.config import OAuthSettings
from ask_another.errors import ConfigError
from ask_another.logs import get_logger
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

USER_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,63}")
TOKEN_PREFIX: Final = "aa_"  # so a leaked token is recognisable (and greppable) as ours
FILE_VERSION: Final = 2  # 2: each user has an `id`, and removed users' ids are kept
JWKS_SECONDS: Final = 3600.0  # how long the issuer's key set is cached
KEY_SECONDS: Final = 300.0  # how long a key found in it is used before it is looked up again
FETCH_PAUSE: Final = 30.0  # seconds without a fetch of the keys after one failed


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


@dataclass(frozen=True, slots=True)
class TokenUser:
    """One line of the tokens file: a user, the hash of their token, whether they are admin,
    and their id (None: an entry written before ids, version 1)."""

    name: str
    sha256: str
    admin: bool = False
    created: str = ""
    id: str | None = None

    @property
    def principal(self) -> str:
        """The user's stable id, what their rows carry (users.py)."""
        if self.id is None:  # the rows migration 8 moved from the name they were made under
            return f"name:{self.name}"
        return f"token:{self.name}:{self.id}"


@dataclass(frozen=True, slots=True)
class TokensBody:
    """The whole file: the users, and the ids of removed users (id -> name, when removed)."""

    users: list[TokenUser]
    removed: dict[str, dict[str, str]]


class TokensFile:
    """The tokens file: read, and changed atomically (a temporary file renamed over it, mode
    0600, under an exclusive lock so two `token add` commands do not lose one another)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def users(self) -> list[TokenUser]:
        """The users, in the file's order; [] when there is no file. Raises `ConfigError` for a
        file that is not a tokens file."""
        return self._read().users

    def _read(self) -> TokensBody:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return TokensBody([], {})
        except OSError as exc:
            raise ConfigError(f"the tokens file {self.path} cannot be read: "
                              f"{exc.strerror or exc}") from None
        return _parse(self.path, text)

    def add(self, name: str, *, admin: bool = False) -> str:
        """Make a token for a new user `name` (a new id: never a removed user's), store its
        hash, return the token (shown once)."""
        if not USER_NAME.fullmatch(name):
            raise ConfigError(f"{name!r} is not a user name: use 1-64 letters, digits and . _ @ -"
                              ", starting with a letter or digit")
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        with self._locked():
            body = self._read()
            if any(u.name == name for u in body.users):
                raise ConfigError(f"{name} already has a token; `ask-another token rotate {name}`"
                                  " replaces it")
            taken = {u.principal for u in body.users} | set(body.removed)
            user = TokenUser(name, _digest(token), admin, _now(), secrets.token_hex(8))
            while user.principal in taken:  # 64 random bits: for the rule's sake, not the odds
                user = TokenUser(name, user.sha256, admin, user.created, secrets.token_hex(8))
            body.users.append(user)
            self._write(body)
        return token

    def rotate(self, name: str) -> str:
        """A new token for the user `name`, who keeps their id (their jobs, conversations and
        usage); the old token is refused from the next request. Returns the token."""
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        with self._locked():
            body = self._read()
            body.users[:] = [TokenUser(u.name, _digest(token), u.admin, _now(), u.id)
                             if u.name == name else u for u in self._named(body, name)]
            self._write(body)
        return token

    def remove(self, name: str) -> None:
        """Revoke the user's token; their id is kept among the removed ones, never given to
        another user."""
        with self._locked():
            body = self._read()
            users = self._named(body, name)
            gone = next(u for u in users if u.name == name)
            body.users[:] = [u for u in users if u.name != name]
            body.removed[gone.principal] = {"name": name, "removed": _now()}
            self._write(body)

    def _named(self, body: TokensBody, name: str) -> list[TokenUser]:
        if not any(u.name == name for u in body.users):
            raise ConfigError(f"no token for {name!r} in {self.path} "
                              "(`ask-another token list` shows the users)")
        return body.users

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        try:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)  # not the umask's
            fd = os.open(self.path.with_name(self.path.name + ".lock"),
                         os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, 0o600)
            if os.geteuid() == 0:  # as in _write: the service user's `token add` must open it
                owner = os.stat(self.path.parent)
                os.fchown(fd, owner.st_uid, owner.st_gid)
        except OSError as exc:
            raise ConfigError(f"the tokens file {self.path} cannot be written: "
                              f"{exc.strerror or exc}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _write(self, tokens: TokensBody) -> None:
        body = {"version": FILE_VERSION, "users": {
            u.name: {"sha256": u.sha256, "admin": u.admin, "created": u.created,
                     **({"id": u.id} if u.id is not None else {})} for u in tokens.users},
                "removed": tokens.removed}
        temporary = self.path.with_name(f".{self.path.name}.{secrets.token_hex(4)}")
        try:
            fd = os.open(temporary, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_CLOEXEC, 0o600)
            if os.geteuid() == 0:
                # root forgetting `sudo -u ask-another`: a root-owned 0600 file renamed over the
                # service's would lock every user out at its next request. Keep the owner of the
                # file (or, for a new one, of its directory).
                owner = os.stat(self.path if self.path.exists() else self.path.parent)
                os.fchown(fd, owner.st_uid, owner.st_gid)
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump(body, out, indent=2)
                out.write("\n")
                out.flush()
                os.fsync(out.fileno())
            os.replace(temporary, self.path)
        except OSError as exc:
            with contextlib.suppress(OSError):
                temporary.unlink()
            raise ConfigError(f"the tokens file {self.path} cannot be written: "
                              f"{exc.strerror or exc}") from None


def _parse(path: Path, text: str) -> TokensBody:
    def bad(why: str) -> ConfigError:
        return ConfigError(f"{path} is not an ask-another tokens file ({why}); "
                           "`ask-another token add NAME` writes one")

    try:
        body = json.loads(text)
    except ValueError as exc:
        raise bad(f"not JSON: {exc}") from None
    if not isinstance(body, dict) or not isinstance(body.get("users"), dict):
        raise bad("no \"users\" object")
    users = []
    for name, entry in body["users"].items():
        digest = entry.get("sha256") if isinstance(entry, dict) else None
        if not isinstance(digest, str) or not re.fullmatch(r"[0-9a-f]{64}", digest):
            raise bad(f"the entry of {name!r} has no sha256 hash")
        if not USER_NAME.fullmatch(name):  # a `:` would make one kind of id another's
            raise bad(f"{name!r} is not a user name")
        user_id = entry.get("id")
        if user_id is not None and not (isinstance(user_id, str)
                                        and re.fullmatch(r"[0-9a-f]{16}", user_id)):
            raise bad(f"the entry of {name!r} has an id that is not 16 hex digits")
        users.append(TokenUser(name, digest, entry.get("admin") is True,
                               str(entry.get("created", "")), user_id))
    removed = body.get("removed", {})
    if not isinstance(removed, dict):
        raise bad("\"removed\" is not an object")
    return TokensBody(users, removed)


def _access_token(token: str, user: TokenUser) -> AccessToken:
    return AccessToken(token=token, client_id=user.name, subject=user.principal,
                       scopes=[ADMIN_SCOPE] if user.admin else [])


LOCAL_TOKEN_FILE: Final = "local-token"
"""`serve --http --no-auth`'s token, in the home: readable by the local user only."""


def local_token(home: Path) -> tuple[Path, str]:
    """The token `serve --http --no-auth` requires, from `home/local-token` (made 0600 when it
    is missing, or not this user's own private file). Without it every local account could use
    a loopback server as the local user, an admin who spends the keys. `ConfigError` (one line)
    when it cannot be kept."""
    path = home / LOCAL_TOKEN_FILE
    try:
        home.mkdir(mode=0o700, parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            found = os.lstat(path)
            if stat.S_ISREG(found.st_mode) and found.st_uid == os.geteuid() \
                    and not found.st_mode & 0o077:
                token = path.read_text(encoding="utf-8").strip()
                if token.startswith(TOKEN_PREFIX) and len(token) > 20:
                    return path, token
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        temporary = path.with_name(f".{path.name}.{os.getpid()}")
        fd = os.open(temporary, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(token + "\n")
        os.replace(temporary, path)
    except OSError as exc:
        raise ConfigError(f"--no-auth needs its token file {path}, which cannot be written: "
                          f"{exc.strerror or exc}") from None
    return path, token


class LocalTokenVerifier(TokenVerifier):
    """The one token of `local_token`, whose user is the local user."""

    def __init__(self, token: str) -> None:
        self._digest = _digest(token)

    async def verify_token(self, token: str) -> AccessToken | None:
        if not hmac.compare_digest(_digest(token), self._digest):
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
        digest = _digest(token)
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
        self._jwks: jwt.PyJWKClient | None = None
        # kid -> (key, when to look it up again): found without a thread or a lock.
        self._known: dict[str, tuple[Any, float]] = {}
        self._failed_at: float | None = None  # trio time of the last failed fetch of the keys
        # One look-up of the issuer's keys at a time, waited for here rather than in a worker
        # thread each: tokens naming unknown keys (anyone can send them) must not fill trio's
        # threads, which the SQLite store uses too.
        self._fetching = trio.Lock()

    async def _keys(self) -> Any:
        if self._jwks is None:
            url = self.settings.jwks_url
            if url is None:
                url = await trio.to_thread.run_sync(discover_jwks, self.settings.issuer)
            # The key set cached for an hour; an unknown `kid` makes PyJWKClient fetch again,
            # at most every 30 s (its cooldown) while the issuer answers.
            self._jwks = self._jwt.PyJWKClient(url, lifespan=JWKS_SECONDS, timeout=10)
        return self._jwks

    async def _signing_key(self, kid: str) -> Any:
        """The issuer's key named `kid`. A key found is used `KEY_SECONDS`, then looked up again
        in the key set (so a key the issuer removed is refused within the set's hour), and kept
        while the issuer cannot be reached. After a failed fetch no other is tried for
        `FETCH_PAUSE` seconds: PyJWKClient's cooldown starts only after a successful one, so
        each token with a made-up `kid` fetched again while the issuer was down."""
        known = self._known.get(kid)
        if known is not None and trio.current_time() < known[1]:
            return known[0]
        async with self._fetching:
            known = self._known.get(kid)
            now = trio.current_time()
            if known is not None and now < known[1]:
                return known[0]
            if self._failed_at is not None and now - self._failed_at < FETCH_PAUSE:
                if known is not None:
                    return known[0]
                raise self._jwt.PyJWKClientError(
                    f"the issuer's keys could not be fetched {now - self._failed_at:.0f} s ago; "
                    f"not tried again for {FETCH_PAUSE:g} s")
            try:
                jwks = await self._keys()
                key = await trio.to_thread.run_sync(jwks.get_signing_key, kid)
            except (self._jwt.PyJWKClientConnectionError, ConfigError):
                self._failed_at = trio.current_time()
                if known is not None:
                    return known[0]
                raise
            self._known[kid] = (key, trio.current_time() + KEY_SECONDS)
            return key

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
