"""The console's web app in process: a real runtime (the simulator as the provider, the thread
gateway), the app driven by httpx over ASGI. Logging in, sessions, CSRF, who sees what, and
approval links; the browser tests (test_browser.py) drive the same pages in Chromium."""

from __future__ import annotations

import json
import re
import secrets
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace

import httpx
import pytest
import trio
from starlette.applications import Starlette
from starlette.routing import Mount

from ask_another.config import Config
from ask_another.console import ROOT, Console, Login, LoginCodes, Metrics, pending_of
from ask_another.runtime import Runtime, open_runtime
from ask_another.server.auth import TokensFile, TokensFileVerifier
from ask_another.simulator import Reply, Simulator, ToolCall, ToolCalls
from ask_another.spend.before import estimate_json
from ask_another.spend.budget import BudgetExceeded, check_budget
from ask_another.spend.estimate import Estimate, Line
from ask_another.store.jobs import JobRecord, job_store
from ask_another.store.rules import set_rule
from ask_another.store.usage import UsageRow, record_usage
from ask_another.users import LOCAL_USER, User

ARTICLE = "http://127.0.0.1:9/article"


@dataclass
class Served:
    runtime: Runtime
    console: Console
    tokens: dict[str, str]

    @asynccontextmanager
    async def browser(self) -> AsyncIterator[httpx.AsyncClient]:
        # Mounted as serve --http and ask-another console mount it.
        app = Starlette(routes=[Mount(ROOT, app=self.console.app)])
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url=f"http://testserver{ROOT}",
                                     follow_redirects=False) as client:
            yield client


@asynccontextmanager
async def served(make_config: Callable[..., Config], mode: str = "token",
                 codes: LoginCodes | None = None, allow_stop: bool = False,
                 secure: bool = False, **settings: str) -> AsyncIterator[Served]:
    config = make_config(ASK_ANOTHER_PERMISSIONS="read=ask", ASK_ANOTHER_CONFIRM_USD="1000",
                         **settings)
    file = TokensFile(config.tokens_path)
    tokens = {"alice": file.add("alice"), "bob": file.add("bob"),
              "root": file.add("root", admin=True)}
    verifier = TokensFileVerifier(config.tokens_path)
    login = (Login("token", verifier=verifier, tokens=verifier) if mode == "token"
             else Login("code", codes=codes) if mode == "code" else Login("open"))
    async with open_runtime(config, prewarm_after=None) as runtime:
        yield Served(runtime, Console(runtime, secrets.token_bytes(32), login,
                                      allow_stop=allow_stop, secure=secure), tokens)


async def log_in(client: httpx.AsyncClient, token: str) -> None:
    response = await client.post("/login", data={"token": token})
    assert response.status_code == 303, response.text
    client.cookies = response.cookies


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found, html
    return found.group(1)


async def waiting_job(sim: Simulator, runtime: Runtime, user: str) -> str:
    """An agent job of the tokens-file user named `user` that waits for permission to read an
    article."""
    sim.script("m1", [ToolCalls([ToolCall("read_article", {"url": ARTICLE}, id="call-1")]),
                      Reply("the report")])
    (principal,) = (u.principal for u in TokensFile(runtime.config.tokens_path).users()
                    if u.name == user)
    jobs = runtime.jobs_for(User(principal, admin=False))
    record = await jobs.start("sim", "what is new?", method="agent")
    with trio.fail_after(30):
        while True:  # the job's actor answers Status(): nothing to wait on but it
            if (await jobs.get(record.id)).waiting_for:
                return record.id
            await trio.sleep(0.02)


async def test_a_page_without_a_session_goes_to_the_login_page_and_a_bad_token_is_refused(
    make_config: Callable[..., Config]
):
    async with served(make_config) as s, s.browser() as client:
        response = await client.get("/jobs")
        assert response.status_code == 303
        assert response.headers["location"] == f"{ROOT}/login?next={ROOT}/jobs"
        refused = await client.post("/login", data={"token": "aa_not-a-token"})
        assert refused.status_code == 401 and "not valid here" in refused.text
        assert "set-cookie" not in refused.headers


