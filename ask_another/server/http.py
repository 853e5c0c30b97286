"""`ask-another serve --http`: the SDK's Streamable HTTP app on hypercorn's trio worker.

One process serves every HTTP session with the same `build_server` as stdio: the runtime is
opened once, in the app's lifespan, and shared by all sessions and requests.

- Protocol eras. A 2026-07-28 request carries no session: the SDK answers it on its own (any node
  can). A 2025-11-25 client opens a session with `initialize` and gets an `Mcp-Session-Id`; the
  session lives in this process (stateful), so a load balancer must send every request carrying
  that header to the node that issued it. Stateful, not stateless, because only a session has the
  back channel that elicitation needs in that era (docs/deploy.md).
- Authentication (server/auth.py): a bearer token on every request, checked by the SDK's
  middleware (401 with `WWW-Authenticate` otherwise). With `--no-auth` (a loopback address
  only) the one token is the local user's, kept in `local-token` in the home (0600): other
  accounts on the machine reach a loopback port too.
- Bounds (server/in_flight.py, and `WholeBodies` here): requests in flight per token user, per
  client address and per node, below the open-files limit that `serve_http` raises at start, so
  one token holder's long calls and event streams cannot take the files that others' calls and
  `/health` need.
- Shutdown: SIGTERM or SIGINT stops the listener at once, closes the open GET event streams (they
  carry no call's answer) and lets calls in flight finish for `ASK_ANOTHER_SHUTDOWN_SECONDS`;
  then the lifespan closes the runtime, whose research jobs hand their leases back. A second
  Ctrl-C (SIGINT) cancels the calls still running (the runtime still closes in order).
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlsplit

import trio
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, RequireAuthMiddleware
from mcp.server.auth.provider import TokenVerifier
from mcp.server.auth.routes import build_resource_metadata_url
from mcp.server.auth.settings import AuthSettings
from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE
from mcp_types import PARSE_ERROR, JSONRPCError
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount

from ask_another.config import DEFAULT_BODY_SECONDS, Config
from ask_another.connections import REASON_HEADER
from ask_another.errors import AskAnotherError, ConfigError
from ask_another.hosting import KEEP_ALIVE_SECONDS as KEEP_ALIVE_SECONDS
from ask_another.hosting import (
    ASGIApp,
    Drain,
    Scope,
    Unavailable,
    is_loopback,
    listen,
    open_lifespan,
    serve_until_stopped,
    url_host,
)
from ask_another.logs import get_logger
from ask_another.rebinding import transport_security
from ask_another.runtime import Runtime
from ask_another.server.app import build_server
from ask_another.server.auth import (
    AnyOfVerifiers,
    JwtVerifier,
    LocalTokenVerifier,
    TokensFileVerifier,
    auth_settings,
)
from ask_another.server.context import token_user
from ask_another.server.in_flight import InFlight, InFlightBounds, raise_open_files_limit
from ask_another.server.stdio import AnsweringStdin
from ask_another.server.tokens import local_token

__all__ = [
    "DEFAULT_PORT",
    "HEALTH_PATH",
    "MCP_PATH",
    "METRICS_PATH",
    "SESSIONS_PER_USER",
    "Drain",
    "HttpAuth",
    "OpenSessions",
    "TokenFirst",
    "WholeBodies",
    "is_loopback",
    "plan_auth",
    "serve_http",
    "transport_security",
]

log = get_logger("ask_another.server.http")

DEFAULT_PORT: Final = 8765
MCP_PATH: Final = "/mcp"
HEALTH_PATH: Final = "/health"
HEALTH_SECONDS: Final = 5.0
HEALTH_FRESH: Final = 1.0  # /health asks the store at most this often
METRICS_PATH: Final = "/metrics"

@dataclass(frozen=True)
class HttpAuth:
    """What the SDK is given: both None for `--no-auth`."""

    settings: AuthSettings | None
    verifier: TokenVerifier | None
    describe: str  # for the start-up log line


def plan_auth(config: Config, host: str, resource_url: str, *, no_auth: bool) -> HttpAuth:
    """The authentication `serve --http` runs with; `ConfigError` (one line) when it cannot."""
    if no_auth:
        if not is_loopback(host):
            raise ConfigError(f"--no-auth is allowed only on a loopback address (127.0.0.1, ::1,"
                              f" localhost), not {host}: anyone who can reach {host} would use "
                              "the server's provider keys; add a token with `ask-another token "
                              "add NAME` instead")
        # Not no token at all: every local account can reach a loopback port, and would use
        # the server as the local user (an admin, who spends the keys).
        path, token = local_token(config.home)
        return HttpAuth(auth_settings(resource_url or "http://127.0.0.1/mcp", None),
                        LocalTokenVerifier(token),
                        f"the local user's token in {path} (--no-auth, loopback only)")
    tokens = TokensFileVerifier(config.tokens_path)  # reads the file: a bad one fails here
    verifiers: list[TokenVerifier] = []
    described = []
    # The tokens file first: a local look-up, which never waits on the issuer. With OAuth it is
    # asked even while empty, so a `token add` counts from the next request.
    if tokens.users or config.oauth is not None:
        verifiers.append(tokens)
    if tokens.users:
        described.append(f"{len(tokens.users)} token(s) of {config.tokens_path}")
    if config.oauth is not None:
        audience = config.oauth.audience or resource_url
        verifiers.append(JwtVerifier(config.oauth, audience))
        described.append(f"OAuth tokens of {config.oauth.issuer} (audience {audience})")
    if not verifiers:
        raise ConfigError(f"no one could sign in: the tokens file {config.tokens_path} has no "
                          "tokens and ASK_ANOTHER_OAUTH_ISSUER is not set; run `ask-another "
                          "token add NAME` to make a token (or pass --no-auth on a loopback "
                          "address)")
    verifier = verifiers[0] if len(verifiers) == 1 else AnyOfVerifiers(verifiers)
    return HttpAuth(auth_settings(resource_url, config.oauth), verifier, "; ".join(described))


class TokenFirst:
    """ASGI middleware, first inside the SDK's authentication: a request to `MCP_PATH` without a
    valid token gets the SDK's own `401` (with `WWW-Authenticate`) here, before its body is read
    and before any bound counts it.

    The SDK checks the token at the endpoint, inside every middleware added to its app: a
    client with no token had its body read (up to `ASK_ANOTHER_BODY_SECONDS`) and counted
    against the bounds of an address that real users may share (a proxy, a NAT) before its
    401. The SDK's check stays where it is; this one only comes first."""

    def __init__(self, app: ASGIApp, settings: AuthSettings | None) -> None:
        self.app = app
        metadata = (build_resource_metadata_url(settings.resource_server_url)
                    if settings is not None and settings.resource_server_url else None)
        self.required = RequireAuthMiddleware(
            app, (settings.required_scopes or []) if settings is not None else [], metadata)

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] == MCP_PATH:
            await self.required(scope, receive, send)
        else:
            await self.app(scope, receive, send)


