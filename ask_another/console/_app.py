"""The console's web app: Starlette routes over server-rendered Jinja2 templates.

Every page is read through the library faces the MCP tools use (`ResearchJobs` and the store's
usage totals), as the logged-in user, so a user sees and answers their own jobs only and an admin
everyone's (users.py); the console adds no rule of its own about who sees what. Pages work
without JavaScript; ``console.js`` only refreshes the live parts (a short poll of the same page
with ``?part=``, which returns that fragment).

Logging in (`Login`): with a token of the tokens file (or an OAuth access token when that mode
is on) on `serve --http`; with the one-time link `ask-another console` prints; or not at all on a
loopback `serve --http --no-auth`, where every visitor is the local user. Every POST carries the
session's CSRF token and is refused (403) without it.
"""

from __future__ import annotations

import csv
import hmac
import io
import json
import math
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final, Literal, Protocol
from urllib.parse import quote, urlencode, urlsplit

import jinja2
import msgspec
import trio
from mcp.server.auth.provider import TokenVerifier
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from ask_another.console._markdown import report_html, report_renderer
from ask_another.console._oauth import STATE_COOKIE, STATE_SECONDS, OAuthLogin
from ask_another.console._questions import Pending, pending_of, pending_questions
from ask_another.console._runtime import find, supervision_tree
from ask_another.console._session import (
    COOKIE,
    LoginCodes,
    Session,
    Sessions,
    token_digest,
    token_proof,
)
from ask_another.console._spending import (
    PERIODS,
    CeilingUse,
    ceiling_uses,
    chart_svg,
    dollars,
    spending,
    spending_csv,
    usd_text,
)
from ask_another.errors import AskAnotherError, LimitReached, error_text
from ask_another.hosting import KEEP_ALIVE_SECONDS, ASGIApp
from ask_another.interaction.router import MAX_DENY_MESSAGE
from ask_another.interaction.types import ALLOW, Deny
from ask_another.limits import WINDOW, RequestRate
from ask_another.logs import get_logger
from ask_another.policy import scope_text
from ask_another.rebinding import HostCheck
from ask_another.research import ResearchJobs, UnknownJob
from ask_another.research.usage import usage_text
from ask_another.runtime import Runtime
from ask_another.store.answers import Answer, answers_for, answers_of
from ask_another.store.jobs import JobQuery, JobRecord, job_store
from ask_another.store.rules import remove_rule, rules_of, set_rule
from ask_another.store.sessions import end_session, session_ended
from ask_another.users import LOCAL_USER, User, token_user

__all__ = ["ROOT", "Console", "Login"]

log = get_logger("ask_another.console")

ROOT: Final = "/console"
POLL_SECONDS: Final = KEEP_ALIVE_SECONDS - 1
"""How often an open page refreshes its live part (paused while the tab is hidden). Under the
listener's keep-alive, so the browser sends each refresh on the connection it already holds: a
new connection costs the node about three times a request on a kept-alive one (2.8-3.4 ms
against 0.9-1.6 ms), and pages that polled every 5 s or slower, as the keep-alive closed their
connections, cost ten open pages 1.1% of a core where this pace costs them under 1%
(bench/console.py)."""


class TokenHolder(Protocol):
    """One user of the tokens file, as a login is re-checked against it."""

    @property
    def name(self) -> str: ...

    @property
    def sha256(self) -> str: ...

    @property
    def admin(self) -> bool: ...

    @property
    def principal(self) -> str: ...


class TokensFile(Protocol):
    """The tokens file as the console reads it (`serve --http` gives its verifier,
    server/auth.py's `TokensFileVerifier`; the console imports nothing of the MCP server)."""

    def reload(self) -> None: ...

    @property
    def users(self) -> Sequence[TokenHolder]: ...


@dataclass(frozen=True)
class Login:
    """How people log in: `mode` "token" (a token of `verifier`; `tokens`, the tokens file's
    verifier, re-checks such logins), "code" (a one-time link of `codes`) or "open" (nobody logs
    in: the local user, on a loopback --no-auth server)."""

    mode: Literal["token", "code", "open"]
    verifier: TokenVerifier | None = None
    tokens: TokensFile | None = None
    codes: LoginCodes | None = None
    oauth: OAuthLogin | None = None  # "token" mode: also a login through the OAuth issuer