async def test_login_sets_an_httponly_strict_cookie_and_logout_ends_it_even_if_sent_again(
    make_config: Callable[..., Config]
):
    async with served(make_config) as s, s.browser() as client:
        response = await client.post("/login", data={"token": s.tokens["alice"],
                                                     "next": f"{ROOT}/approvals"})
        assert response.status_code == 303 and response.headers["location"] == f"{ROOT}/approvals"
        cookie = response.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Secure" not in cookie
        client.cookies = response.cookies
        page = await client.get("/jobs")
        assert page.status_code == 200 and "alice" in page.text
        kept = dict(client.cookies)
        out = await client.post("/logout", data={"csrf": csrf_of(page.text)})
        assert out.status_code == 303
        client.cookies = kept  # a copy of the cookie, replayed after logout
        assert (await client.get("/jobs")).status_code == 303


async def test_a_login_redirect_never_leaves_the_console(make_config: Callable[..., Config]):
    async with served(make_config) as s, s.browser() as client:
        for target in ("https://evil.example/", "//evil.example/x", "/mcp"):
            response = await client.post("/login", data={"token": s.tokens["alice"],
                                                         "next": target})
            assert response.headers["location"] == f"{ROOT}/jobs", target


async def test_a_removed_token_ends_its_sessions(make_config: Callable[..., Config]):
    async with served(make_config) as s, s.browser() as client:
        await log_in(client, s.tokens["bob"])
        assert (await client.get("/jobs")).status_code == 200
        TokensFile(s.runtime.config.tokens_path).remove("bob")
        assert (await client.get("/jobs")).status_code == 303


async def test_a_form_without_its_csrf_token_is_refused_and_changes_nothing(
    sim: Simulator, make_config: Callable[..., Config]
):
    async with served(make_config) as s, s.browser() as client:
        job = await waiting_job(sim, s.runtime, "alice")
        await log_in(client, s.tokens["alice"])
        for data in ({"answer": "allow"}, {"answer": "allow", "csrf": "forged"}):
            refused = await client.post(f"/approvals/{job}/call-1", data=data)
            assert refused.status_code == 403 and "CSRF" in refused.text
        refused = await client.post(f"/jobs/{job}/cancel", data={})
        assert refused.status_code == 403
        record = await s.runtime.jobs.get(job)
        assert record.status == "in_progress" and record.waiting_for


async def test_allow_once_from_the_approval_link_lets_the_job_finish(
    sim: Simulator, make_config: Callable[..., Config]
):
    async with served(make_config) as s, s.browser() as client:
        job = await waiting_job(sim, s.runtime, "alice")
        await log_in(client, s.tokens["alice"])
        listing = await client.get("/approvals")
        assert f"{ROOT}/approvals/{job}/call-1" in listing.text and ARTICLE in listing.text
        page = await client.get(f"/approvals/{job}/call-1")
        assert page.status_code == 200 and "read_article" in page.text
        answered = await client.post(f"/approvals/{job}/call-1",
                                     data={"answer": "allow", "csrf": csrf_of(page.text)})
        assert answered.status_code == 303 and "was%20allowed" in answered.headers["location"]
        done = await s.runtime.jobs.wait(job, timeout=30)
        assert done.status == "completed" and done.report == "the report"
        # The link has expired with its request.
        late = await client.get(f"/approvals/{job}/call-1")
        assert late.status_code == 410 and "has expired" in late.text


async def test_bob_can_neither_see_nor_answer_nor_cancel_alices_job_by_url(
    sim: Simulator, make_config: Callable[..., Config]
):
    async with served(make_config) as s, s.browser() as client:
        job = await waiting_job(sim, s.runtime, "alice")
        await log_in(client, s.tokens["bob"])
        jobs_page = await client.get("/jobs")
        assert job not in jobs_page.text
        assert job not in (await client.get("/approvals")).text
        csrf = csrf_of(jobs_page.text)
        for response in (await client.get(f"/jobs/{job}"),
                         await client.get(f"/approvals/{job}/call-1"),
                         await client.post(f"/approvals/{job}/call-1",
                                           data={"answer": "allow", "csrf": csrf}),
                         await client.post(f"/jobs/{job}/cancel", data={"csrf": csrf})):
            assert response.status_code == 404, response.text
            assert "no such job, or it is not yours" in response.text
        record = await s.runtime.jobs.get(job)
        assert record.status == "in_progress" and record.waiting_for
        # The admin sees it, with its user.
        await log_in(client, s.tokens["root"])
        page = await client.get("/approvals")
        assert job in page.text and "alice" in page.text
        # Its title is the page's name and what waits (the audit's export links had been
        # pasted into it: a tab read "Approvals<section aria-labelledby=...").
        assert "<title>(1) Approvals · ask-another console</title>" in page.text


