"""The tokens file of `serve --http` and its `--no-auth` token, without the MCP SDK: what the
`ask-another token` commands and `doctor` read and change (auth.py checks requests with them).

`TokensFile` is a JSON file (`ASK_ANOTHER_TOKENS_FILE`, default `tokens.json` in the home)
holding one SHA-256 hash per user, never a token, and the user's random id. `ask-another token
add NAME` makes a random token, prints it once and stores its hash; `token rotate NAME` replaces
the token and keeps the id (the same user); `token remove NAME` keeps the id among the removed
ones, so a user added later under that name gets another id and never the removed user's jobs.
Kept apart from auth.py so that a `token` command imports no SDK (about a second of CPU).
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import hashlib
import json
import os
import re
import secrets
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from ask_another.errors import ConfigError

USER_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,63}")
TOKEN_PREFIX: Final = "aa_"  # so a leaked token is recognisable (and greppable) as ours
FILE_VERSION: Final = 2  # 2: each user has an `id`, and removed users' ids are kept


def token_sha256(token: str) -> str:
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
            user = TokenUser(name, token_sha256(token), admin, _now(), secrets.token_hex(8))
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
            body.users[:] = [TokenUser(u.name, token_sha256(token), u.admin, _now(), u.id)
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