def _when(ts: float | None) -> str:
    if ts is None:
        return ""
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S")


def _seconds(value: float) -> str:
    value = int(value)
    if value < 60:
        return f"{value} s"
    if value < 3600:
        return f"{value // 60} min {value % 60} s"
    return f"{value // 3600} h {value % 3600 // 60} min"


def _plain(value: Any) -> str:
    """An argument's value as people read it: a string as it is, anything else as JSON with
    its letters unescaped (never `\\u0026` for `&`)."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _left(until: float) -> str:
    """The time left until `until`, as people read it ("in 4 min 10 s"; "now" once past)."""
    left = until - time.time()
    return f"in {_seconds(left)}" if left >= 1 else "now"


def _who(user_id: str | None) -> str:
    """A row's user as people know them: the name in a principal id (users.py), or its issuer's
    subject; "(local)" for the local user."""
    if user_id is None:
        return "(local)"
    kind, _, rest = user_id.partition(":")
    if kind == "token":
        return rest.rsplit(":", 1)[0]
    if kind == "oauth":
        return rest.rsplit("#", 1)[-1]
    return rest or user_id


def _cost(record: JobRecord) -> str:
    usage = record.detail.get("usage")
    if not isinstance(usage, dict):
        return ""
    cost = usage.get("cost_usd")
    return usd_text(cost) if isinstance(cost, int | float) else "unknown"


Handler = Callable[[Request, Session], Awaitable[Response]]


class Console:
    """The console of one running node: `app` is its ASGI app, mounted at `ROOT`."""

    def __init__(self, runtime: Runtime, key: bytes, login: Login, *,
                 secure: bool = False, allow_stop: bool = False,
                 hosts: TransportSecuritySettings | None = None) -> None:
        """`key` signs the sessions (`load_key`, or a fresh one for sessions of one run);
        `hosts`, the Host and Origin requests may carry (ask_another/rebinding.py; None: any,
        as the MCP endpoint on a host that is not a loopback one)."""
        self.runtime = runtime
        self.sessions = Sessions(key, self.still_valid)
        self.login = login
        self.secure = secure  # the cookie is Secure: the public URL is https
        self.allow_stop = allow_stop
        # Token logins counted per address (every attempt) and per user (every accepted one),
        # on this node: a guessed token is one attempt in 2^256, the limit keeps a flood of
        # them from costing the node's verifier and log.
        self.address_logins = RequestRate(LOGINS_PER_MINUTE)
        self.user_logins = RequestRate(LOGINS_PER_MINUTE)
        self.templates = jinja2.Environment(
            loader=jinja2.PackageLoader("ask_another.console", "templates"),
            autoescape=True, trim_blocks=True, lstrip_blocks=True)
        self.templates.globals.update(root=ROOT, poll_ms=int(POLL_SECONDS * 1000))
        self.parts = frozenset(self.templates.list_templates())
        reports = report_renderer()
        self.templates.filters.update(markdown=lambda text: report_html(reports, text),
                                      when=_when, seconds=_seconds, cost=_cost, who=_who,
                                      usage=usage_text, plain=_plain, left=_left,
                                      dollars=dollars, usd=usd_text)
        page = self._page
        self.app: ASGIApp = Starlette(routes=[
            Route("/", self._home),
            Route("/login", self._login, methods=["GET", "POST"]),
            Route("/login/once", self._login_once),
            Route("/login/oauth", self._login_oauth),
            Route("/login/oauth/callback", self._login_oauth_callback),
            Route("/logout", page(self._logout), methods=["POST"]),
            Route("/jobs", page(self._jobs)),
            Route("/jobs/{job_id}", page(self._job)),
            Route("/jobs/{job_id}/cancel", page(self._cancel), methods=["POST"]),
            Route("/approvals", page(self._approvals)),
            Route("/approvals/{job_id}/{tool_call_id}", page(self._approval),
                  methods=["GET", "POST"]),
            Route("/rules/revoke", page(self._revoke), methods=["POST"]),
            Route("/answers.csv", page(self._answers_export)),
            Route("/answers.jsonl", page(self._answers_export)),
            Route("/spending", page(self._spending)),
            Route("/spending.csv", page(self._spending_csv)),
            Route("/runtime", page(self._runtime)),
            Route("/runtime/kill", page(self._kill), methods=["POST"]),
            Mount("/static", StaticFiles(packages=[("ask_another.console", "static")])),
        ])
        if hosts is not None:
            self.app = HostCheck(self.app, hosts)

    # ----- sessions ---------------------------------------------------------------------------

    def still_valid(self, session: Session) -> User | None:
        """`Sessions`' re-check of a login (see _session.py)."""
        if session.kind == "local":
            return LOCAL_USER if self.login.mode in ("code", "open") else None
        if session.kind == "oauth":
            # A principal of the tokens file is never an OAuth login: such a session was made
            # from a stale copy of the file (before the login re-read it) and is re-checked by
            # nothing, so it ends here.
            if self.login.mode != "token" or (session.user.id or "").startswith("token:"):
                return None
            return session.user
        tokens = self.login.tokens
        if tokens is None:
            return None
        try:
            tokens.reload()
        except AskAnotherError:
            return None
        for user in tokens.users:
            if user.principal == session.user.id and token_proof(user.sha256) == session.proof:
                return User(user.principal, admin=user.admin, name=user.name)
        return None

    def _set_cookie(self, response: Response, value: str) -> Response:
        response.set_cookie(COOKIE, value, httponly=True, samesite="strict", secure=self.secure,
                            path=ROOT)
        return response

    def _to_login(self, request: Request) -> Response:
        target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        return RedirectResponse(f"{ROOT}/login?next={quote(target)}", status_code=303)

    async def _session(self, request: Request) -> Session | None:
        """The request's session: signed, unexpired, still valid, and not logged out on any
        node (the store's logouts: one primary-key read)."""
        session = self.sessions.read(request.cookies.get(COOKIE))
        if session is not None and await session_ended(await self.runtime.database(),
                                                       session.nonce):
            return None
        return session

    def _page(self, handler: Handler) -> Callable[[Request], Awaitable[Response]]:
        """`handler` for a logged-in session; POSTs also need the session's CSRF token."""

        async def endpoint(request: Request) -> Response:
            session = await self._session(request)
            fresh = None
            if session is None and self.login.mode == "open":
                fresh, session = self.sessions.issue(LOCAL_USER, "local")
            if session is None:
                if request.method == "POST":
                    return self._error(request, None, 403, "Your session has ended: log in "
                                       "again, then repeat what you did.")
                return self._to_login(request)
            if request.method == "POST":
                form = await request.form()
                token = form.get("csrf")
                if not self.sessions.csrf_ok(session, token if isinstance(token, str) else None):
                    log.warning("console.csrf_refused", path=request.url.path)
                    return self._error(request, session, 403, "This form was refused: it did not "
                                       "carry this session's CSRF token. Reload the page and "
                                       "try again.")
            try:
                response = await handler(request, session)
            except UnknownJob as exc:
                # Another user's job reads exactly as one that does not exist.
                log.info("console.refused", path=request.url.path, reason=type(exc).__name__)
                response = self._error(request, session, 404, "There is no such job, or it "
                                       "is not yours.")
            except AskAnotherError as exc:
                response = self._error(request, session, 409, error_text(exc))
            return self._set_cookie(response, fresh) if fresh else response

        return endpoint

    def render(self, request: Request, session: Session | None, template: str,
               status: int = 200, **context: Any) -> HTMLResponse:
        part = request.query_params.get("part")
        name = f"{template}_{part}.html"
        if part not in ("live",) or name not in self.parts:  # a page without a live part
            name = f"{template}.html"
        user = session.user if session is not None else None
        html = self.templates.get_template(name).render(
            user=user, csrf=self.sessions.csrf(session) if session else "",
            show_runtime=bool(user and user.admin), open_login=self.login.mode == "open",
            oauth_issuer=self.login.oauth.issuer if self.login.oauth is not None else None,
            **context)
        headers = {"Cache-Control": "no-store", "Content-Security-Policy": _CSP,
                   "X-Frame-Options": "DENY", "Referrer-Policy": "same-origin",
                   "X-Content-Type-Options": "nosniff"}
        if self.secure:  # the public URL is https: browsers are to keep to it
            headers["Strict-Transport-Security"] = f"max-age={HSTS_SECONDS}"
        return HTMLResponse(html, status_code=status, headers=headers)

    def _saying(self, path: str, session: Session, said: str) -> str:
        """`path` with what an action did (`said`), signed for this session, so the status
        box shows only what this console said to this person, never a link's text."""
        sign = self.sessions.sign_text(session, said)
        return f"{path}?said={quote(said)}&sig={sign}"

    def _said(self, request: Request, session: Session) -> str | None:
        said = request.query_params.get("said")
        sign = request.query_params.get("sig")
        if said is None or sign is None:
            return None
        return said if hmac.compare_digest(self.sessions.sign_text(session, said), sign) \
            else None

    def _error(self, request: Request, session: Session | None, status: int, message: str
               ) -> HTMLResponse:
        return self.render(request, session, "error", status, message=message)

    def jobs(self, session: Session) -> ResearchJobs:
        return self.runtime.jobs_for(session.user)

    # ----- login ------------------------------------------------------------------------------

    async def _home(self, request: Request) -> Response:
        return RedirectResponse(f"{ROOT}/jobs", status_code=303)

    async def _login(self, request: Request) -> Response:
        target = _safe_next(request.query_params.get("next"))
        if self.login.mode != "token":
            return self.render(request, None, "login", next=target, problem=(
                "This console takes its one-time link: run `ask-another console` again for a "
                "new one." if self.login.mode == "code" else None), form=False)
        if request.method == "GET":
            return self.render(request, None, "login", next=target, problem=None, form=True)
        form = await request.form()
        token = str(form.get("token") or "").strip()
        target = _safe_next(str(form.get("next") or "")) or target
        if not _same_origin(request):
            return self.render(request, None, "login", 403, next=target, form=True,
                               problem="This login came from another site and was refused.")
        address = request.client.host if request.client is not None else "unknown"
        refused = self._throttled(request, target, self.address_logins,
                                  f"address:{address}", "from this address")
        if refused is not None:
            return refused
        verifier = self.login.verifier
        access = await verifier.verify_token(token) if token and verifier else None
        if access is None:
            log.info("console.login_refused")
            return self.render(request, None, "login", 401, next=target, form=True,
                               problem="That token is not valid here. Paste a token from "
                               "`ask-another token add NAME` (or your OAuth access token).")
        user = token_user(access)
        refused = self._throttled(request, target, self.user_logins, user.id or "",
                                  f"as {_who(user.id)}")
        if refused is not None:
            return refused
        tokens = self.login.tokens
        proof = ""
        if tokens is not None:
            # Read again first: the verifier may have read a token added since this copy of
            # the file was read, and a login taken for an OAuth one would never be re-checked.
            try:
                tokens.reload()
            except AskAnotherError:
                pass
            digest = token_digest(token)
            if any(u.sha256 == digest for u in tokens.users):
                proof = token_proof(digest)
        if not proof and (user.id or "").startswith("token:"):
            log.warning("console.login_refused", reason="tokens file unreadable")
            return self.render(request, None, "login", 503, next=target, form=True,
                               problem="The tokens file cannot be read just now: try again.")
        if proof:
            value, _ = self.sessions.issue(user, "file", proof)
        else:
            value, _ = self.sessions.issue(user, "oauth", expires=access.expires_at)
        log.info("console.login", user=user.id)
        return self._set_cookie(RedirectResponse(target or f"{ROOT}/jobs", status_code=303),
                                value)

    def _throttled(self, request: Request, target: str | None, rate: RequestRate, key: str,
                   whom: str) -> Response | None:
        """A login page refusing the attempt (429) when `key` has made `LOGINS_PER_MINUTE`
        attempts in the last minute; None (and the attempt counted) otherwise."""
        try:
            rate.check(User(key, admin=False))
        except LimitReached as exc:
            retry = math.ceil(exc.retry_after or WINDOW)
            log.warning("console.login_throttled", by=key.partition(":")[0])
            response = self.render(request, None, "login", 429, next=target, form=True,
                                   problem=f"Too many login attempts {whom}: at most "
                                   f"{LOGINS_PER_MINUTE} a minute. Try again in {retry} s.")
            response.headers["Retry-After"] = str(retry)
            return response
        return None

    async def _login_oauth(self, request: Request) -> Response:
        """Send the browser to the issuer (console/_oauth.py)."""
        oauth = self.login.oauth
        target = _safe_next(request.query_params.get("next"))
        if oauth is None:
            return self._error(request, None, 404, "This console has no OAuth login.")
        started = await oauth.begin(target)
        if started is None:
            return self.render(request, None, "login", 503, next=target, form=True,
                               problem=f"The issuer {oauth.issuer} could not be asked for its "
                               "login (its metadata names no authorization and token "
                               "endpoints, or it does not answer). Paste an access token "
                               "instead, or try again later.")
        response = RedirectResponse(started.url, status_code=303)
        # Lax, not Strict: it must come back with the issuer's redirect, a cross-site one.
        response.set_cookie(STATE_COOKIE, started.cookie, httponly=True, samesite="lax",
                            secure=self.secure, path=f"{ROOT}/login/oauth",
                            max_age=int(STATE_SECONDS))
        return response

    async def _login_oauth_callback(self, request: Request) -> Response:
        oauth = self.login.oauth
        if oauth is None:
            return self._error(request, None, 404, "This console has no OAuth login.")
        params = request.query_params
        returned = oauth.returned(request.cookies.get(STATE_COOKIE), params.get("state"))
        code = params.get("code")
        if returned is None or not code:
            log.info("console.oauth_login_refused", error=params.get("error"))
            why = (f"the issuer said {params.get('error')!r}" if params.get("error")
                   else "it was not begun here, or it took longer than 10 minutes")
            return self.render(request, None, "login", 400, next=None, form=True,
                               problem=f"That OAuth login did not finish ({why}). Try again.")
        verifier_code, target = returned
        token = await oauth.exchange(code, verifier_code)
        verifier = self.login.verifier
        access = await verifier.verify_token(token) if token and verifier else None
        if access is None:
            log.info("console.oauth_login_refused", error="token")
            return self.render(request, None, "login", 401, next=target or None, form=True,
                               problem=f"The issuer {oauth.issuer} did not give a token this "
                               "service accepts. Try again, or paste an access token.")
        user = token_user(access)
        value, _ = self.sessions.issue(user, "oauth", expires=access.expires_at)
        log.info("console.login", user=user.id, via="oauth")
        # A page that moves on by itself rather than a redirect: a browser that counts a
        # redirect chain begun on another site (the issuer's) as cross-site would not send the
        # new SameSite=Strict cookie after a redirect (Chromium does, test_browser.py).
        response = self.render(request, None, "moving_on",
                               target=_safe_next(target) or f"{ROOT}/jobs")
        response.delete_cookie(STATE_COOKIE, path=f"{ROOT}/login/oauth")
        return self._set_cookie(response, value)

    async def _login_once(self, request: Request) -> Response:
        codes = self.login.codes
        code = request.query_params.get("code", "")
        if codes is None or not codes.take(code):
            return self.render(request, None, "login", 403, next=None, form=False,
                               problem="This login link has been used or has expired: run "
                               "`ask-another console` again for a new one.")
        value, _ = self.sessions.issue(LOCAL_USER, "local")
        target = _safe_next(request.query_params.get("next")) or f"{ROOT}/jobs"
        return self._set_cookie(RedirectResponse(target, status_code=303), value)

    async def _logout(self, request: Request, session: Session) -> Response:
        await end_session(await self.runtime.database(), session.nonce, session.expires)
        log.info("console.logout", user=session.user.id)
        response = RedirectResponse(f"{ROOT}/login", status_code=303)
        response.delete_cookie(COOKIE, path=ROOT)
        return response

    # ----- jobs -------------------------------------------------------------------------------

    async def _jobs(self, request: Request, session: Session) -> Response:
        admin = session.user.admin
        query, kept = _job_query(request.query_params, admin)
        store = job_store(await self.runtime.database())
        listed = await store.listing(session.user, query, JOBS_PER_PAGE)
        models: list[str] = []
        users: list[str | None] = []
        if request.query_params.get("part") is None:  # the filter form is not in the live part
            models, users = await store.facets(session.user)
        older = None
        if listed.after is not None:
            older = urlencode({**kept, "before": f"{listed.after[0]!r}~{listed.after[1]}"})
        return self.render(request, session, "jobs", records=listed.records, now=time.time(),
                           users=admin, waiting=_waiting(listed.records), query=query,
                           kept=kept, live=urlencode({**kept, "part": "live", **(
                               {"before": request.query_params["before"]}
                               if query.before is not None else {})}),
                           older=older, newest=urlencode(kept) if query.before else None,
                           models=models, principals=users, states=JOB_STATES)

    async def _job(self, request: Request, session: Session) -> Response:
        jobs = self.jobs(session)
        record = await jobs.get(request.path_params["job_id"])
        db = await self.runtime.database()
        events = await job_store(db).events(record.id)
        return self.render(request, session, "job", job=record, now=time.time(),
                           answers=await answers_of(db, record.id),
                           events=events[-50:], pending=pending_of(record),
                           citations=[c for c in record.citations
                                      if str(c.get("url", "")).startswith(("http://",
                                                                          "https://"))],
                           message=self._said(request, session))

    async def _cancel(self, request: Request, session: Session) -> Response:
        job_id = request.path_params["job_id"]
        outcome = await self.jobs(session).cancel(job_id)
        said = "cancelled" if outcome.cancelled else f"already {outcome.record.status}"
        log.info("console.cancel", job_id=job_id, user=session.user.id, cancelled=said)
        return RedirectResponse(self._saying(f"{ROOT}/jobs/{job_id}", session, said),
                                status_code=303)

    # ----- approvals --------------------------------------------------------------------------

    async def _approvals(self, request: Request, session: Session) -> Response:
        pending = await pending_questions(self.jobs(session),
                                          job_store(await self.runtime.database()))
        rules = await rules_of(await self.runtime.database(), session.user.id)
        return self.render(request, session, "approvals", pending=pending, rules=rules,
                           users=session.user.admin,
                           ceilings_left=await self._ceilings_left(pending))

    async def _ceilings_left(self, pending: Sequence[Pending]
                             ) -> dict[str | None, list[CeilingUse]]:
        """What is left of the ceilings for each user a spend confirmation is asked of (their
        own spend, as check_budget counts it), for the spend cards."""
        users = {p.job.user_id for p in pending if p.kind == "spend"}
        return {user_id: await ceiling_uses(self.runtime.services, user_id)
                for user_id in users}

    async def _answers_export(self, request: Request, session: Session) -> Response:
        """Every answer to the jobs the user may see (an admin: the team's), as CSV or JSON
        lines: the audit, read only (store/answers.py)."""
        rows = await answers_for(await self.runtime.database(), session.user)
        fields = list(Answer.__struct_fields__)
        if request.url.path.endswith(".csv"):
            out = io.StringIO()
            writer = csv.writer(out)
            writer.writerow([*fields, "at_utc"])
            for row in rows:
                writer.writerow([*(getattr(row, f) for f in fields), _when(row.at)])
            body, media, name = out.getvalue(), "text/csv; charset=utf-8", "answers.csv"
        else:
            body = "".join(msgspec.json.encode(row).decode() + "\n" for row in rows)
            media, name = "application/x-ndjson; charset=utf-8", "answers.jsonl"
        return Response(body, media_type=media, headers={
            "Content-Disposition": f'attachment; filename="ask-another-{name}"',
            "Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"})

    async def _revoke(self, request: Request, session: Session) -> Response:
        form = await request.form()
        tool, scope = str(form.get("tool") or ""), str(form.get("scope") or "")
        removed = await remove_rule(await self.runtime.database(), session.user.id, tool, scope)
        log.info("console.rule_revoked", tool=tool, user=session.user.id, removed=removed)
        return RedirectResponse(f"{ROOT}/approvals", status_code=303)

    async def _approval(self, request: Request, session: Session) -> Response:
        job_id = request.path_params["job_id"]
        call_id = request.path_params["tool_call_id"]
        jobs = self.jobs(session)
        record = await jobs.get(job_id)  # UnknownJob for another user's too: the 404 page
        found = [p for p in pending_of(record) if p.tool_call_id == call_id]
        if request.method == "POST":
            form = await request.form()
            answer = str(form.get("answer") or "")
            reason = str(form.get("reason") or "").strip()[:MAX_DENY_MESSAGE] or None
            try:
                said = await self._answer(jobs, found[0] if found else None, job_id, call_id,
                                          answer, reason)
            except AskAnotherError as exc:
                said = error_text(exc)
            log.info("console.answer", job_id=job_id, tool_call_id=call_id, answer=answer,
                     user=session.user.id)
            return RedirectResponse(self._saying(f"{ROOT}/jobs/{job_id}", session, said),
                                    status_code=303)
        if not found:
            return self.render(request, session, "approval", 410, job=record, question=None)
        return self.render(request, session, "approval", job=record, question=found[0],
                           ceilings_left=await self._ceilings_left(found))

    async def _answer(self, jobs: ResearchJobs, question: Pending | None, job_id: str,
                      call_id: str, answer: str, reason: str | None = None) -> str:
        """Answer the question; *always allow* / *always deny* (a permission of the user's own
        job) also stores the standing rule for its tool and that call's target (`rule_scope`:
        the host of a read, the engine of a search, the exact arguments of another tool), which
        their next jobs apply. A denial carries `reason`, which the model is told."""
        if answer.startswith("option:"):
            return await jobs.answer_choice(job_id, call_id, answer.removeprefix("option:"),
                                            face="console")
        standing = {"always-allow": "allow", "always-deny": "deny"}.get(answer)
        if standing is not None:
            if question is None or not question.standing_for(jobs.user):
                return "Only a permission request of your own job can be answered always"
            rule = f"always {standing} {question.tool}: {scope_text(question.scope)}"
            said = await jobs.answer_permission(
                job_id, call_id, ALLOW if standing == "allow" else Deny("rejected", reason),
                face="console", answer=answer, rule=rule)
            await set_rule(await self.runtime.database(), jobs.user.id, question.tool,
                           "allow" if standing == "allow" else "deny", question.scope,
                           face="console")
            return (f"{said} From now on your jobs {standing} {question.tool} for "
                    f"{scope_text(question.scope)} without asking (the approvals page lists "
                    "it; revoke it there)")
        if answer not in ("allow", "deny"):
            return f"{answer!r} is not an answer here; nothing changed"
        return await jobs.answer_permission(
            job_id, call_id, ALLOW if answer == "allow" else Deny("rejected", reason),
            face="console")


    # ----- spending ---------------------------------------------------------------------------

    async def _spending(self, request: Request, session: Session) -> Response:
        figures = await spending(self.runtime.services, session.user,
                                 request.query_params.get("period", "month"))
        totals = figures.totals
        tables = [("model", totals.by_model), ("tool", totals.by_tool)]
        if session.user.admin:
            tables.append(("user", totals.by_user))
        title = f"Known spend by day, {figures.label}"
        return self.render(request, session, "spending", s=figures, periods=PERIODS,
                           chart=chart_svg(totals.by_day, title),
                           tables=tables)

    async def _spending_csv(self, request: Request, session: Session) -> Response:
        figures = await spending(self.runtime.services, session.user,
                                 request.query_params.get("period", "month"))
        return Response(spending_csv(figures), media_type="text/csv; charset=utf-8", headers={
            "Content-Disposition": f'attachment; filename="ask-another-{figures.period}.csv"',
            "Cache-Control": "no-store"})


    # ----- runtime (admins) --------------------------------------------------------------------

    def _admin(self, request: Request, session: Session) -> Response | None:
        if session.user.admin:
            return None
        return self._error(request, session, 403, "The runtime pages are for admins (a token "
                           "made with `ask-another token add NAME --admin`).")

    async def _runtime(self, request: Request, session: Session) -> Response:
        refused = self._admin(request, session)
        if refused is not None:
            return refused
        tree = await supervision_tree(self.runtime.supervisor, self.runtime.registry)
        wanted = request.query_params.get("process")
        try:
            with trio.move_on_after(2):
                gateway = (await self.runtime.gateway()).statistics()
        except AskAnotherError:
            gateway = None
        # The page keeps watching the process asked for even when this reading of the tree
        # lacks it (a supervisor busy restarting it answers late): its next refresh shows it.
        return self.render(request, session, "runtime", tree=tree, gateway=gateway,
                           selected=find(tree, wanted) if wanted is not None else None,
                           wanted=wanted, allow_stop=self.allow_stop)

    async def _kill(self, request: Request, session: Session) -> Response:
        refused = self._admin(request, session)
        if refused is not None:
            return refused
        path = str((await request.form()).get("process") or "")
        if not self.allow_stop:
            return self._error(request, session, 403, "Stopping a process needs the service "
                               "started with --console-allow-stop.")
        tree = await supervision_tree(self.runtime.supervisor, self.runtime.registry)
        node = find(tree, path) if path else None
        if node is None or node.ref is None:
            return self._error(request, session, 404, f"No running process {path!r}.")
        log.warning("console.kill", process=path, user=session.user.id)
        node.ref.kill()
        return RedirectResponse(f"{ROOT}/runtime?process={quote(path)}", status_code=303)