async def test_cancel_from_the_job_page(sim: Simulator, make_config: Callable[..., Config]):
    async with served(make_config) as s, s.browser() as client:
        job = await waiting_job(sim, s.runtime, "alice")
        await log_in(client, s.tokens["alice"])
        page = await client.get(f"/jobs/{job}")
        assert "Cancel this job" in page.text
        response = await client.post(f"/jobs/{job}/cancel", data={"csrf": csrf_of(page.text)})
        assert response.status_code == 303
        assert (await s.runtime.jobs.get(job)).status == "cancelled"
        after = await client.get(response.headers["location"].removeprefix(ROOT))
        assert "cancelled" in after.text and "Cancel this job" not in after.text


async def test_a_one_time_login_link_works_once(make_config: Callable[..., Config]):
    codes = LoginCodes()
    async with served(make_config, "code", codes) as s, s.browser() as client:
        code = codes.new()
        first = await client.get(f"/login/once?code={code}")
        assert first.status_code == 303 and first.headers["location"] == f"{ROOT}/jobs"
        client.cookies = first.cookies
        assert "local user (admin)" in (await client.get("/jobs")).text
        client.cookies.clear()
        again = await client.get(f"/login/once?code={code}")
        assert again.status_code == 403 and "has been used or has expired" in again.text
        # No token login on this console.
        refused = await client.post("/login", data={"token": s.tokens["alice"]})
        assert "set-cookie" not in refused.headers


async def spend(runtime: Runtime, user: str, model: str, usd: float) -> None:
    """A priced call of the tokens-file user named `user`, in the ledger."""
    (principal,) = (u.principal for u in TokensFile(runtime.config.tokens_path).users()
                    if u.name == user)
    await record_usage(await runtime.database(), UsageRow(
        kind="completion", model=model, prompt_tokens=100, completion_tokens=20, cost_usd=usd,
        tool="completion", user_id=principal))


async def test_spending_shows_each_user_their_own_and_an_admin_everyones_with_ceilings_and_csv(
    make_config: Callable[..., Config]
):
    async with served(make_config, ASK_ANOTHER_BUDGET_DAY_USD="2") as s, s.browser() as client:
        await spend(s.runtime, "alice", "openai/alice-model", 0.5)
        await spend(s.runtime, "bob", "openai/bob-model", 0.25)
        await log_in(client, s.tokens["alice"])
        page = await client.get("/spending")
        assert page.status_code == 200
        assert "openai/alice-model" in page.text and "bob-model" not in page.text
        assert "ASK_ANOTHER_BUDGET_DAY_USD = $2.00 per day" in page.text
        assert "(25.0%)" in page.text and "<svg" in page.text
        table = (await client.get("/spending.csv?period=today")).text.splitlines()
        assert table[0].startswith("by,key,known_usd")
        assert "model,openai/alice-model,0.500000,0,1,100,20,0" in table
        assert not any("bob" in line for line in table)
        bad = await client.get("/spending?period=fortnight")
        assert bad.status_code == 409 and "unknown period" in bad.text
        await log_in(client, s.tokens["root"])
        page = await client.get("/spending")
        assert "openai/bob-model" in page.text and "By user" in page.text


async def test_runtime_is_for_admins_and_a_kill_needs_allow_stop(
    make_config: Callable[..., Config]
):
    async with served(make_config) as s, s.browser() as client:
        await log_in(client, s.tokens["alice"])
        assert (await client.get("/runtime")).status_code == 403
        await log_in(client, s.tokens["root"])
        page = await client.get("/runtime?process=store")
        assert page.status_code == 200
        assert "registered as store" in page.text and "research.owner" in page.text
        assert "--console-allow-stop" in page.text and "Kill this process" not in page.text
        refused = await client.post("/runtime/kill", data={"process": "store",
                                                           "csrf": csrf_of(page.text)})
        assert refused.status_code == 403