SESSIONS_PER_USER: Final = 64
"""Handshake-era sessions one token user may have open at once on a node, while
ASK_ANOTHER_RATE_PER_MINUTE is on (well above a person's clients, well below the SDK's 10,000)."""
SESSIONS_RETRY_SECONDS: Final = 60
"""The `Retry-After` of a refused session: a slot frees when the user closes a session (DELETE),
or when one has idled for the SDK's 30 minutes."""


class OpenSessions:
    """ASGI middleware, inside the SDK's authentication, that bounds the handshake-era sessions
    each token user has open at once (`SESSIONS_PER_USER`).

    Sessions open, not sessions opened: a session ended with `DELETE`, or by the SDK (idle
    timeout, crash), frees its slot, so a client that opens one per tool call
    (langchain-mcp-adapters' default) may make as many calls as its rate allows. The SDK keeps
    at most 10,000 sessions for 30 idle minutes each, for everyone: without a bound per user, one
    user opening sessions in a loop kept every other handshake-era client out (`503 Too many
    open sessions`). A refusal is `429` with `Retry-After`, its reason also in the status
    line's reason phrase (clients show that, not the body)."""

    def __init__(self, app: ASGIApp, is_open: Callable[[str], bool],
                 bound: int = SESSIONS_PER_USER) -> None:
        self.app = app
        self.is_open = is_open  # whether the SDK still holds the session of this id
        self.bound = bound
        self.sessions: dict[str, set[str]] = {}  # user id -> ids of the sessions they opened
        self.opening: collections.Counter[str] = collections.Counter()  # being opened now

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        user = scope.get("user")
        who = (token_user(user.access_token).id if isinstance(user, AuthenticatedUser)
               else None)
        if not (scope["type"] == "http" and scope["path"] == MCP_PATH and who is not None
                and _opens_session(scope)):  # the local user (None) is never limited
            await self.app(scope, receive, send)
            return
        held = {session for session in self.sessions.pop(who, ()) if self.is_open(session)}
        if held:
            self.sessions[who] = held
        if len(held) + self.opening[who] >= self.bound:
            message = (f"too many open sessions: at most {self.bound} at once per user; close "
                       "one (DELETE) or retry when one has ended")
            log.info("http.too_many_sessions", user=who, bound=self.bound)
            await JSONResponse(
                {"jsonrpc": "2.0", "id": None, "error": {"code": -32000, "message": message}},
                status_code=429, headers={"Retry-After": str(SESSIONS_RETRY_SECONDS),
                                          REASON_HEADER: message})(scope, receive, send)
            return

        async def noting_the_session(message: Any) -> None:
            if message["type"] == "http.response.start" and message["status"] < 400:
                for name, value in message.get("headers", ()):
                    if name.lower() == b"mcp-session-id":
                        self.sessions.setdefault(who, set()).add(value.decode("latin-1"))
            await send(message)

        self.opening[who] += 1
        try:
            await self.app(scope, receive, noting_the_session)
        finally:
            self.opening[who] -= 1
            if self.opening[who] <= 0:
                del self.opening[who]


