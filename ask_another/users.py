"""Who makes a request: a `User`, and `LOCAL_USER`, the one user of stdio and of a loopback server
started without authentication.

Jobs, conversations, feedback and usage rows carry the `name` of the user who made them (the
`user_id` column; NULL for the local user). A user sees and acts on their own rows only; an
admin sees and acts on everyone's. The local user is an admin: whoever runs ask-another on their
own machine owns its store anyway. The MCP face builds the user from the request's access token
(server/context.py, `user_of`); a program embedding the runtime acts as the local user unless it
says otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = ["ADMIN_SCOPE", "LOCAL_USER", "User"]

ADMIN_SCOPE: Final = "ask-another:admin"
"""The token scope that makes its user an admin."""


@dataclass(frozen=True, slots=True)
class User:
    """A user: `name` (None for the local user) and whether they are an admin."""

    name: str | None
    admin: bool

    def can_see(self, user_id: str | None) -> bool:
        """Whether this user may see and act on a row made by `user_id` (None: the local
        user's)."""
        return self.admin or user_id == self.name

    @property
    def local(self) -> bool:
        """The local user of stdio or an unauthenticated loopback server (never rate limited)."""
        return self.name is None


LOCAL_USER: Final = User(None, admin=True)