async def test_the_runtime_page_keeps_watching_a_process_missing_from_one_reading(
    make_config: Callable[..., Config]
):
    """Regression: a page asked for a process its reading of the tree lacked (its supervisor
    busy restarting it, after a kill under load) refreshed the tree without it from then on, so
    its panel never came back."""
    async with served(make_config, allow_stop=True) as s, s.browser() as client:
        await log_in(client, s.tokens["root"])
        page = await client.get("/runtime?process=research/nothing")
        assert page.status_code == 200
        assert 'data-live="/console/runtime?part=live&amp;process=research/nothing"' in page.text
        assert 'id="not-found"' in page.text


async def test_a_killed_process_is_restarted_and_the_runtime_page_shows_its_restarts_rise(
    make_config: Callable[..., Config]
):
    async with served(make_config, allow_stop=True) as s, s.browser() as client:
        await log_in(client, s.tokens["root"])
        page = await client.get("/runtime?process=store&part=live")
        assert 'id="restarts">0<' in page.text and "Kill this process" in page.text
        killed = await client.post("/runtime/kill", data={"process": "store",
                                                          "csrf": csrf_of(page.text)})
        assert killed.status_code == 303
        with trio.fail_after(10):
            while 'id="restarts">1<' not in page.text:
                await trio.sleep(0.05)
                page = await client.get("/runtime?process=store&part=live")
        assert (await s.runtime.jobs_for(LOCAL_USER).list()) == []  # the new store answers
        # Why it exited stays on the page after the restart: on its node, its panel, and its
        # supervisor's (the root's) recent exits.
        assert re.search(r'class="meta last-exit">last exit \d\d:\d\d:\d\d: killed<', page.text)
        assert re.search(r'id="last-exit">\d\d:\d\d:\d\d UTC: killed<', page.text)
        root = await client.get("/runtime?process=&part=live")
        assert re.search(r"<tr><td>\d\d:\d\d:\d\d</td><td>store</td><td>killed</td></tr>",
                         root.text), root.text


async def test_metrics_count_jobs_by_state_and_what_they_wait_for(
    sim: Simulator, make_config: Callable[..., Config]
):
    async with served(make_config) as s:
        await waiting_job(sim, s.runtime, "alice")
        await spend(s.runtime, "bob", "openai/m1", 0.25)
        metrics = Metrics(frozenset({"completion"}))
        metrics.observe("completion", 0.2, failed=False)
        text = (await metrics.render(s.runtime)).decode()
        assert 'ask_another_research_jobs{state="in_progress"} 1.0' in text
        assert "ask_another_approvals_waiting 1.0" in text
        assert 'ask_another_spend_usd{period="day"} 0.25' in text
        assert 'ask_another_process_restarts{process="store"} 0.0' in text
        assert 'ask_another_tool_calls_total{outcome="ok",tool="completion"} 1.0' in text


async def test_always_allow_is_stored_listed_applied_to_the_next_job_and_revocable(
    sim: Simulator, make_config: Callable[..., Config]
):
    async with served(make_config) as s, s.browser() as client:
        first = await waiting_job(sim, s.runtime, "alice")
        await log_in(client, s.tokens["alice"])
        page = await client.get(f"/approvals/{first}/call-1")
        assert "Always allow read_article" in page.text
        answered = await client.post(f"/approvals/{first}/call-1",
                                     data={"answer": "always-allow", "csrf": csrf_of(page.text)})
        assert "From%20now%20on%20your%20jobs%20allow%20read_article" in \
            answered.headers["location"]
        listing = await client.get("/approvals")
        assert "always allow" in listing.text and "Revoke" in listing.text
        # The next job of alice's reads without asking.
        (principal,) = (u.principal for u in TokensFile(s.runtime.config.tokens_path).users()
                        if u.name == "alice")
        jobs = s.runtime.jobs_for(User(principal, admin=False))
        sim.script("m1", [ToolCalls([ToolCall("read_article", {"url": ARTICLE}, id="call-2")]),
                          Reply("second report")])
        second = await jobs.start("sim", "and now?", method="agent")
        done = await jobs.wait(second.id, timeout=30)
        assert done.status == "completed" and done.report == "second report"
        assert not any("waiting for permission" in (e.step or "")
                       for e in await job_store(await s.runtime.database()).events(second.id))
        # Scoped to the host: a read of another host is asked.
        assert "reads of 127.0.0.1" in listing.text
        sim.script("m1", [ToolCalls([ToolCall("read_article", {"url": "http://192.0.2.9/x"},
                                              id="call-3")])])  # cancelled while it waits
        third = await jobs.start("sim", "elsewhere?", method="agent")
        with trio.fail_after(30):
            while True:  # the job's actor answers Status(): nothing to wait on but it
                if (await jobs.get(third.id)).waiting_for:
                    break
                await trio.sleep(0.02)
        await jobs.cancel(third.id)
        # Revoked: asked again.
        revoked = await client.post("/rules/revoke", data={"tool": "read_article",
                                                          "scope": "host:127.0.0.1",
                                                          "csrf": csrf_of(listing.text)})
        assert revoked.status_code == 303
        assert "Revoke" not in (await client.get("/approvals")).text
        await waiting_job(sim, s.runtime, "alice")