class WholeBodies:
    """ASGI middleware, inside the SDK's authentication, that reads a POST's body before the SDK.

    - A client that hangs up before its body is complete is one `http.client_gone` line at INFO
      (the SDK logged a 60-line `ClientDisconnect` traceback at ERROR for each: 1,330 in 30 s).
    - A body the SDK's own parser (the one stdio uses) cannot read is answered `-32700` the way
      stdio answers it, with its id when that can be read: the 2026-07-28 handler parses with
      Python's `json`, which accepts a lone surrogate (`"\\ud800"`) that then failed deep in a
      tool as "Internal error (UnicodeEncodeError)".
    - Slow clients: a body must arrive within `seconds` (`ASK_ANOTHER_BODY_SECONDS`), else
      `408`; and a body still arriving after `SLOW_AFTER` is a slow one, of which at most
      `BODIES_PER_USER` per token user and `BODIES_PER_ADDRESS` per client address are read at
      once, more answered `429`. A token holder sending
      bodies at 1 byte/s held connections for ever: 1,100 of them filled the node's 1,024 files
      and other users' calls and `/health` timed out. (hypercorn's `read_timeout` does not
      help: it bounds each read, which a byte a second meets, and would also end the long SSE
      answers during which a client sends nothing.)
    A body over the SDK's limit is handed on as it comes (the SDK answers it `413`)."""

    def __init__(self, app: ASGIApp, seconds: float = DEFAULT_BODY_SECONDS,
                 limit: int = DEFAULT_MAX_REQUEST_BODY_SIZE) -> None:
        self.app = app
        self.seconds = seconds
        self.limit = limit
        self.reading: collections.Counter[str] = collections.Counter()  # bodies being read

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or scope["path"] != MCP_PATH:
            await self.app(scope, receive, send)
            return
        user = scope.get("user")
        client = scope.get("client")
        body = bytearray()
        outcome: tuple[str, bool] | None = None
        grace = min(SLOW_AFTER, self.seconds)
        with trio.move_on_after(grace):  # a cancel scope, no task: most bodies are here at once
            outcome = await self._receive(receive, body)
        if outcome is None:
            # Still arriving: a slow body, counted against the bounds while it is read.
            readers = [f"address {client[0]}"] if client else []
            if isinstance(user, AuthenticatedUser):
                readers.append(f"user {token_user(user.access_token).id}")
            refused = self._over_bound(readers)
            if refused is not None:
                reader, bound = refused
                log.info("http.too_many_bodies", reader=reader, bound=bound)
                await _refuse(scope, receive, send, 429,
                              f"too many requests still sending their body from this "
                              f"{reader.split()[0]} (at most {bound} at once); retry when one "
                              "is sent", {"Retry-After": "1", "Connection": "close"})
                return
            self.reading.update(readers)
            try:
                with trio.move_on_after(self.seconds - grace):
                    outcome = await self._receive(receive, body)
            finally:
                self.reading.subtract(readers)
                for reader in readers:
                    if self.reading[reader] <= 0:
                        del self.reading[reader]
        if outcome is None:
            log.info("http.slow_body", seconds=self.seconds,
                     address=client[0] if client else None)
            await _refuse(scope, receive, send, 408,
                          f"the request's body did not arrive within {self.seconds:g} s "
                          "(ASK_ANOTHER_BODY_SECONDS)", {"Connection": "close"})
            return
        kind, more = outcome
        if kind == "gone":
            log.info("http.client_gone", path=scope["path"], received_bytes=len(body),
                     reason="the client closed the connection before its request's body was "
                            "complete")
            return
        if kind == "complete":
            answer = _unreadable(bytes(body), dict(scope["headers"]))
            if answer is not None:
                log.info("http.unreadable_request", id=answer.id, reason=answer.error.message)
                await JSONResponse(answer.model_dump(mode="json", exclude_unset=True),
                                   status_code=400)(scope, receive, send)
                return
        # Over the SDK's limit ("over"): the SDK's to answer (413); it gets what came, then
        # the rest as it comes.
        held = [{"type": "http.request", "body": bytes(body), "more_body": more}]

        async def replay() -> Any:
            return held.pop(0) if held else await receive()

        await self.app(scope, replay, send)

    def _over_bound(self, readers: list[str]) -> tuple[str, int] | None:
        """The first of `readers` already sending as many slow bodies as it may, and its bound."""
        for reader in readers:
            bound = BODIES_PER_ADDRESS if reader.startswith("address") else BODIES_PER_USER
            if self.reading[reader] >= bound:
                return reader, bound
        return None

    async def _receive(self, receive: Any, body: bytearray) -> tuple[str, bool]:
        """Add to `body` until it is complete, over the limit or the client gone: which, and
        whether more of it is still to come. Safe to cancel and call again."""
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return "gone", False
            body += message.get("body", b"")
            more = bool(message.get("more_body", False))
            if len(body) > self.limit:
                return "over", more
            if not more:
                return "complete", False


