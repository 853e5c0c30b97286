"""Per-user scoping of the store's rows: the conditions every listing and count filters by.

Rows carry `user_id`, the name of the user who made them (NULL: the local user; see
ask_another/users.py). `visible` is what a user may see (an admin: everything); `own` is what
is theirs (a budget ceiling or a limit counts these, admin or not).
"""

from __future__ import annotations

from typing import Any

from ask_another.users import User

__all__ = ["own", "visible"]


def visible(user: User, column: str = "user_id") -> tuple[str, tuple[Any, ...]]:
    """A WHERE condition and its parameters: the rows `user` may see."""
    if user.admin:
        return "1 = 1", ()
    return own(user.id, column)


def own(user_id: str | None, column: str = "user_id") -> tuple[str, tuple[Any, ...]]:
    """A WHERE condition and its parameters: the rows made by `user_id` (None: the local user)."""
    if user_id is None:
        return f"{column} IS NULL", ()
    return f"{column} = ?", (user_id,)
