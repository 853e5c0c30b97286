"""`open_runtime(config)`: everything ask-another runs, for the MCP server and for embedding.

The runtime is a `supervisors` tree: a root supervisor (one_for_one) with the store
(`StoreActor`: the SQLite file under the home, or the PostgreSQL server of
ASK_ANOTHER_DATABASE_URL, chosen here by `config.database` and nowhere else) and the LLM gateway
(`GatewayActor`: litellm in its worker process, or on an asyncio thread here) as permanent
children, found by name in the runtime's own `Registry`. Later
features add their supervisors (research jobs) as further children. The MCP server opens one
runtime in its lifespan; a Python program can open its own:

    async with open_runtime(Config.from_env()) as rt:
        result = await rt.complete("gpt4", "Is this proof right? ...")

The actors own lifecycles, not traffic: `gateway()` and `database()` return the handles and the
work runs on them directly, so hundreds of completions are in flight at once. If a child is
restarted, the next `gateway()` / `database()` returns the new handle.

Opening is fast: the database is opened and migrated and the gateway's worker process is started,
which imports litellm on its own core while the server answers `initialize` and `tools/list`; this
process never imports litellm. `_transport()` is the one place that picks the gateway's transport.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import sniffio
import trio

from ask_another.calls import MAX_TIMEOUT, CallSettings
from ask_another.catalog import Catalog, model_map
from ask_another.config import Config, DatabaseUrl
from ask_another.consensus import Consensus
from ask_another.conversations import Conversations, conversations_spec
from ask_another.errors import AskAnotherError, InvalidArgument, WrongEventLoop
from ask_another.gateway import (
    CompletionResult,
    Gateway,
    GatewayActor,
    ProcessTransport,
    SharedTransport,
    ThreadTransport,
    Transport,
)
from ask_another.home import make_private
from ask_another.interaction import Interaction, Policy, Tool, ToolRegistry, valid
from ask_another.interaction.builtin import builtin_tools
from ask_another.interaction.model import gateway_model
from ask_another.interaction.router import DEFAULT_MAX_ROUNDS, Message, TurnResult, run_turn
from ask_another.limits import RequestRate
from ask_another.logs import ensure_logging, get_logger, register_secrets
from ask_another.research.host import ensure_host
from ask_another.research.jobs import ResearchJobs
from ask_another.research.lease import Lease, new_owner
from ask_another.research.supervisor import HandOff, Ownership, TakeOver, research_spec
from ask_another.services import Services
from ask_another.spend import PaidGateway, Purpose
from ask_another.store import Database, FeedbackRecord, StoreActor, add_feedback
from ask_another.users import LOCAL_USER, User
from supervisors import Registry, StartError, SupervisorRef, child_spec, open_supervisor

__all__ = ["MAX_TIMEOUT", "Runtime", "open_runtime"]

log = get_logger("ask_another.runtime")



@dataclass
class Runtime:
    """The running parts. Made by `open_runtime()`; valid only inside its `async with` block.

    `services` is the one `Services` every part is given (`await gateway()`, `await database()`
    and `model(id)` give the current handles); `config`, `gateway()` and `database()` here are
    its. The faces for a user are `jobs_for(user)`, `consensus_for(user)` and
    `conversations_for(user)`.
    """

    services: Services
    supervisor: SupervisorRef
    lease: Lease | None = field(default=None, kw_only=True)
    """This runtime's lease on its research jobs (research/lease.py), fixed for its life: read
    here rather than asked of the job owner on every start."""
    _catalog: Catalog | None = field(default=None, kw_only=True)
    rates: RequestRate = field(default_factory=lambda: RequestRate(0), kw_only=True)
    """Tool calls per user per minute on this node (limits.py; the MCP face checks it)."""

    @property
    def config(self) -> Config:
        return self.services.config

    @property
    def registry(self) -> Registry:
        return self.services.registry

    async def gateway(self) -> Gateway:
        """The gateway handle (refreshed after a restart; see `Services`)."""
        return await self.services.gateway()

    async def database(self) -> Database:
        """The database handle (refreshed after a restart; see `Services`)."""
        return await self.services.database()

    async def catalog(self) -> Catalog:
        """The allowed models with litellm's metadata (its model map is read the first time, in
        a thread, without importing litellm: about 0.1 s)."""
        if self._catalog is None:
            config = self.config
            self._catalog = await trio.to_thread.run_sync(
                lambda: Catalog(config, model_map()))
        return self._catalog

    async def complete(
        self,
        model: str,
        prompt: str,
        *,
        system: str | None = None,
        temperature: float | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 - a per-call setting, enforced by the gateway
        tools: list[dict[str, Any]] | None = None,
        on_delta: Callable[[str], Awaitable[None]] | None = None,
        tool: str = "complete",
    ) -> CompletionResult:
        """One completion from an allowed model named by id, shorthand or unique provider.

        The call is recorded in the usage ledger as serving `tool` (`ask` for the command line).

        Raises `ModelNotAllowed` / `AmbiguousModel`, `InvalidArgument` for a temperature outside
        0.0-2.0 or a timeout outside (0, 3600], `ConfigError` for a provider litellm does not
        know (the gateway's, before any worker starts), and `ProviderError`s from the provider.
        """
        entry = self.config.resolve(model)
        settings = CallSettings(temperature, timeout)
        if not prompt.strip():
            raise InvalidArgument("the prompt is empty")
        self.config.check_size("prompt", prompt)
        self.config.check_size("system prompt", system)
        log.debug("completion.started", model=entry.model)
        gateway = PaidGateway(await self.gateway(), self.services, Purpose(tool=tool))
        # Its ledger row is written before the call and completed after it (spend/ledger.py).
        result = await gateway.completion(
            entry, prompt, system=system, temperature=settings.temperature,
            timeout=settings.timeout_or(self.config.timeout),
            tools=tools, on_delta=on_delta,
        )
        log.info("completion.finished", model=entry.model, prompt_tokens=result.usage.prompt_tokens,
                 completion_tokens=result.usage.completion_tokens, cost_usd=result.usage.cost_usd)
        return result

    @property
    def consensus(self) -> Consensus:
        """Several models at once: `ask(models, prompt, stances=, synthesize=, ...)`
        (see consensus/), as the local user; `consensus_for(user)` asks for another."""
        return Consensus(self.services)

    def consensus_for(self, user: User) -> Consensus:
        """The consensus face asking for `user`."""
        return Consensus(self.services, user)

    @property
    def jobs(self) -> ResearchJobs:
        """Research jobs: `start(model, query, method=, interaction=, tools=)`, `get`, `list`,
        `wait`, `cancel`, `answer_permission`, `answer_choice` (see research/jobs.py), as the
        local user (an admin); `jobs_for(user)` acts for another user."""
        return ResearchJobs(self.services, lease=self.lease)

    def jobs_for(self, user: User) -> ResearchJobs:
        """The research jobs as seen and acted on by `user`."""
        return ResearchJobs(self.services, user, lease=self.lease)

    @property
    def conversations(self) -> Conversations:
        """Conversations (see conversations/), as the local user."""
        return Conversations(self.services)

    def conversations_for(self, user: User) -> Conversations:
        """The conversations as `user` takes part in them."""
        return Conversations(self.services, user)

    def tools(self, extra: Iterable[Tool] | ToolRegistry = (), *,
              gateway: Gateway | None = None) -> ToolRegistry:
        """The built-in tools (`read_article` with the configured allow_hosts, `ask_user`, and
        `search_web` through `gateway` when a `SEARCH_*` engine is configured) and `extra`, a
        host's own tools of either class (a name already taken raises `ToolRegistryError`)."""
        engine = self.config.search
        return builtin_tools(self.config.allow_hosts, extra,
                             search=(gateway, engine) if gateway and engine else None)

    async def run_turn(
        self,
        model: str,
        prompt: str | None = None,
        *,
        messages: list[Message] | None = None,
        system: str | None = None,
        tools: Iterable[Tool] | ToolRegistry = (),
        interaction: Interaction | None = None,
        policy: Policy | None = None,
        temperature: float | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 - per model call, enforced by the gateway
        max_rounds: int = DEFAULT_MAX_ROUNDS,
    ) -> TurnResult:
        """One router turn with an allowed model: the built-in tools plus `tools`, under
        `policy` (default: the configured `ASK_ANOTHER_PERMISSIONS`) and `interaction`.

        Give `prompt` (with an optional `system`) or full OpenAI-style `messages`. Without an
        interaction the turn runs silently: what the policy would ask a person is denied.
        Raises `InvalidArgument` for a bad request, `ModelNotAllowed`, and `ProviderError`s from
        the model calls; tool failures are the model's information, never raised. Cancelling
        the caller cancels the model call or the running tool.
        """
        entry = self.config.resolve(model)
        if (prompt is None) == (messages is None):
            raise InvalidArgument("give either prompt or messages")
        if interaction is not None and not valid(interaction):
            raise InvalidArgument("interaction does not implement the Interaction protocol (five "
                                  "async callbacks, see ask_another.Interaction)")
        if messages is None:
            assert prompt is not None
            if not prompt.strip():
                raise InvalidArgument("the prompt is empty")
            messages = [{"role": "system", "content": system}] if system else []
            messages.append({"role": "user", "content": prompt})
        settings = CallSettings(temperature, timeout)
        # Every model call and web search of the turn has its ledger row written before it.
        gateway = PaidGateway(await self.gateway(), self.services, Purpose(tool="run_turn"))
        call = gateway_model(gateway, entry, temperature=settings.temperature,
                             timeout=settings.timeout_or(self.config.timeout))
        return await run_turn(call, messages, self.tools(tools, gateway=gateway),
                              policy=policy if policy is not None else self.config.permissions,
                              interaction=interaction, max_rounds=max_rounds)

    async def add_feedback(self, issue: str, tool_name: str | None = None,
                           user: User = LOCAL_USER) -> FeedbackRecord:
        """Store one piece of feedback from `user` with a timestamp."""
        if not issue.strip():
            raise InvalidArgument("the feedback is empty: describe the issue or suggestion")
        self.config.check_size("feedback", issue, feedback=True)
        self.config.check_size("tool name", tool_name, feedback=True)
        record = await add_feedback(await self.database(), issue.strip(), tool_name, user.id)
        log.info("feedback.recorded", id=record.id, tool_name=tool_name)
        return record


def _transport_kind(config: Config, process: bool | None, per_session: bool
                    ) -> type[ProcessTransport] | type[ThreadTransport]:
    """The gateway's transport, chosen here and nowhere else: a worker process (the default)
    unless `process` (or, when that is None, `ASK_ANOTHER_GATEWAY_PROCESS`) is false. The worker
    is the one every server on the home shares when `ASK_ANOTHER_GATEWAY_SHARED` says so, or,
    when it is unset, for a `per_session` face (the stdio server and the people commands: a
    client session each, so four sessions pay one litellm); otherwise (`serve --http`, an
    embedding program) a private one."""
    if process is None:
        process = config.gateway_process is not False
    shared = config.gateway_shared if config.gateway_shared is not None else per_session
    if process and shared:
        return SharedTransport
    return ProcessTransport if process else ThreadTransport


def _transport(config: Config, process: bool | None, per_session: bool
               ) -> Callable[[], Transport]:
    """How to make the transport `_transport_kind` chooses."""
    kind = _transport_kind(config, process, per_session)
    if kind is SharedTransport:
        return functools.partial(SharedTransport, config.home, config.secrets(),
                                 log_level=config.log_level, idle_exit=config.gateway_idle)
    if kind is ProcessTransport:
        return functools.partial(ProcessTransport, config.secrets(), log_level=config.log_level,
                                 idle_exit=config.gateway_idle)
    return functools.partial(ThreadTransport, config.secrets())


def describe_gateway(config: Config) -> str:
    """Where a session's provider calls run, for `ask-another doctor` (one line)."""
    kind = _transport_kind(config, None, per_session=True)
    if kind is ThreadTransport:
        return "in a thread of each server (ASK_ANOTHER_GATEWAY_PROCESS=0; litellm imported there)"
    if kind is ProcessTransport:
        return "a worker process of each server's own (ASK_ANOTHER_GATEWAY_SHARED=0)"
    from ask_another.gateway import last_start_seconds, running_workers, socket_problem

    transport = _transport(config, None, per_session=True)()
    assert isinstance(transport, SharedTransport)
    problem = socket_problem(transport.socket_path)
    if problem is not None:  # each server falls back (gateway.shared_unavailable in its log)
        return f"a worker process of each server's own: no shared one, {problem}"
    where = f"{transport.socket_path.relative_to(config.home.absolute())} in the home"
    running = running_workers(config.home.absolute())
    pid = running.pop(transport.socket_path, None)
    # Sessions started by a client may have another environment than this terminal's, so
    # another worker: say so rather than "not running".
    others = (f"; {len(running)} more for other environments (pid "
              f"{', '.join(str(p) for p in running.values())})" if running else "")
    if pid is not None:
        return (f"one worker shared by the sessions on this home with this environment, running "
                f"(pid {pid}, {where}){others}")
    last = last_start_seconds(config.home.absolute())
    took = (f"{last:.1f} s at its last start on this machine" if last is not None
            else "not yet measured here")
    return (f"one worker shared by the sessions on this home with this environment, not "
            f"running now: the first call starts it (it imports litellm: {took}) at {where}"
            f"{others}")


def _ownership(config: Config, per_session: bool, job_host: bool, start_host: bool
               ) -> Ownership:
    """Whose jobs this runtime takes over (docs/architecture.md, "Where a job lives"): a face
    serving one session on the home's SQLite store nobody's (it makes sure the home's job host
    runs instead); the host, promptly; any other (`serve --http` nodes, PostgreSQL, an embedding
    program) as before, at each sweep."""
    if job_host:
        return TakeOver(prompt=True)
    if not per_session or config.database_url is not None:
        return TakeOver()
    if not start_host:
        return HandOff(None)
    home, environ = config.home, dict(os.environ)

    async def ensure() -> int:
        return await trio.to_thread.run_sync(ensure_host, home, environ)

    return HandOff(ensure)


@contextlib.asynccontextmanager
async def open_runtime(config: Config | None = None, *, prewarm_after: float | None = 0,
                       gateway_process: bool | None = None, per_session: bool = False,
                       job_host: bool = False, start_host: bool = True
                       ) -> AsyncIterator[Runtime]:
    """Start the supervision tree for the duration of the block; stop it on exit.

    `prewarm_after`: seconds before litellm starts loading where the gateway runs it (0: at
    once, None: only when first needed). `gateway_process`: provider calls in the gateway's
    worker process (None: `config.gateway_process`, and yes when that is unset too) or, when
    false, in a thread of this process. `per_session`: this runtime serves one client session
    (the stdio server, a people command), so its worker is shared with the other sessions on the
    home unless `ASK_ANOTHER_GATEWAY_SHARED=0` (see `_transport_kind`), and on the home's SQLite
    store it takes over no other process's jobs: the home's job host does, which it starts when
    it starts, holds or finds an unfinished job unless `start_host` is false (`doctor`), with
    this process's environment (`_ownership`). `job_host`: this runtime is that host's
    (jobhost.py): the shared worker, and jobs handed back taken over within a second. Raises
    `StoreError` if the database cannot be opened, `WrongEventLoop` outside trio (from asyncio:
    `ask_another.aio`).
    """
    _require_trio()
    config = config if config is not None else Config.from_env()
    ensure_logging(config.log_level)
    with contextlib.suppress(OSError):  # a home that cannot be made: the store says why
        make_private(config.home)  # a few system calls
    register_secrets(config.secrets())
    if config.database_url is not None:
        register_secrets([config.database_url.password])
    for problem in config.problems:
        log.error("config.problem", variable=problem.variable, problem=problem.message)
    registry = Registry()
    services = Services(config, registry)  # the one every part of this runtime is given
    lease = Lease(new_owner(), config.lease_seconds)
    children = [
        child_spec(StoreActor, config.database, name="store", registry=registry),
        child_spec(GatewayActor, _transport(config, gateway_process, per_session or job_host),
                   config.secrets(), prewarm_after,
                   name="gateway", registry=registry, shutdown=15.0),
        research_spec(services, lease=lease,
                      ownership=_ownership(config, per_session, job_host, start_host)),
        conversations_spec(services),
    ]
    started = False
    try:
        async with open_supervisor(children, "one_for_one", name="ask-another") as supervisor:
            started = True
            store = config.database
            log.info("runtime.started", models=len(config.models), home=str(config.home),
                     store=store.shown if isinstance(store, DatabaseUrl) else str(store))
            yield Runtime(services, supervisor, lease=lease,
                          rates=RequestRate(config.rate_per_minute))
    except BaseException as exc:
        # A child's init failed: show its own error (e.g. the database path), not the wrappers.
        cause = None if started else _start_failure(exc)
        if cause is not None:
            raise cause from None
        raise


def _require_trio() -> None:
    """Say which face to use when this one is entered outside trio (without it asyncio gets
    trio's `AttributeError: 'RunContext' object has no attribute 'runner'`)."""
    try:
        library: str | None = sniffio.current_async_library()
    except sniffio.AsyncLibraryNotFoundError:
        library = None
    if library == "trio":
        return
    if library == "asyncio":
        raise WrongEventLoop("ask_another.open_runtime runs under trio and this is asyncio code: "
                             "use `async with ask_another.aio.open_runtime(...)`, with the same "
                             "arguments and the same calls")
    raise WrongEventLoop(f"ask_another.open_runtime runs under trio (inside trio.run), not "
                         f"under {library or 'no event loop'}; from asyncio use "
                         f"ask_another.aio.open_runtime")


def _start_failure(exc: BaseException) -> AskAnotherError | None:
    """Our error inside a `StartError` (possibly inside exception groups), if that is all it is."""
    if isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        return _start_failure(exc.exceptions[0])
    if isinstance(exc, StartError) and isinstance(exc.__cause__, AskAnotherError):
        return exc.__cause__
    return None
