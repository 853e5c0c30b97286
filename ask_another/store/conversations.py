"""The conversation tables: one row per conversation (its model and system prompt) and its messages.

A conversation is bound to one model (`conversations.model`, the resolved model id, and
`conversations.entry`, the `MODEL_*` variable it came from, since two variables may share an id).
Its messages are numbered from 1 by `seq` within the conversation. An assistant message that made
tool calls keeps them in `tool_calls`, a JSON list of ``{"id", "function", "arguments",
"result"}`` objects: the call the model made (or a synthetic one, such as `discuss`'s
read_article exchange) together with what the tool returned, so a later turn can replay the whole
exchange (conversations/history.py). Times are Unix timestamps (seconds, float).

A turn's messages are written in one commit (`append_messages`), with the ledger row of the call
that answered it and, for a conversation's first turn, the conversation row, so a failed turn
leaves nothing behind and a one-shot completion costs the store one transaction.

A consensus thread (consensus/) is bound to its panel rather than one model: its `model` is
``consensus:<model id>,<model id>,...`` (`panel_binding`), and `panel_of` reads the models back;
its `entry` is their `MODEL_*` variables in the same order (`panel_entries`, `panel_entry`).
"""

from __future__ import annotations

import json
from typing import Any, Literal

import msgspec

from ask_another.store.db import Connection, Database, Row
from ask_another.store.usage import UsageRow, usage_insert

__all__ = [
    "PANEL_PREFIX",
    "ConversationRecord",
    "NewMessage",
    "Role",
    "StoredMessage",
    "StoredToolCall",
    "append_messages",
    "conversation_messages",
    "get_conversation",
    "panel_binding",
    "panel_of",
]

PANEL_PREFIX = "consensus:"

Role = Literal["system", "user", "assistant"]


def panel_binding(models: list[str] | tuple[str, ...]) -> str:
    """The `model` column of a consensus thread asked of `models` (resolved model ids)."""
    return PANEL_PREFIX + ",".join(models)


def panel_of(binding: str) -> tuple[str, ...]:
    """The panel's model ids of a consensus thread's `model` column; () for a one-model thread."""
    if not binding.startswith(PANEL_PREFIX):
        return ()
    return tuple(m for m in binding[len(PANEL_PREFIX):].split(",") if m)


def panel_entries(variables: list[str] | tuple[str, ...]) -> str:
    """The `entry` column of a consensus thread: its models' `MODEL_*` variables, in the panel's
    order."""
    return ",".join(variables)


def panel_entry(entries: str | None, index: int) -> str | None:
    """The `MODEL_*` variable of the panel's `index`-th model (None: not stored, an older
    thread)."""
    names = (entries or "").split(",")
    return names[index] if entries and index < len(names) and names[index] else None


class StoredToolCall(msgspec.Struct, kw_only=True):
    """One tool call of an assistant message, with its result.

    `arguments` is the JSON text the model sent (kept verbatim, even if it is not valid JSON) or a
    JSON object; `result` is what the tool returned (any JSON value; a string is sent as it is).
    """

    id: str
    function: str
    arguments: str | dict[str, Any]
    result: Any = None


class NewMessage(msgspec.Struct, kw_only=True):
    """A message to append (`seq` and `created_at` are given by the store)."""

    role: Role
    content: str = ""
    tool_calls: list[StoredToolCall] | None = None


class StoredMessage(msgspec.Struct, kw_only=True):
    conversation_id: str
    seq: int
    role: Role
    content: str
    tool_calls: list[StoredToolCall] | None
    created_at: float


class ConversationRecord(msgspec.Struct, kw_only=True):
    id: str
    model: str
    system: str | None
    created_at: float
    updated_at: float
    entry: str | None = None  # the MODEL_* variable it was made with (None: made before v4)
    user_id: str | None = None  # the user who started it (None: the local user; users.py)


def _conversation(row: Row) -> ConversationRecord:
    return ConversationRecord(id=row["id"], model=row["model"], system=row["system"],
                              created_at=row["created_at"], updated_at=row["updated_at"],
                              entry=row["entry"], user_id=row["user_id"])


def _tool_calls(text: str | None) -> list[StoredToolCall] | None:
    if not text:
        return None
    return msgspec.convert(json.loads(text), list[StoredToolCall])


async def get_conversation(db: Database, conversation_id: str) -> ConversationRecord | None:
    row = await db.fetchone(
        "SELECT id, model, system, created_at, updated_at, entry, user_id FROM conversations "
        "WHERE id = ?",
        (conversation_id,),
    )
    return _conversation(row) if row is not None else None


async def conversation_messages(db: Database, conversation_id: str) -> list[StoredMessage]:
    """Every message of a conversation, in order (empty for an unknown id)."""
    rows = await db.fetchall(
        "SELECT conversation_id, seq, role, content, tool_calls, created_at FROM messages "
        "WHERE conversation_id = ? ORDER BY seq",
        (conversation_id,),
    )
    return [StoredMessage(conversation_id=r["conversation_id"], seq=r["seq"], role=r["role"],
                          content=r["content"], tool_calls=_tool_calls(r["tool_calls"]),
                          created_at=r["created_at"]) for r in rows]


async def append_messages(
    db: Database,
    conversation: ConversationRecord,
    messages: list[NewMessage],
    *,
    now: float,
    usage: UsageRow | None = None,
    first: bool = False,
) -> list[StoredMessage]:
    """Append `messages` after the conversation's last one, in one commit; returns them as stored.

    Creates the conversation row when it does not exist yet (a first turn, with the record's
    `user_id`), and otherwise sets its `updated_at` to `now` and its `system` to
    `conversation.system` (its user never changes). `usage`: the ledger row of the provider
    call that answered the turn, written in the same transaction. `first`: the conversation has
    no messages yet (a new one), so they are numbered from 1 without reading the last number.
    A first turn is three statements in one transaction: the ledger row, the conversation row
    and one INSERT of all its messages.
    """
    encoded = [None if m.tool_calls is None else msgspec.json.encode(m.tool_calls).decode()
               for m in messages]

    def go(conn: Connection) -> list[StoredMessage]:
        with conn:
            if usage is not None:
                conn.execute(*usage_insert(usage))
            conn.execute(
                "INSERT INTO conversations (id, model, system, created_at, updated_at, entry, "
                "user_id) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET "
                "system = excluded.system, updated_at = excluded.updated_at",
                (conversation.id, conversation.model, conversation.system,
                 conversation.created_at, now, conversation.entry, conversation.user_id),
            )
            last = 0 if first else conn.execute(
                "SELECT COALESCE(MAX(seq), 0) FROM messages WHERE conversation_id = ?",
                (conversation.id,)).fetchone()[0]
            stored = [StoredMessage(conversation_id=conversation.id, seq=last + n,
                                    role=message.role, content=message.content,
                                    tool_calls=message.tool_calls, created_at=now)
                      for n, message in enumerate(messages, 1)]
            if stored:
                conn.execute(
                    "INSERT INTO messages (conversation_id, seq, role, content, tool_calls, "
                    "created_at) VALUES " + ", ".join(["(?, ?, ?, ?, ?, ?)"] * len(stored)),
                    [value for message, tool_calls in zip(stored, encoded, strict=True)
                     for value in (message.conversation_id, message.seq, message.role,
                                   message.content, tool_calls, now)],
                )
            return stored

    return await db.run(go)