async def test_a_standing_answer_is_its_users_only(
    sim: Simulator, make_config: Callable[..., Config]
):
    async with served(make_config) as s:
        (principal,) = (u.principal for u in TokensFile(s.runtime.config.tokens_path).users()
                        if u.name == "alice")
        await set_rule(await s.runtime.database(), principal, "read_article", "allow",
                       "host:127.0.0.1", "console")
        await waiting_job(sim, s.runtime, "bob")  # bob is still asked


async def test_always_is_offered_only_for_a_permission_of_ones_own_job(
    sim: Simulator, make_config: Callable[..., Config]
):
    async with served(make_config) as s, s.browser() as client:
        job = await waiting_job(sim, s.runtime, "alice")
        await log_in(client, s.tokens["root"])  # an admin answers alice's job: once only
        page = await client.get(f"/approvals/{job}/call-1")
        assert "Allow once" in page.text and "Always allow" not in page.text
        said = await client.post(f"/approvals/{job}/call-1",
                                 data={"answer": "always-allow", "csrf": csrf_of(page.text)})
        assert "Only%20a%20permission%20request%20of%20your%20own%20job" in \
            said.headers["location"]
        assert pending_of(await s.runtime.jobs_for(LOCAL_USER).get(job))  # still asks


async def test_the_cookie_is_secure_behind_an_https_public_url(
    make_config: Callable[..., Config]
):
    async with served(make_config, secure=True) as s, s.browser() as client:
        response = await client.post("/login", data={"token": s.tokens["alice"]})
        assert "Secure" in response.headers["set-cookie"]


async def test_with_no_auth_every_visitor_is_the_local_user_and_forms_still_need_csrf(
    make_config: Callable[..., Config]
):
    async with served(make_config, "open") as s, s.browser() as client:
        page = await client.get("/jobs")
        assert page.status_code == 200 and "local user (admin)" in page.text
        assert "Log out" not in page.text
        client.cookies = page.cookies
        refused = await client.post("/runtime/kill", data={"process": "store"})
        assert refused.status_code == 403 and "CSRF" in refused.text


async def test_a_denial_with_a_reason_reaches_the_models_next_turn(
    sim: Simulator, make_config: Callable[..., Config]
):
    async with served(make_config) as s, s.browser() as client:
        job = await waiting_job(sim, s.runtime, "alice")
        await log_in(client, s.tokens["alice"])
        page = await client.get(f"/approvals/{job}/call-1")
        assert "the model reads it" in page.text
        answered = await client.post(f"/approvals/{job}/call-1", data={
            "answer": "deny", "reason": "read the official changelog instead",
            "csrf": csrf_of(page.text)})
        assert "was%20denied" in answered.headers["location"]
        done = await s.runtime.jobs.wait(job, timeout=30)
        assert done.status == "completed"
        last = [r for r in sim.requests if r.path.endswith("/chat/completions")][-1]
        told = json.dumps(last.json["messages"][-1])
        assert "The user said: read the official changelog instead" in told