HSTS_SECONDS: Final = 365 * 86400
"""How long a browser keeps to https for the console once told (behind an https public URL)."""
LOGINS_PER_MINUTE: Final = 10
"""Token logins a minute from one address, and of one user, on one node."""
JOBS_PER_PAGE: Final = 50
JOB_STATES: Final = (("unfinished", "not finished"), ("pending", "pending"),
                     ("in_progress", "in progress"), ("completed", "completed"),
                     ("failed", "failed"), ("cancelled", "cancelled"))
LOCAL_FILTER: Final = "local"
"""The user filter's value for the local user (no principal id is a bare word: users.py)."""


def _job_query(params: Any, admin: bool) -> tuple[JobQuery, dict[str, str]]:
    """The jobs list's filters from its query string, and the parameters that carry them over
    (to the live part and the next page). What cannot be read is left out, never an error."""
    kept: dict[str, str] = {}
    for name in ("status", "model", "q") + (("user",) if admin else ()):
        value = str(params.get(name) or "").strip()[:500]
        if value:
            kept[name] = value
    status = kept.get("status")
    if status is not None and status not in dict(JOB_STATES):
        del kept["status"]
        status = None
    user = kept.get("user")
    before = None
    stamp, _, seq = str(params.get("before") or "").partition("~")
    try:
        before = (float(stamp), int(seq)) if stamp and seq else None
    except ValueError:
        before = None
    if before is not None and not math.isfinite(before[0]):
        before = None
    return JobQuery(status=status, model=kept.get("model"), search=kept.get("q"),
                    principal=None if user is None else "" if user == LOCAL_FILTER else user,
                    before=before), kept


def _waiting(records: list[JobRecord]) -> dict[str, int]:
    return {r.id: len(pending_of(r)) for r in records if not r.finished}


def _safe_next(target: str | None) -> str | None:
    """A redirect target after login: a path of this console only (never another site)."""
    if not target or not target.startswith(ROOT + "/") or target.startswith("//"):
        return None
    return target


def _same_origin(request: Request) -> bool:
    """A login form posted from this console (a browser sends Origin on a POST)."""
    origin = request.headers.get("origin")
    if origin is None or origin == "null":
        return origin is None
    return urlsplit(origin).netloc == request.headers.get("host")


_CSP: Final = ("default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self' data:; "
               "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
