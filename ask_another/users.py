"""Who makes a request: a `User`, and `LOCAL_USER`, the one user of stdio and of a loopback server
started without authentication.

Jobs, conversations, feedback and usage rows carry the `id` of the user who made them (the
`user_id` column; NULL for the local user). A user sees and acts on their own rows only; an
admin sees and acts on everyone's. The local user is an admin: whoever runs ask-another on their
own machine owns its store anyway. The HTTP faces build the user from the request's verified
access token (`token_user`: the MCP server's `user_of` in server/context.py, the console's token
login); a program embedding the runtime acts as the local user unless it says otherwise.

The id is a stable principal id that no later user can take, never a name a person chooses:
`token:NAME:ID` for a tokens-file user (ID random, made by `token add` and kept in the file after
`token remove`, so a user added later under the same name is someone else), `oauth:ISSUER#SUB`
for an issuer's user (its `iss` and `sub` claims, whatever claim names them), and `name:NAME`
for the rows made before ids (migration 8; a tokens-file entry written then, without an id, is
still that user). Names cannot contain `:`, so no id of one kind is an id of another.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:  # the SDK's type only: this module imports nothing heavy
    from mcp.server.auth.provider import AccessToken

__all__ = ["ADMIN_SCOPE", "LOCAL_CLAIM", "LOCAL_USER", "User", "token_user"]

ADMIN_SCOPE: Final = "ask-another:admin"
"""The token scope that makes its user an admin."""
LOCAL_CLAIM: Final = "ask-another/local"
"""The claim of `serve --http --no-auth`'s local token (server/auth.py): its user is the local
user."""


@dataclass(frozen=True, slots=True)
class User:
    """A user: their principal `id` (None for the local user; see the module docstring),
    whether they are an admin, and the name they go by (shown, never compared)."""

    id: str | None
    admin: bool
    name: str | None = field(default=None, compare=False)

    def can_see(self, user_id: str | None) -> bool:
        """Whether this user may see and act on a row made by `user_id` (None: the local
        user's)."""
        return self.admin or user_id == self.id

    @property
    def local(self) -> bool:
        """The local user of stdio or an unauthenticated loopback server (never rate limited)."""
        return self.id is None


LOCAL_USER: Final = User(None, admin=True)


def token_user(token: AccessToken) -> User:
    """The user of a verified access token: its `subject`, else its `client_id`; an admin with
    the ``ask-another:admin`` scope; the local user for the local token."""
    if (token.claims or {}).get(LOCAL_CLAIM):  # `serve --http --no-auth`'s own token
        return LOCAL_USER
    return User(token.subject or token.client_id, admin=ADMIN_SCOPE in token.scopes,
                name=token.client_id)