async def test_a_waiting_request_stays_in_sight_behind_220_newer_jobs(
    sim: Simulator, make_config: Callable[..., Config]
):
    """Regression: the Jobs page, the Approvals page and the waiting metric read the newest 200
    jobs only, so one waiting job behind 220 quick ones vanished from both pages (the metric
    read 0) while it waited until it expired. Now the waiting jobs are a query of their own,
    and the Jobs list pages back to it, each job with its question."""
    async with served(make_config) as s, s.browser() as client:
        job = await waiting_job(sim, s.runtime, "alice")
        alice = next(u.principal for u in TokensFile(s.runtime.config.tokens_path).users()
                     if u.name == "alice")
        store = job_store(await s.runtime.database())
        for n in range(220):
            await store.insert(JobRecord(id=f"r-quick{n:05}", model="openai/m1",
                                         query=f"quick question number {n}",
                                         created_at=time.time() + 1 + n, status="completed",
                                         ended_at=time.time() + 2 + n, user_id=alice))
        for who in ("alice", "root"):
            await log_in(client, s.tokens[who])
            page = await client.get("/approvals")
            assert f"Job {job} asks to run read_article" in page.text, who
            assert f"/approvals/{job}/call-1" in (await client.get("/approvals?part=live")).text
        text = (await Metrics().render(s.runtime)).decode()
        assert "ask_another_approvals_waiting 1.0" in text

        await log_in(client, s.tokens["alice"])
        pages, path = [], "/jobs"
        while True:
            page = await client.get(path)
            assert page.status_code == 200
            pages.append(page.text)
            older = re.search(r'href="([^"]+)">Older jobs', page.text)
            if older is None:
                break
            path = older.group(1).removeprefix(ROOT).replace("&amp;", "&")
        assert len(pages) == 5  # 221 jobs, 50 a page
        assert "quick question number 219" in pages[0] and job not in pages[0]
        assert job in pages[-1] and "what is new?" in pages[-1] and "waits for you" in pages[-1]
        found = await client.get("/jobs?q=NUMBER+17&status=completed")
        assert sorted(re.findall(r"quick question number \d+", found.text)) == [
            "quick question number 17", *(f"quick question number {n}"
                                          for n in range(170, 180))]
        waiting = await client.get("/jobs?status=unfinished&model=openai/m1")
        assert job in waiting.text and "r-quick" not in waiting.text
        for odd in ("/jobs?before=nan~1", "/jobs?before=x", "/jobs?status=%00&user=x&q=%25",
                    "/jobs?before=1e400~99999999999999999999999"):
            assert (await client.get(odd)).status_code == 200, odd


async def test_login_attempts_are_throttled_per_address_and_per_user(
    make_config: Callable[..., Config]
):
    async with served(make_config) as s, s.browser() as client:
        for _ in range(10):
            refused = await client.post("/login", data={"token": "aa_a-guess"})
            assert refused.status_code == 401
        throttled = await client.post("/login", data={"token": s.tokens["alice"]})
        assert throttled.status_code == 429 and "set-cookie" not in throttled.headers
        assert "Too many login attempts from this address" in throttled.text
        assert 0 < int(throttled.headers["retry-after"]) <= 60
        # One user's logins are counted too, from any address (the address count is lifted
        # here: this client's is spent).
        s.console.address_logins.per_minute = 0
        for _ in range(10):
            assert (await client.post("/login", data={"token": s.tokens["alice"]})
                    ).status_code == 303
        alice = await client.post("/login", data={"token": s.tokens["alice"]})
        assert alice.status_code == 429 and "as alice" in alice.text
        assert (await client.post("/login", data={"token": s.tokens["bob"]})).status_code == 303