SLOW_AFTER: Final = 2.0
"""A body still arriving after this long is a slow one, counted against the bounds below (not
much less: on a loaded node a body already sent can wait a second for the loop to read it; 200
clients of one token on a loaded two-core machine had 42 of 2,000 bodies refused at 1 s and 16)."""
BODIES_PER_USER: Final = 64
"""Slow request bodies one token user may be sending at once on a node."""
BODIES_PER_ADDRESS: Final = 128
"""Slow request bodies one client address may be sending at once on a node (several tokens)."""


async def _refuse(scope: Scope, receive: Any, send: Any, status: int, message: str,
                  headers: dict[str, str]) -> None:
    await JSONResponse({"jsonrpc": "2.0", "id": None,
                        "error": {"code": -32000, "message": message}},
                       status_code=status, headers=headers)(scope, receive, send)


def _unreadable(body: bytes, headers: dict[bytes, bytes]) -> JSONRPCError | None:
    """stdio's parse error for a JSON body the SDK's parser refuses; None for anything else
    (not JSON by its content type, not UTF-8, or readable: the SDK answers those itself)."""
    if not headers.get(b"content-type", b"").lower().startswith(b"application/json"):
        return None
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return None
    answer = AnsweringStdin.answer_for(text)
    if answer is None or answer.error.code != PARSE_ERROR:
        return None
    return answer


def _opens_session(scope: Scope) -> bool:
    """Whether the SDK would open a session for this request: the handshake era (no
    MCP-Protocol-Version header, or one of that era's) and no session id."""
    headers = dict(scope["headers"])
    version = headers.get(b"mcp-protocol-version")
    return b"mcp-session-id" not in headers and (
        version is None or version.decode("latin-1") in HANDSHAKE_PROTOCOL_VERSIONS)


