"""Live job resources: `JobUpdates` pushes ``research://JOB_ID`` updates (2026-07-28 listen
streams, 2025-11-25 resources/subscribe), a 2025 task's status and questions to the session
that created it, and Claude Code channel events, from what it reads in the store; with the
bounds of its tables per user and per node."""

from __future__ import annotations

import collections
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import mcp_types as types
import trio
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.server.session import ServerSession
from mcp.server.subscriptions import ResourceUpdated, ServerEvent
from mcp.shared.exceptions import MCPError

from ask_another.config import Config
from ask_another.logs import get_logger
from ask_another.runtime import Runtime
from ask_another.server.channel import Channels
from ask_another.server.context import user_of
from ask_another.server.lifespan import ServerState
from ask_another.server.tasks.job import status_notification, task_fields, waiting_ids
from ask_another.server.tasks.questions import Asked, Claims, answer, elicitation, open_questions
from ask_another.server.tasks.requests import refused, request_runtime
from ask_another.store.jobs import JobRecord, job_store
from ask_another.users import LOCAL_USER, User

__all__ = [
    "MAX_LEGACY_PER_USER",
    "MAX_LEGACY_SUBSCRIPTIONS",
    "MAX_LISTENS_PER_USER",
    "Creator",
    "JobUpdates",
    "ListenBound",
    "live_resources",
]


log = get_logger("ask_another.server.tasks")


RESOURCE_PREFIX: Final = "research://"
WATCH_EVERY: Final = 1.0
"""Seconds between two reads of the store for changed jobs, while anyone listens."""
MAX_LEGACY_SUBSCRIPTIONS: Final = 10_000
"""2025-11-25 resources/subscribe entries on this node, every session's."""
MAX_LEGACY_PER_USER: Final = 1_000
"""Of which one user's (every session of theirs): one user cannot fill the node's table."""
MAX_LISTENS_PER_USER: Final = 64
"""2026-07-28 subscriptions/listen streams one user may hold open on this node (the SDK's
`ListenHandler` allows 1,024 on the node, and a user may have 512 requests in flight)."""

Listener = Callable[[ServerEvent], None]


def _job_state(record: JobRecord) -> tuple[str, str | None, tuple[str, ...]]:
    return record.status, record.step, waiting_ids(record)


@dataclass(frozen=True, eq=False)
class Creator:
    """The 2025-11-25 session that created a task, whose user it acts for, and where the
    approval links of its questions point."""

    session: ServerSession
    user: User
    console_url: str | None = None

    def can_elicit(self) -> bool:
        caps = self.session.client_capabilities
        return caps is not None and caps.elicitation is not None