async def test_a_request_card_says_enough_to_decide(
    sim: Simulator, make_config: Callable[..., Config]
):
    """Regression: a card lacked the model and when it was asked, the request's own page had no
    "Asked by", and arguments were escaped JSON (`\\u0026` for `&`)."""
    async with served(make_config) as s, s.browser() as client:
        url = "http://127.0.0.1:9/search?q=trio&page=2"
        sim.script("m1", [ToolCalls([ToolCall("read_article", {"url": url}, id="call-1")]),
                          Reply("the report")])
        (principal,) = (u.principal for u in TokensFile(s.runtime.config.tokens_path).users()
                        if u.name == "alice")
        jobs = s.runtime.jobs_for(User(principal, admin=False))
        record = await jobs.start("sim", "is trio's nursery API stable?", method="agent")
        with trio.fail_after(30):
            while True:  # the job's actor answers Status(): nothing to wait on but it
                if (await jobs.get(record.id)).waiting_for:
                    break
                await trio.sleep(0.02)
        await log_in(client, s.tokens["alice"])
        for path in ("/approvals", f"/approvals/{record.id}/call-1"):
            page = (await client.get(path)).text
            facts = dict(re.findall(r"<dt>([^<]+)</dt><dd[^>]*>(.*?)</dd>", page, re.S))
            assert facts["Question"] == "is trio&#39;s nursery API stable?", facts
            assert facts["Model"] == "openai/m1"
            assert facts["Tool"] == "<code>read_article</code>"
            argument = re.search(r'<dl class="arguments"><dt>url</dt><dd>(.*?)</dd>', page)
            assert argument and argument.group(1) == "http://127.0.0.1:9/search?q=trio&amp;page=2"
            assert "\\u0026" not in page
            assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", facts["Asked"]), facts
            assert re.search(r"\(in \d+ min \d+ s: no answer by then denies\)",
                             facts["Expires"]), facts
        assert facts["Asked by"] == "alice"  # on the request's own page


async def test_every_answer_is_audited_on_the_jobs_page_and_exported_read_only(
    sim: Simulator, make_config: Callable[..., Config]
):
    async with served(make_config) as s, s.browser() as client:
        job = await waiting_job(sim, s.runtime, "alice")
        await log_in(client, s.tokens["alice"])
        page = await client.get(f"/approvals/{job}/call-1")
        await client.post(f"/approvals/{job}/call-1", data={
            "answer": "deny", "reason": "that page is private", "csrf": csrf_of(page.text)})
        await s.runtime.jobs.wait(job, timeout=30)
        shown = (await client.get(f"/jobs/{job}")).text
        row = re.search(r'<section class="answers-audit".*?<tbody>(.*?)</tbody>', shown, re.S)
        assert row, shown
        cells = re.findall(r"<td[^>]*>(.*?)</td>", row.group(1))
        assert cells[1:] == ["alice", "console", "read_article (call-1)", "deny",
                             "that page is private", ""], cells
        csv_text = (await client.get("/answers.csv")).text.splitlines()
        assert csv_text[0].startswith("job_id,at,principal,face,tool_call_id,tool,answer")
        assert len(csv_text) == 2 and f"{job}," in csv_text[1]
        assert "console,call-1,read_article,deny,that page is private" in csv_text[1]
        (line,) = (await client.get("/answers.jsonl")).text.splitlines()
        assert json.loads(line)["reason"] == "that page is private"
        # Nothing alters it from the console; bob sees none of alice's.
        assert (await client.post("/answers.csv", data={"csrf": csrf_of(page.text)})
                ).status_code == 405
        await log_in(client, s.tokens["bob"])
        assert (await client.get("/answers.jsonl")).text == ""
        await log_in(client, s.tokens["root"])
        assert job in (await client.get("/answers.jsonl")).text  # the team's, for an admin


async def test_an_admin_sees_each_users_use_against_the_ceilings_and_when_calls_are_refused(
    make_config: Callable[..., Config]
):
    """Regression: the admin could not see each user's use against the per-user ceilings, past
    100% the page did not say calls are refused, and dollars had six decimals."""
    async with served(make_config, ASK_ANOTHER_BUDGET_DAY_USD="2") as s, s.browser() as client:
        await spend(s.runtime, "alice", "openai/m1", 2.5)
        await spend(s.runtime, "bob", "openai/m1", 0.25)
        await spend(s.runtime, "bob", "openai/m1", 0.0004)
        await log_in(client, s.tokens["root"])
        page = (await client.get("/spending")).text
        rows = dict(re.findall(r"<tr><td>(alice|bob)</td><td>(.*?)</td></tr>", page))
        assert rows["alice"] == ("$2.50 (125.0%): <strong>calls refused</strong> until "
                                 + rows["alice"].rsplit("until ", 1)[1])
        assert rows["bob"] == "$0.25 (12.5%)"
        assert "0.000000" not in page and "$2.75" in page
        await log_in(client, s.tokens["alice"])
        mine = (await client.get("/spending")).text
        assert "your provider calls are refused until it resets" in mine
        assert "Each user against the ceilings" not in mine
        await log_in(client, s.tokens["bob"])
        assert "are refused" not in (await client.get("/spending")).text