async def serve_http(config: Config, host: str = "127.0.0.1", port: int = DEFAULT_PORT, *,
                     no_auth: bool = False, console_allow_stop: bool = False) -> None:
    """Serve MCP over Streamable HTTP on `host:port` until SIGTERM or SIGINT (run under trio).

    The console (ask_another/console/) is served at `/console` on the same listener, logging
    in with the same tokens; `console_allow_stop` lets its admins stop a process.

    Raises `ConfigError` before serving anything when it cannot start (no tokens, `--no-auth`
    off loopback, the port taken), and the runtime's own error when it cannot open (an unusable
    home, a database that cannot be opened or reached)."""
    if not 0 <= port <= 65535:
        raise ConfigError(f"--port must be 0-65535, got {port}")
    if no_auth and not is_loopback(host):
        plan_auth(config, host, "", no_auth=True)  # raises: checked before binding anything
    if config.oauth is not None and config.public_url is None and not is_loopback(host):
        # The resource URL is the tokens' audience and what the metadata tells clients: a bind
        # address such as 0.0.0.0 is neither.
        raise ConfigError("ASK_ANOTHER_OAUTH_ISSUER needs ASK_ANOTHER_PUBLIC_URL when serving on "
                          f"{host}: the MCP endpoint's URL as clients reach it, such as "
                          "https://ask.example.com/mcp")
    # Who could sign in is checked before binding: "run `ask-another token add NAME`" must not
    # hide behind "address already in use" (the real port, for an OAuth audience, comes next).
    plan_auth(config, host, config.public_url or f"http://{url_host(host)}:{port}{MCP_PATH}",
              no_auth=no_auth)
    # Raised before anything opens: every request in flight holds a file, and the soft limit is
    # often 1,024 where the hard one is far higher.
    open_files, before = raise_open_files_limit()
    bounds = InFlightBounds.plan(config, open_files)
    log.info("http.open_files", limit=open_files, raised_from=before if before != open_files
             else None, requests_in_flight=bounds.total, per_user=bounds.per_user,
             per_address=bounds.per_address)
    sock = listen(host, port)
    port = sock.getsockname()[1]
    local_url = f"http://{url_host(host)}:{port}{MCP_PATH}"
    resource_url = config.public_url or local_url
    try:
        auth = plan_auth(config, host, resource_url, no_auth=no_auth)
    except BaseException:
        sock.close()
        raise
    # The lifespan is opened here, not by the SDK's app, so /health can say whether it works.
    async with open_lifespan(config) as opened:
        if isinstance(opened, Unavailable):
            # Unlike stdio (whose client shows the reason), a service that cannot start exits
            # with it: serving 503 from a runtime that never opens would outlive the cause (a
            # database not up yet), while a service manager restarts an exited node.
            sock.close()
            raise opened.error
        from ask_another.console import Metrics

        metrics = Metrics()
        server = build_server(config, auth=auth.settings, token_verifier=auth.verifier,
                              opened=opened, metrics=metrics,
                              console_url=console_url(resource_url))
        metrics.tools = frozenset(tool.name for tool in await server.list_tools())
        server.custom_route(METRICS_PATH, methods=["GET"], include_in_schema=False)(
            MetricsRoute(opened, metrics, auth.verifier).respond)

        # A bound method: Starlette calls a plain callable object as an ASGI app instead.
        server.custom_route(HEALTH_PATH, methods=["GET"], include_in_schema=False)(
            Health(opened).respond)

        mcp_app = server.streamable_http_app(
            streamable_http_path=MCP_PATH, host=host,
            transport_security=transport_security(host, config.public_url))
        # Right after the SDK's authentication (which only names the user): a request without a
        # valid token is answered 401 before its body is read or any bound counts it. Then
        # requests in flight are counted, a slow body included.
        mcp_app.user_middleware.append(Middleware(TokenFirst, settings=auth.settings))
        mcp_app.user_middleware.append(Middleware(InFlight, bounds=bounds,
                                                  exempt=frozenset({HEALTH_PATH})))
        mcp_app.user_middleware.append(Middleware(WholeBodies, seconds=config.body_seconds))
        if config.rate_per_minute > 0:
            # Innermost, after the SDK's authentication, which names the user. The SDK's own
            # table of sessions is the truth of which are still open (it has no public view).
            sessions = server.session_manager._server_instances
            mcp_app.user_middleware.append(Middleware(OpenSessions,
                                                      is_open=sessions.__contains__))
        mcp_app.router.routes.append(console_mount(config, opened, auth, no_auth=no_auth,
                                                   allow_stop=console_allow_stop,
                                                   resource_url=resource_url, host=host))
        app = Drain(mcp_app)
        await serve_until_stopped(app, sock, config, local_url, resource_url, auth.describe,
                                  console=console_url(resource_url))


def console_url(resource_url: str) -> str:
    """The console's root beside the MCP endpoint `resource_url` (the public URL when set):
    `https://ask.example.com/mcp` -> `https://ask.example.com/console`."""
    from ask_another.console import ROOT

    parts = urlsplit(resource_url)
    base = parts.path.removesuffix("/").removesuffix(MCP_PATH)
    return f"{parts.scheme}://{parts.netloc}{base}{ROOT}"


