"""Console sessions that were logged out: kept in the store, so a logout holds on every node
that shares it and across restarts.

A console session is a signed cookie (console/_session.py) that nothing else records; logging
out records its nonce here until the cookie would have expired anyway (`until`), and every
request's session is looked up by it (one primary-key read). Rows past their `until` are
deleted with the next logout, so the table holds only the logouts of the last 12 hours.
"""

from __future__ import annotations

import time

from ask_another.store.db import Connection, Database

__all__ = ["end_session", "session_ended"]


async def end_session(db: Database, nonce: str, until: float, now: float | None = None) -> None:
    """Record the logout of the session `nonce`, whose cookie lasts until `until`."""
    now = time.time() if now is None else now

    def go(conn: Connection) -> None:
        with conn:
            conn.execute("DELETE FROM console_logouts WHERE until <= ?", (now,))
            conn.execute("INSERT INTO console_logouts (nonce, until) VALUES (?, ?) "
                         "ON CONFLICT (nonce) DO NOTHING", (nonce, until))

    await db.run(go)


async def session_ended(db: Database, nonce: str) -> bool:
    """Whether the session `nonce` was logged out."""
    row = await db.fetchone("SELECT 1 FROM console_logouts WHERE nonce = ?", (nonce,))
    return row is not None