async def test_no_url_is_a_500_and_no_link_writes_in_the_status_box(
    sim: Simulator, make_config: Callable[..., Config]
):
    """Regression: `?part=live` on an error or login page was a 500 (no such template), and
    `?said=` put any text a link carried in the page's status box. A crawl of every page with
    odd query strings, logged out and as alice and root."""
    paths = ["/", "/login", "/login/once", "/login/oauth", "/login/oauth/callback", "/logout",
             "/jobs", "/jobs/r-0000000000", "/jobs/r-0000000000/cancel", "/approvals",
             "/approvals/r-0000000000/call-1", "/rules/revoke", "/spending", "/spending.csv",
             "/runtime", "/runtime/kill", "/answers.csv", "/answers.jsonl", "/static/nope.js"]
    queries = ["", "?part=live", "?part=../base", "?part=live&said=%3Cb%3Ehi", "?period=%00",
               "?period=99999999999d", "?before=nan~1&status=x&model=&user=%FF&q=%25_%5C",
               "?process=%00&next=//evil.example", "?code=&state=x&error=boom", "?page=-1"]
    async with served(make_config) as s, s.browser() as client:
        job = await waiting_job(sim, s.runtime, "alice")
        for who in (None, "alice", "root"):
            if who is not None:
                await log_in(client, s.tokens[who])
            for path in [*paths, f"/jobs/{job}", f"/approvals/{job}/call-1"]:
                for query in queries:
                    answer = await client.get(path + query)
                    assert answer.status_code < 500, (who, path + query, answer.status_code)
                    if answer.headers.get("content-type", "").startswith("text/html"):
                        assert answer.headers["x-content-type-options"] == "nosniff"
            if who is not None:
                page = await client.get(f"/jobs/{job}?said=Your+job+was+allowed")
                assert "Your job was allowed" not in page.text  # not signed for this session
        assert "strict-transport-security" not in (await client.get("/jobs")).headers


async def test_hsts_behind_an_https_public_url(make_config: Callable[..., Config]):
    async with served(make_config, secure=True) as s, s.browser() as client:
        page = await client.get("/login")
        assert page.headers["strict-transport-security"] == "max-age=31536000"


async def test_a_job_of_unknown_price_counts_against_the_ceilings_at_its_estimate(
    make_config: Callable[..., Config]
):
    """Regression: a Gemini deep-research job confirmed at about $1.22 was in the ledger as
    "cost unknown" (litellm cannot price it) and counted toward no ceiling: the next call went
    through and the page read 0% used. It counts at its estimate until a real price replaces
    it, and the page says so."""
    async with served(make_config, ASK_ANOTHER_BUDGET_DAY_USD="2") as s, s.browser() as client:
        (alice,) = (u.principal for u in TokensFile(s.runtime.config.tokens_path).users()
                    if u.name == "alice")
        db = await s.runtime.database()
        estimate = Estimate((Line("gemini/deep-research", 1.22, "one task"),))
        await job_store(db).insert(JobRecord(
            id="gem1", model="gemini/deep-research", query="q", status="completed",
            created_at=time.time(), user_id=alice, detail={"estimate": estimate_json(estimate)}))
        unpriced = UsageRow(kind="research", model="gemini/deep-research", job_id="gem1",
                            tool="start_research", user_id=alice, call_id="interaction-1")
        await record_usage(db, unpriced)
        await spend(s.runtime, "alice", "openai/m1", 0.03)
        with pytest.raises(BudgetExceeded, match=r"\$1\.25 \(of which \$1\.22 estimated"):
            await check_budget(s.runtime.services, Estimate((Line("openai/m1", 0.9, "x"),)),
                               user_id=alice)
        await log_in(client, s.tokens["alice"])
        page = (await client.get("/spending")).text
        assert "$1.25 (of which $1.22 estimated: 1 job of unknown price at its estimate)" in page
        assert "(62.5%)" in page
        # The real figure replaces the estimate.
        await record_usage(db, replace(unpriced, cost_usd=0.5))
        page = (await client.get("/spending")).text
        assert "estimated" not in page and "$0.53 (26.5%)" in page
        await check_budget(s.runtime.services, Estimate((Line("openai/m1", 0.9, "x"),)),
                           user_id=alice)
