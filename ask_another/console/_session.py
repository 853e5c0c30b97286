"""The console's sessions: a signed cookie, its CSRF token, and one-time login links.

A session is a cookie the server signed (HMAC-SHA256 with the console's key) holding who logged
in, how, and until when; nothing is kept per session in memory, so a restart keeps people
logged in when the key is kept (`serve --http`: ``console.key`` in the home, 0600) and logs them
out when it is not (`ask-another console`: a key per run). A logout is kept in the store
(store/sessions.py, asked by the console on each request), so it holds across restarts and on
every node of the store. A login with a tokens-file token is re-checked on every request
against the file (the hash of its hash; a stat when it has not changed), so `token remove` ends
that user's sessions at once, on every node reading that file; an OAuth login lasts no longer
than its token. The CSRF token of a session is derived from it (HMAC of its nonce), so every form of
that session carries it and a form from another site cannot.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from ask_another.errors import ConfigError
from ask_another.users import User

__all__ = ["COOKIE", "LIFETIME", "LoginCodes", "Session", "Sessions", "load_key", "token_digest",
           "token_proof"]

COOKIE: Final = "ask_another_console"
LIFETIME: Final = 12 * 3600.0
"""Seconds a session lasts (an OAuth login: no longer than its token)."""
CODE_SECONDS: Final = 300.0
"""Seconds a one-time login link of `ask-another console` can be used."""

Kind = Literal["file", "oauth", "local"]


@dataclass(frozen=True, slots=True)
class Session:
    user: User
    kind: Kind
    proof: str  # "file": the hash of the token's hash; otherwise ""
    expires: float
    nonce: str


def token_digest(token: str) -> str:
    """A token's SHA-256, as the tokens file stores it (server/auth.py)."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def token_proof(sha256: str) -> str:
    """What a session of a tokens-file login holds of its token: the hash of its stored hash."""
    return hashlib.sha256(sha256.encode()).hexdigest()[:32]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class Sessions:
    """Issue and read signed session cookies. `still_valid(session)` re-checks a login against
    what it came from (the tokens file) on every request."""

    def __init__(self, key: bytes, still_valid: Callable[[Session], User | None]) -> None:
        self.key = key
        self.still_valid = still_valid

    def _sign(self, payload: bytes) -> str:
        return _b64(hmac.new(self.key, payload, hashlib.sha256).digest())

    def issue(self, user: User, kind: Kind, proof: str = "",
              expires: float | None = None) -> tuple[str, Session]:
        """A new session: the cookie's value and what it holds."""
        now = time.time()
        until = now + LIFETIME if expires is None else min(expires, now + LIFETIME)
        session = Session(user, kind, proof, until, secrets.token_urlsafe(12))
        body = json.dumps({"u": user.id, "m": user.name, "a": user.admin, "k": kind, "p": proof,
                           "e": until, "n": session.nonce}, separators=(",", ":")).encode()
        return f"{_b64(body)}.{self._sign(body)}", session

    def read(self, cookie: str | None) -> Session | None:
        """The session of a cookie, or None: unsigned, expired or no longer valid (whether it
        was logged out is the store's to say: `store.sessions.session_ended`)."""
        if not cookie or cookie.count(".") != 1:
            return None
        body_text, signature = cookie.split(".")
        try:
            body = _unb64(body_text)
        except ValueError:
            return None
        if not hmac.compare_digest(self._sign(body), signature):
            return None
        fields = json.loads(body)
        session = Session(User(fields["u"], bool(fields["a"]), fields.get("m")), fields["k"],
                          fields["p"], float(fields["e"]), fields["n"])
        if session.expires <= time.time():
            return None
        user = self.still_valid(session)
        if user is None:
            return None
        return Session(user, session.kind, session.proof, session.expires, session.nonce)

    def csrf(self, session: Session) -> str:
        """The CSRF token every form of `session` carries."""
        return self._sign(b"csrf:" + session.nonce.encode())

    def sign_text(self, session: Session, text: str) -> str:
        """A signature of `text` for `session` (what an action said, carried in a redirect)."""
        return self._sign(b"said:" + session.nonce.encode() + b":" + text.encode())[:22]

    def csrf_ok(self, session: Session, token: str | None) -> bool:
        return token is not None and hmac.compare_digest(self.csrf(session), token)


class LoginCodes:
    """The one-time login links of `ask-another console`: each code works once, for
    `CODE_SECONDS`."""

    def __init__(self) -> None:
        self._codes: dict[str, float] = {}

    def new(self) -> str:
        code = secrets.token_urlsafe(24)
        self._codes[code] = time.time() + CODE_SECONDS
        return code

    def take(self, code: str) -> bool:
        until = self._codes.pop(code, None)
        return until is not None and until > time.time()


def load_key(path: Path) -> bytes:
    """The console's signing key kept in `path` (made, 0600, on first use), so sessions outlive
    a restart. Raises `ConfigError` when it cannot be read or written."""
    try:
        return bytes.fromhex(path.read_text().strip())
    except FileNotFoundError:
        pass
    except (OSError, ValueError) as exc:
        raise ConfigError(f"the console key {path} cannot be read ({exc}); remove it to make "
                          "a new one (everyone is logged out)") from None
    key = secrets.token_bytes(32)
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_CLOEXEC, 0o600)
    except FileExistsError:  # another node on this home made it just now
        return load_key(path)
    except OSError as exc:
        raise ConfigError(f"the console key {path} cannot be written: "
                          f"{exc.strerror or exc}") from None
    with os.fdopen(fd, "w") as out:
        out.write(key.hex() + "\n")
    return key
