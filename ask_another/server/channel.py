"""A job's end, or its start of waiting for a person, as a Claude Code channel event.

Claude Code (a research preview since 2.1.80, enabled per launch with ``--channels``) shows a
``notifications/claude/channel`` ``{content, meta}`` from a server that declares
``capabilities.experimental["claude/channel"]`` to the model as a ``<channel>`` event, so the
model hears that a job finished without polling check_research. Hosts enable channels per
launch, so the server declares it only with ``ASK_ANOTHER_CLAUDE_CHANNEL=1``; then every
2025-11-25 session is told of each job its user may see, once per event (the event ids of
server/events.py: a job's end, each question it waits on), by `JobUpdates` (server/tasks/),
which reads the store while any such session is open. The text names the call to make.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from ask_another.config import Config
from ask_another.logs import get_logger
from ask_another.server.events import RawNotification, job_events
from ask_another.store.jobs import JobRecord
from ask_another.users import User

__all__ = ["CHANNEL_CAPABILITY", "CHANNEL_METHOD", "Channels"]

log = get_logger("ask_another.server.channel")

CHANNEL_CAPABILITY: Final = "claude/channel"
CHANNEL_METHOD: Final = "notifications/claude/channel"


@dataclass(frozen=True, eq=False)
class _Listener:
    session: Any  # a ServerSession
    user: User


class Channels:
    """The sessions that take channel events, and which events each job has had told."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._sessions: dict[int, _Listener] = {}
        self._told: dict[str, set[str]] = {}  # job id -> event ids told (unfinished jobs)

    def __bool__(self) -> bool:
        return bool(self._sessions)

    def add(self, connection: Any, session: Any, user: User) -> None:
        """Tell `session` (its connection's) of its user's jobs until the connection ends."""
        if id(connection) in self._sessions:
            return
        self._sessions[id(connection)] = _Listener(session, user)
        connection.exit_stack.callback(self._sessions.pop, id(connection), None)

    async def job_changed(self, record: JobRecord, config: Config) -> None:
        told = self._told.setdefault(record.id, set())
        fresh = [e for e in job_events([record], config) if e.event_id not in told]
        if record.finished:
            self._told.pop(record.id, None)
        else:
            told.update(e.event_id for e in fresh)
        for event in fresh:
            notification = RawNotification(method=CHANNEL_METHOD, params={
                "content": event.text(),
                "meta": {"job_id": record.id, "status": record.status,
                         "event": "waiting" if event.waiting else "ended"}})
            for key, listener in list(self._sessions.items()):
                if not listener.user.can_see(record.user_id):
                    continue
                try:
                    await listener.session.send_notification(notification)
                except Exception as exc:  # the session is gone
                    log.info("channel.not_sent", job_id=record.id, reason=str(exc))
                    self._sessions.pop(key, None)