class JobUpdates:
    """Pushes `research://JOB_ID` updates to the people who may read that job, in both eras.

    - 2026-07-28: it is the server's subscription bus (`MCPServer(subscriptions=...)`): each
      `subscriptions/listen` stream registers through `subscribe`, which notes the caller's
      user, and a job's update reaches only the streams whose user may see the job (the SDK's
      listen handler then keeps to the URIs each stream asked for).
    - 2025-11-25: `resources/subscribe` / `resources/unsubscribe` (registered on the low-level
      server), refused for another user's job; an update is `notifications/resources/updated`.

    `run` watches the store, not this process's actors, while anyone listens: every node
    raises the updates of its own listeners for whatever changed, wherever the job runs.
    """

    def __init__(self, channel: bool = False) -> None:
        self.channels = Channels(channel)  # Claude Code channel events (server/channel.py)
        self._listeners: dict[object, tuple[Listener, User]] = {}
        self._legacy: dict[tuple[int, str], tuple[Any, User]] = {}
        self._per_user: collections.Counter[str | None] = collections.Counter()  # legacy
        self._closing: set[int] = set()  # connections whose end drops their entries
        self._tasks: dict[str, list[Creator]] = {}  # task id -> the 2025 session that made it
        self.claims = Claims()
        self._config: Config | None = None
        self.request_runtime: Runtime | None = None
        self._nursery: trio.Nursery | None = None
        self._wake = trio.Event()

    # the SubscriptionBus protocol (mcp.server.subscriptions)
    async def publish(self, event: ServerEvent) -> None:
        """An event the SDK raises (a list change): to every listener."""
        for listener, _user in list(self._listeners.values()):
            _deliver(listener, event)
        await trio.lowlevel.checkpoint()

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """A listen stream's registration (`check_listen` bounded it first); the SDK
        unsubscribes when the stream ends, however it ends."""
        token = object()
        self._listeners[token] = (listener, user_of())  # the listen request's caller
        self._wake.set()

        def unsubscribe() -> None:
            self._listeners.pop(token, None)

        return unsubscribe

    def check_listen(self) -> None:
        """Refuse a subscriptions/listen past `MAX_LISTENS_PER_USER` streams of its caller's
        (`ListenBound`, before the SDK's handler: raised from `subscribe`, the refusal would
        leave that handler's stream buffers unclosed)."""
        user = user_of()
        held = sum(1 for _, u in self._listeners.values() if u.id == user.id)
        if held >= MAX_LISTENS_PER_USER:
            raise MCPError(types.INTERNAL_ERROR, f"too many subscriptions/listen streams: "
                           f"{held} are open for you on this server (at most "
                           f"{MAX_LISTENS_PER_USER}); close one first")

    def wake(self) -> None:
        """Someone new listens: let `run` read the store again."""
        self._wake.set()

    def statistics(self) -> dict[str, int]:
        """How many entries each table holds: listen streams, 2025 subscriptions, watched
        tasks."""
        return {"listeners": len(self._listeners), "legacy_subscriptions": len(self._legacy),
                "watched_tasks": sum(len(c) for c in self._tasks.values())}

    # resources/subscribe and resources/unsubscribe (2025-11-25)
    async def on_subscribe(self, ctx: ServerRequestContext[ServerState, Any],
                           params: types.SubscribeRequestParams) -> dict[str, Any]:
        uri = str(params.uri)
        if not uri.startswith(RESOURCE_PREFIX):
            raise MCPError(types.INVALID_PARAMS, f"only research://JOB_ID resources change, "
                           f"not {uri!r}")
        user = user_of()
        try:
            await request_runtime(ctx).jobs_for(user).get(uri.removeprefix(RESOURCE_PREFIX))
        except MCPError:
            raise
        except Exception as exc:
            raise refused(exc) from None
        connection = ctx.session._connection
        key = (id(connection), uri)
        if key in self._legacy:  # subscribed already: nothing more to hold
            return {}
        if len(self._legacy) >= MAX_LEGACY_SUBSCRIPTIONS:
            raise MCPError(types.INTERNAL_ERROR, "too many resource subscriptions on this "
                           "server; unsubscribe from finished jobs")
        if self._per_user[user.id] >= MAX_LEGACY_PER_USER:
            raise MCPError(types.INTERNAL_ERROR, f"too many resource subscriptions: you hold "
                           f"{self._per_user[user.id]} on this server (at most "
                           f"{MAX_LEGACY_PER_USER}); unsubscribe from finished jobs")
        self._legacy[key] = (ctx.session, user)
        self._per_user[user.id] += 1
        self._drop_at_end(connection)
        self._wake.set()
        return {}

    async def on_unsubscribe(self, ctx: ServerRequestContext[ServerState, Any],
                             params: types.UnsubscribeRequestParams) -> dict[str, Any]:
        self._unsubscribe((id(ctx.session._connection), str(params.uri)))
        return {}

    def _unsubscribe(self, key: tuple[int, str]) -> None:
        entry = self._legacy.pop(key, None)
        if entry is not None:
            self._per_user[entry[1].id] -= 1
            if self._per_user[entry[1].id] <= 0:
                del self._per_user[entry[1].id]

    def _drop_at_end(self, connection: Any) -> None:
        """When `connection` (a 2025-11-25 session) ends, drop its subscriptions and the tasks
        it watches: the SDK unwinds the connection's exit stack as it closes."""
        if id(connection) in self._closing:
            return
        self._closing.add(id(connection))
        connection.exit_stack.callback(self._connection_ended, id(connection))

    def _connection_ended(self, connection: int) -> None:
        self._closing.discard(connection)
        for key in [k for k in self._legacy if k[0] == connection]:
            self._unsubscribe(key)
        for task_id, creators in list(self._tasks.items()):
            creators[:] = [c for c in creators if id(c.session._connection) != connection]
            if not creators:
                del self._tasks[task_id]

    def watch_task(self, creator: Creator, task_id: str) -> None:
        """Send the session that created a task (a 2025-11-25 one) notifications/tasks/status
        on each change of the task until it ends, and put the task's questions to it as they
        open (an elicitation related to the task) where it can be asked."""
        self._tasks.setdefault(task_id, []).append(creator)
        self._drop_at_end(creator.session._connection)
        self._wake.set()

    async def _task_changed(self, record: JobRecord) -> None:
        creators = self._tasks.pop(record.id, []) if record.finished \
            else self._tasks.get(record.id, [])
        if record.finished:
            self.claims.forget(record.id)
        if not creators or self._config is None:
            return
        notification = status_notification(task_fields(record, self._config, modern=False))
        for creator in list(creators):
            try:
                await creator.session.send_notification(notification)  # type: ignore[arg-type]
            except Exception as exc:  # the session is gone (it was optional anyway)
                log.info("tasks.status_not_sent", task_id=record.id, reason=str(exc))
                if creator in creators:
                    creators.remove(creator)
        self._push_questions(record)

    def _push_questions(self, record: JobRecord) -> None:
        """Ask the task's creator each question of `record` nobody has asked yet, unless a
        tasks/result blocked on it asks them. fastmcp 3 polls tasks/get to the end and calls
        tasks/result only then, so without this its elicitation handler never heard them."""
        if self._nursery is None or record.finished or not self.claims.may_push(record.id):
            return
        for creator in self._tasks.get(record.id, []):
            if not creator.can_elicit():
                continue
            for asked in open_questions(record, creator.console_url):
                if self.claims.claim(record.id, asked.key):
                    self._nursery.start_soon(self._push, creator, record.id, asked)

    async def _push(self, creator: Creator, task_id: str, asked: Asked) -> None:
        """One pushed question, waited on until its expiry (then the job has moved on)."""
        assert self.request_runtime is not None
        log.info("tasks.elicit_pushed", task_id=task_id, key=asked.key)
        reply = None
        with trio.move_on_at(trio.current_time() + max(0.0, asked.expires_at - time.time())):
            try:
                reply = await creator.session.send_request(elicitation(asked, task_id),
                                                           types.ElicitResult)
            except Exception as exc:  # the session is gone, or its client refused the request
                log.info("tasks.elicit_not_pushed", task_id=task_id, key=asked.key,
                         reason=str(exc))
                self.claims.release(task_id, asked.key)
                return
        if reply is not None:
            await answer(self.request_runtime.jobs_for(creator.user), task_id, asked, reply.action,
                         reply.content)

    async def job_changed(self, record: JobRecord) -> None:
        """Tell whoever may see `record` that `research://ID` may read differently now, and
        the sessions that created it as a task its new status."""
        await self._task_changed(record)
        if self.channels and self._config is not None:
            await self.channels.job_changed(record, self._config)
        uri = RESOURCE_PREFIX + record.id
        event = ResourceUpdated(uri=uri)
        for listener, user in list(self._listeners.values()):
            if user.can_see(record.user_id):
                _deliver(listener, event)
        for key, (session, user) in list(self._legacy.items()):
            if key[1] != uri or not user.can_see(record.user_id):
                continue
            try:
                await session.send_resource_updated(uri)
            except Exception as exc:  # the session is gone: its subscriptions with it
                log.info("tasks.subscription_dropped", uri=uri, reason=str(exc))
                self._unsubscribe(key)

    async def run(self, runtime: Runtime) -> None:
        """Read the store every `WATCH_EVERY` seconds while anyone listens, and raise an update
        for each job whose status, step or questions changed (and each that ended)."""
        seen: dict[str, tuple[str, str | None, tuple[str, ...]]] = {}
        first = True
        self._config, self.request_runtime = runtime.config, runtime
        async with trio.open_nursery() as self._nursery:  # the pushed questions
            while True:
                if not (self._listeners or self._legacy or self._tasks or self.channels):
                    self._wake = trio.Event()
                    await self._wake.wait()
                    seen, first = {}, True
                try:
                    seen = await self._look(runtime, seen, announce=not first)
                    first = False
                except Exception:  # a store hiccup must not end the watch: try again next turn
                    log.exception("tasks.watch_failed")
                await trio.sleep(WATCH_EVERY)

    async def _look(self, runtime: Runtime, seen: dict[str, Any], *, announce: bool
                    ) -> dict[str, Any]:
        store = job_store(await runtime.database())
        current = {r.id: r for r in await store.unfinished(LOCAL_USER)}  # every user's
        for job_id in seen.keys() - current.keys():  # ended since the last look
            ended = await store.get(job_id)
            if ended is not None and announce:
                await self.job_changed(ended)
        for job_id in self._tasks.keys() - current.keys() - seen.keys():  # ended unseen
            ended = await store.get(job_id)
            if ended is None:
                self._tasks.pop(job_id, None)
            elif ended.finished:
                await self._task_changed(ended)
        for job_id, record in current.items():
            if announce and seen.get(job_id) != _job_state(record):
                await self.job_changed(record)
            elif job_id in self._tasks:  # a question left to ask (a tasks/result ended, ...)
                self._push_questions(record)
        return {job_id: _job_state(record) for job_id, record in current.items()}


def _deliver(listener: Listener, event: ServerEvent) -> None:
    try:
        listener(event)
    except Exception:  # one bad listener must not starve the others
        log.exception("tasks.listener_failed")


def live_resources(server: MCPServer[Any], updates: JobUpdates) -> None:
    """Serve 2025-11-25 resources/subscribe and resources/unsubscribe from `updates` (on the
    low-level server: `MCPServer` has no decorator for them)."""
    lowlevel = server._lowlevel_server
    lowlevel.add_request_handler("resources/subscribe", types.SubscribeRequestParams,
                                 updates.on_subscribe)
    lowlevel.add_request_handler("resources/unsubscribe", types.UnsubscribeRequestParams,
                                 updates.on_unsubscribe)


class ListenBound:
    """A server middleware that refuses a subscriptions/listen past its user's bound
    (`JobUpdates.check_listen`) before the SDK's handler opens the stream."""

    def __init__(self, updates: JobUpdates) -> None:
        self.updates = updates

    async def __call__(self, ctx: ServerRequestContext[ServerState, Any], call_next: CallNext
                       ) -> HandlerResult:
        if ctx.method == "subscriptions/listen":
            self.updates.check_listen()
        return await call_next(ctx)