def console_mount(config: Config, runtime: Runtime, auth: HttpAuth, *, no_auth: bool,
                  allow_stop: bool, resource_url: str, host: str) -> Mount:
    """The console at `/console`: logging in with a token `auth` accepts (no login with
    `--no-auth`), or through the OAuth issuer when the console has a client id there, its
    sessions signed with the key kept in the home (they outlive a restart). It checks Host as
    the MCP endpoint on `host` does (ask_another/rebinding.py)."""
    from ask_another.console import ROOT, Console, Login, load_key
    from ask_another.console._oauth import OAuthLogin

    key = load_key(config.home / "console.key")
    oauth = config.oauth
    through_issuer = None
    if oauth is not None and oauth.console_client_id is not None and not no_auth:
        through_issuer = OAuthLogin(
            oauth.issuer, oauth.console_client_id,
            f"{console_url(resource_url)}/login/oauth/callback",
            oauth.audience or resource_url, key)
    login = (Login("open") if no_auth else
             Login("token", verifier=auth.verifier,
                   tokens=TokensFileVerifier(config.tokens_path), oauth=through_issuer))
    public = config.public_url or ""
    console = Console(runtime, key, login, secure=public.startswith("https://"),
                      allow_stop=allow_stop,
                      hosts=transport_security(host, config.public_url))
    return Mount(ROOT, app=console.app)


class MetricsRoute:
    """`GET /metrics` (Prometheus text format, console/_metrics.py) for an admin's bearer token
    (a scraper's `authorization` setting); anyone's with `--no-auth`."""

    def __init__(self, runtime: Runtime, metrics: Any, verifier: TokenVerifier | None) -> None:
        self.runtime = runtime
        self.metrics = metrics
        self.verifier = verifier

    async def respond(self, request: Request) -> Response:
        if self.verifier is not None:
            scheme, _, token = request.headers.get("authorization", "").partition(" ")
            access = (await self.verifier.verify_token(token.strip())
                      if scheme.lower() == "bearer" and token.strip() else None)
            if access is None or not token_user(access).admin:
                return JSONResponse({"error": "/metrics needs an admin's bearer token"},
                                    status_code=401 if access is None else 403,
                                    headers={"WWW-Authenticate": "Bearer"})
        from ask_another.console._metrics import CONTENT_TYPE

        return Response(await self.metrics.render(self.runtime), media_type=CONTENT_TYPE)


class Health:
    """`GET /health`, for a load balancer: no token needed. 503 when the store does not answer
    (PostgreSQL down since the start), so the balancer sends no calls here that would only fail.
    The store is asked at most once every `HEALTH_FRESH` seconds, the answer shared by every
    request meanwhile: anyone who can reach the port may send thousands of them (pipelined, on
    a thousand connections), and each cost a query. The reason goes to the log when it changes,
    not to the caller: it names the database's host, port and user, which anyone who can reach
    the port need not learn."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.problem: str | None = None  # what the last check found
        self.checked: float | None = None  # when (trio's clock)
        self.checking = trio.Lock()

    async def respond(self, _: Request) -> Response:
        async with self.checking:  # one check at a time; those waiting take its answer
            if self.checked is None or trio.current_time() - self.checked >= HEALTH_FRESH:
                problem = await health_problem(self.runtime)
                self.checked = trio.current_time()
                if problem != self.problem:
                    if problem is None:
                        log.info("http.healthy")
                    else:
                        log.warning("http.unhealthy", problem=problem)
                self.problem = problem
        if self.problem is None:
            return JSONResponse({"status": "ok"})
        return JSONResponse({"status": "unavailable",
                             "error": "the store does not answer; the server's log says why"},
                            status_code=503)


async def health_problem(opened: Runtime | Unavailable) -> str | None:
    """Why this node cannot serve calls (one line), or None: the runtime is open and the store
    answers a query within `HEALTH_SECONDS`."""
    if isinstance(opened, Unavailable):
        return str(opened.error)
    try:
        with trio.fail_after(HEALTH_SECONDS):
            database = await opened.database()
            await database.fetchone("SELECT 1")
    except trio.TooSlowError:
        return f"the store did not answer within {HEALTH_SECONDS:g} s"
    except AskAnotherError as exc:
        return str(exc)
    return None
