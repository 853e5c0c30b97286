"""The console in a real browser: Chromium (Playwright) against a real `serve --http` and a real
`ask-another console`, with the simulator as the provider and real MCP clients starting the
jobs. Each test is a scenario a person goes through (docs/console.md)."""

from __future__ import annotations

import json
import queue
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
from browser import (
    FLAGS,
    SCREENSHOTS,
    Served,
    article_site,
    chromium_path,
    console_process,
    serve_http,
)
from deadlines import generous
from http_server import http_client_for
from issuer import AuthorizationServer
from stdio_server import stdio_client_for
from tool_results import call

from ask_another.server.auth import TokensFile
from ask_another.simulator import Reply, Simulator, ToolCall, ToolCalls

pytestmark = pytest.mark.slow  # a browser and a server process

CHROMIUM = chromium_path()
if CHROMIUM is None:
    pytest.skip("no Chromium here (apt-get install chromium): the console's browser tests "
                "drive /usr/bin/chromium", allow_module_level=True)

from playwright.sync_api import Browser, Page, expect, sync_playwright  # noqa: E402

GEMINI = "gemini/deep-research-pro-preview-12-2025"
KEY = "sk-test-CONSOLE-5e2a91"
# A job's first model call waits for litellm's import: 28 s seen at load 10 on 2 cores.
WAIT_MS = int(generous(30) * 1000)
expect.set_options(timeout=WAIT_MS)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1100, "height": 760})
    context.set_default_timeout(WAIT_MS)
    try:
        yield context.new_page()
    finally:
        context.close()


def team_env(sim: Simulator, home: Path) -> dict[str, str]:
    return {"ASK_ANOTHER_HOME": str(home),
            "MODEL_SIM": f"openai/m1;{KEY};{sim.openai_base}",
            "MODEL_GDR": f"{GEMINI};{KEY};{sim.url}",
            "ASK_ANOTHER_PERMISSIONS": "read=ask",
            "ASK_ANOTHER_ALLOW_HOSTS": "127.0.0.1",
            "ASK_ANOTHER_RATE_PER_MINUTE": "0",
            "ASK_ANOTHER_BUDGET_MONTH_USD": "5",
            # A Gemini job polls the simulator this often (the default 5 s between polls, on a
            # loaded machine, outlasted the page's wait for it to complete).
            "ASK_ANOTHER_POLL_SECONDS": "0.2"}


@pytest.fixture
def team(sim: Simulator, tmp_path: Path, request: pytest.FixtureRequest
         ) -> Iterator[tuple[Served, dict[str, str]]]:
    """`serve --http` with alice, bob and an admin; agent reads ask first (a test marked
    `allow_stop` gets --console-allow-stop)."""
    home = tmp_path / "home"
    file = TokensFile(home / "tokens.json")
    tokens = {"alice": file.add("alice"), "bob": file.add("bob"),
              "root": file.add("root", admin=True)}
    env = team_env(sim, home)
    args = ("--console-allow-stop",) if getattr(request, "param", None) == "allow_stop" else ()
    with serve_http(env, tmp_path / "serve.log", *args) as served:
        yield served, tokens


def shot(page: Page, name: str) -> None:
    if SCREENSHOTS:
        Path(SCREENSHOTS).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(SCREENSHOTS) / f"{name}.png"), full_page=True)


def mcp(url: str, token: str, tool: str, **arguments: Any) -> str:
    """One tool call by a real MCP client over Streamable HTTP; its text."""
    async def go() -> str:
        async with http_client_for(url, token) as client:
            error, text = await call(client, tool, **arguments)
            assert not error, text
            return text
    return trio.run(go)


def start_agent(served: Served, token: str, query: str = "what is new in trio?") -> str:
    """An agent job, once it waits for permission for its tool call call-1."""
    async def go() -> str:
        async with http_client_for(served.mcp, token) as client:
            error, text = await call(client, "start_research", model="sim", query=query,
                                     method="agent", timeout=0)
            found = re.search(r"\br-[0-9a-f]{10}\b", text)
            assert not error and found, text
            with trio.fail_after(WAIT_MS / 1000):
                while "call-1" not in text:  # its first model call waits for litellm's import
                    await trio.sleep(0.1)
                    _, text = await call(client, "check_research", job_id=found.group(0))
            return found.group(0)
    return trio.run(go)


def log_in(page: Page, served: Served, token: str, path: str = "/console/jobs") -> None:
    page.goto(served.base + path)
    page.get_by_label("Your token").fill(token)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("button", name="Log out")).to_be_visible()


def test_log_in_allow_a_read_once_and_see_the_job_complete_with_its_citation(
    sim: Simulator, team: tuple[Served, dict[str, str]], page: Page
):
    served, tokens = team
    with article_site() as article:
        sim.script("m1", [ToolCalls([ToolCall("read_article", {"url": article}, id="call-1")]),
                          Reply("Trio 0.35 adds cancellation reasons [1].")])
        page.goto(served.base + "/console/jobs")
        shot(page, "login")
        log_in(page, served, tokens["alice"])
        job = start_agent(served, tokens["alice"])  # the page is open while it starts
        # The jobs table updates without a reload and shows that the job waits.
        row = page.locator(f"tr[data-job='{job}']")
        expect(row.get_by_role("link", name="waits for you")).to_be_visible()
        shot(page, "jobs")
        page.get_by_role("link", name="Approvals").click()
        expect(page.get_by_role("heading", name=f"Job {job} asks to run read_article")
               ).to_be_visible()
        expect(page.get_by_role("link", name=article).first).to_be_visible()
        shot(page, "approvals")
        page.get_by_role("button", name="Allow once").click()
        expect(page.get_by_role("status")).to_contain_text("was allowed")
        # The job page follows it to the end, live.
        expect(page.locator("#job-status")).to_have_text("completed")
        expect(page.get_by_role("link", name="Trio 0.35 released")).to_have_attribute(
            "href", article)
        expect(page.locator(".report .text")).to_contain_text("cancellation reasons")
        shot(page, "job")
        page.get_by_role("link", name="Spending").click()
        expect(page.get_by_role("heading", name="By model")).to_be_visible()
        expect(page.get_by_role("cell", name="openai/m1")).to_be_visible()
        shot(page, "spending")


def test_an_approval_link_opens_its_request_after_login_and_then_says_it_expired(
    sim: Simulator, team: tuple[Served, dict[str, str]], page: Page
):
    served, tokens = team
    sim.script("m1", [ToolCalls([ToolCall("read_article", {"url": "http://127.0.0.1:9/x"},
                                          id="call-1")]), Reply("done without it")])
    job = start_agent(served, tokens["alice"])
    # check_research shows the request's link.
    waiting = mcp(served.mcp, tokens["alice"], "check_research", job_id=job)
    found = re.search(r"the user can also answer it at (\S+/console/approvals/\S+?)[.;]",
                      waiting)
    assert found, waiting
    link = found.group(1).removeprefix(served.base)
    assert link == f"/console/approvals/{job}/call-1"
    # Opened before logging in: the login page brings the person back to it.
    log_in(page, served, tokens["alice"], link)
    expect(page).to_have_url(served.base + link)
    page.get_by_role("button", name="Deny once").click()
    expect(page.get_by_role("status")).to_contain_text("was denied")
    expect(page.locator("#job-status")).to_have_text("completed")
    page.goto(served.base + link)
    expect(page.get_by_role("heading", name="This request has expired")).to_be_visible()


def test_a_spend_confirmation_approved_from_the_page(
    sim: Simulator, team: tuple[Served, dict[str, str]], page: Page
):
    served, tokens = team
    text = mcp(served.mcp, tokens["alice"], "start_research", model="gdr",
               query="the state of structured concurrency", timeout=0)
    job = re.search(r"\br-[0-9a-f]{10}\b", text).group(0)  # type: ignore[union-attr]
    log_in(page, served, tokens["alice"], "/console/approvals")
    expect(page.get_by_role("heading", name=re.compile(f"Spend .* on job {job}"))
           ).to_be_visible()
    # The card says enough to decide: the model, the estimate and what is left of the
    # ceilings (it did not say what was left).
    card = page.locator(".card", has_text=job)
    expect(card).to_contain_text(GEMINI)
    expect(card.locator(".ceilings-left")).to_have_text(re.compile(
        r"\$5\.00 of \$5\.00 this month \(ASK_ANOTHER_BUDGET_MONTH_USD, resets \d{4}-"))
    shot(page, "spend")
    page.get_by_role("button", name="Spend it").click()
    expect(page.get_by_role("status")).to_contain_text("was allowed")
    expect(page.locator("#job-status")).to_have_text("completed")


def test_cancel_from_the_job_page(sim: Simulator, team: tuple[Served, dict[str, str]],
                                  page: Page):
    served, tokens = team
    sim.script("m1", [ToolCalls([ToolCall("read_article", {"url": "http://127.0.0.1:9/x"},
                                          id="call-1")]), Reply("never")])
    job = start_agent(served, tokens["alice"])
    log_in(page, served, tokens["alice"], f"/console/jobs/{job}")
    page.get_by_role("button", name="Cancel this job").click()
    expect(page.locator("#job-status")).to_have_text("cancelled")
    expect(page.get_by_role("button", name="Cancel this job")).to_have_count(0)


def test_bob_can_neither_see_nor_answer_alices_job_by_url(
    sim: Simulator, team: tuple[Served, dict[str, str]], page: Page
):
    served, tokens = team
    sim.script("m1", [ToolCalls([ToolCall("read_article", {"url": "http://127.0.0.1:9/x"},
                                          id="call-1")]), Reply("never")])
    job = start_agent(served, tokens["alice"])
    log_in(page, served, tokens["bob"])
    expect(page.get_by_role("link", name=job)).to_have_count(0)
    for path in (f"/console/jobs/{job}", f"/console/approvals/{job}/call-1"):
        response = page.goto(served.base + path)
        assert response is not None and response.status == 404
        expect(page.get_by_role("alert")).to_have_text("There is no such job, or it is not "
                                                       "yours.")
    # Still waiting: nothing bob did reached it.
    waiting = mcp(served.mcp, tokens["alice"], "check_research", job_id=job)
    assert "call-1" in waiting


def test_a_form_posted_without_its_csrf_token_is_refused(
    sim: Simulator, team: tuple[Served, dict[str, str]], page: Page
):
    served, tokens = team
    sim.script("m1", [ToolCalls([ToolCall("read_article", {"url": "http://127.0.0.1:9/x"},
                                          id="call-1")]), Reply("never")])
    job = start_agent(served, tokens["alice"])
    log_in(page, served, tokens["alice"], f"/console/approvals/{job}/call-1")
    page.locator("input[name=csrf]").evaluate_all("inputs => inputs.forEach(i => i.remove())")
    page.get_by_role("button", name="Allow once").click()
    expect(page.get_by_role("alert")).to_contain_text("did not carry this session's CSRF token")
    assert "call-1" in mcp(served.mcp, tokens["alice"], "check_research", job_id=job)


@pytest.mark.parametrize("team", ["allow_stop"], indirect=True)
def test_the_runtime_page_shows_a_killed_actors_restart_count_rising_and_why_it_exited(
    team: tuple[Served, dict[str, str]], page: Page
):
    served, tokens = team
    log_in(page, served, tokens["root"], "/console/runtime")
    page.locator("a.node[data-process='store']").click()
    expect(page.locator("#restarts")).to_have_text("0")
    expect(page.locator("#last-exit")).to_have_count(0)
    # A kill asks first: dismissed, nothing is killed; accepted, the store is killed.
    asked: list[str] = []
    page.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.dismiss()))
    page.get_by_role("button", name="Kill this process").click()
    expect(page.locator("#restarts")).to_have_text("0")
    assert asked and asked[0].startswith("Kill store?"), asked
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Kill this process").click()
    expect(page.locator("#restarts")).to_have_text("1")
    expect(page.locator("a.node[data-process='store'] .restarts")).to_have_text("restarts 1")
    expect(page.locator("#last-exit")).to_have_text(re.compile(r"^\d\d:\d\d:\d\d UTC: killed$"))
    expect(page.locator("a.node[data-process='store'] .last-exit")).to_contain_text("killed")
    # Its supervisor's panel lists the exit among its children's recent ones.
    page.locator("a.node[data-process='']").click()
    expect(page.get_by_role("row", name=re.compile(r"store killed"))).to_be_visible()
    shot(page, "runtime")


@pytest.mark.parametrize("team", ["allow_stop"], indirect=True)
def test_a_refresh_never_replaces_a_button_being_pressed(
    team: tuple[Served, dict[str, str]], page: Page
):
    """Regression: the live part was replaced under a button being clicked (always at the first
    refresh, and whenever it changed), so under load a click's press and release could land on
    two different buttons and the form (Allow once, Kill this process) was never sent. The
    page's timers run on Playwright's clock here, so each refresh happens when the test says."""
    served, tokens = team
    page.clock.install()
    log_in(page, served, tokens["root"], "/console/runtime?process=store")
    kill = page.get_by_role("button", name="Kill this process")
    kill.evaluate("button => { button.dataset.mark = 'the same button'; button.focus(); }")

    def one_refresh() -> None:
        # The next refresh is scheduled only once the last one's answer was handled, so after
        # a second answer the first has been dealt with.
        with page.expect_response(lambda response: "part=live" in response.url):
            page.clock.run_for(11_000)

    one_refresh()  # (the old script replaced the part at its first refresh, whatever it held)
    one_refresh()
    expect(page.locator("button[data-mark]")).to_have_count(1)
    kill.evaluate("button => button.blur()")
    one_refresh()
    expect(page.locator("button[data-mark]")).to_have_count(0)  # refreshed again
    expect(kill).to_be_visible()


def test_always_allow_then_a_second_job_is_not_asked(
    sim: Simulator, team: tuple[Served, dict[str, str]], page: Page
):
    served, tokens = team
    public = "http://192.0.2.1/news"  # a public-class read (refused at fetch: no network here)
    sim.script("m1", [ToolCalls([ToolCall("read_article", {"url": public}, id="call-1")]),
                      Reply("first"),
                      ToolCalls([ToolCall("read_article", {"url": public}, id="call-2")]),
                      Reply("second, without asking")])
    first = start_agent(served, tokens["alice"])
    log_in(page, served, tokens["alice"], f"/console/approvals/{first}/call-1")
    # What "always" covers is said where it is made: this host's reads, not every URL.
    page.get_by_role("button", name="Always allow read_article: reads of 192.0.2.1").click()
    expect(page.get_by_role("status")).to_contain_text(
        "From now on your jobs allow read_article for reads of 192.0.2.1")
    expect(page.locator("#job-status")).to_have_text("completed")
    text = mcp(served.mcp, tokens["alice"], "start_research", model="sim", query="again",
               method="agent", timeout=60)
    assert "second, without asking" in text, text
    page.get_by_role("link", name="Approvals").click()
    expect(page.get_by_role("cell", name="always allow")).to_be_visible()
    expect(page.get_by_role("cell", name="reads of 192.0.2.1")).to_be_visible()
    shot(page, "rules")
    page.get_by_role("button", name="Revoke").click()
    expect(page.get_by_text("None: Always allow or Always deny")).to_be_visible()


def test_ask_another_console_answers_a_job_of_another_process_on_the_home(
    sim: Simulator, team: tuple[Served, dict[str, str]], page: Page, tmp_path: Path
):
    served, tokens = team  # the job runs in this serve --http process
    sim.script("m1", [ToolCalls([ToolCall("read_article", {"url": "http://127.0.0.1:9/x"},
                                          id="call-1")]), Reply("answered from the console")])
    job = start_agent(served, tokens["alice"])
    with console_process(team_env(sim, tmp_path / "home"), tmp_path / "console.log") as link:
        page.goto(link)
        expect(page.get_by_text("local user (admin)")).to_be_visible()
        page.goto(link.split("/console/")[0] + f"/console/approvals/{job}/call-1")
        page.get_by_role("button", name="Allow once").click()
        expect(page.get_by_role("status")).to_contain_text("was allowed")
        expect(page.locator("#job-status")).to_have_text("completed")
        expect(page.locator(".report .text")).to_have_text("answered from the console")
        # Its link worked once.
        page.context.clear_cookies()
        page.goto(link)
        expect(page.get_by_role("alert")).to_contain_text("has been used or has expired")


def test_a_stdio_sessions_request_links_the_console_running_on_its_home(
    sim: Simulator, page: Page, tmp_path: Path
):
    """A stdio session knows no console of its own: while `ask-another console` runs on its
    home, check_research links the request's page there, and an answer there reaches the job."""
    home = tmp_path / "home"
    env = team_env(sim, home)
    sim.script("m1", [ToolCalls([ToolCall("read_article", {"url": "http://127.0.0.1:9/x"},
                                          id="call-1")]), Reply("answered from the console")])
    waiting: queue.Queue[str] = queue.Queue()
    answered = threading.Event()
    finished: list[str] = []

    def session() -> None:
        # The stdio session runs in this thread (its own trio run) while the browser is driven
        # from the test's, so the job's session stays open until the job is done.
        async def go() -> None:
            with (tmp_path / "stdio.log").open("w") as err:
                async with stdio_client_for(env, err) as client:
                    error, text = await call(client, "start_research", model="sim", query="q",
                                             method="agent", timeout=0)
                    job = re.search(r"\br-[0-9a-f]{10}\b", text)
                    assert not error and job, text
                    with trio.fail_after(WAIT_MS / 1000):
                        while "call-1" not in text:
                            await trio.sleep(0.1)
                            _, text = await call(client, "check_research", job_id=job.group(0))
                    waiting.put(text)
                    await trio.to_thread.run_sync(answered.wait, WAIT_MS / 1000)
                    with trio.fail_after(WAIT_MS / 1000):
                        while "answered from the console" not in text:
                            await trio.sleep(0.1)
                            _, text = await call(client, "check_research", job_id=job.group(0))
                    finished.append(text)
        try:
            trio.run(go)
        except BaseException as exc:
            waiting.put(f"the stdio session failed: {exc!r}")
            raise

    with console_process(env, tmp_path / "console.log") as link:
        root = link.split("/console/")[0] + "/console"
        thread = threading.Thread(target=session, daemon=True)
        thread.start()
        text = waiting.get(timeout=2 * WAIT_MS / 1000)
        found = re.search(r"the user can also answer it at (\S+/console/approvals/\S+?)[.;]",
                          text)
        assert found and found.group(1).startswith(f"{root}/approvals/r-"), text
        page.goto(link)  # the link needs a login: the console's one-time link
        page.goto(found.group(1))
        page.get_by_role("button", name="Allow once").click()
        expect(page.get_by_role("status")).to_contain_text("was allowed")
        expect(page.locator("#job-status")).to_have_text("completed")
        answered.set()
        thread.join(timeout=2 * WAIT_MS / 1000)
        assert finished and "answered from the console" in finished[0], finished
    assert not (home / "console.url").exists()  # gone with the console


def test_an_oauth_login_through_the_issuer_in_the_browser(page: Page, tmp_path: Path):
    """The issuer is another site (localhost against 127.0.0.1), as a real one: after its
    redirect back the console's SameSite=Strict session cookie is sent to the page it goes on
    to, and the person lands where the login began, logged in."""
    issuer = AuthorizationServer(subject="dana", host="localhost")  # another site
    env = {"ASK_ANOTHER_HOME": str(tmp_path / "home"), "ASK_ANOTHER_OAUTH_ISSUER": issuer.url,
           "ASK_ANOTHER_OAUTH_CONSOLE_CLIENT_ID": "ask-another-console"}
    try:
        with serve_http(env, tmp_path / "serve.log") as served:
            page.goto(served.base + "/console/approvals")
            page.get_by_role("link", name=f"Log in with {issuer.url}").click()
            expect(page).to_have_url(served.base + "/console/approvals")
            expect(page.get_by_role("button", name="Log out")).to_be_visible()
            expect(page.get_by_text("dana")).to_be_visible()
    finally:
        issuer.close()


@pytest.mark.parametrize("where", ["request", "approvals"])
def test_enter_in_the_reason_field_denies_with_that_reason(
    sim: Simulator, team: tuple[Served, dict[str, str]], page: Page, where: str
):
    """Regression: Enter in the denial-reason field submitted the form with its first button,
    *Allow once*, so "No - that page is private" + Enter allowed the read. On the request's own
    page and on an Approvals card, Enter there now denies, with the reason typed."""
    served, tokens = team
    sim.script("m1", [ToolCalls([ToolCall("read_article", {"url": "http://127.0.0.1:9/x"},
                                          id="call-1")]), Reply("did without it")])
    job = start_agent(served, tokens["alice"])
    log_in(page, served, tokens["alice"], f"/console/approvals/{job}/call-1"
           if where == "request" else "/console/approvals")
    reason = page.get_by_label(re.compile("Reason, for a denial"))
    reason.click()
    page.keyboard.type("No - that page is private")
    page.keyboard.press("Enter")
    expect(page.get_by_role("status")).to_contain_text("was denied")
    expect(page.locator("#job-status")).to_have_text("completed")
    last = [r for r in sim.requests_for("m1") if r.path.endswith("/chat/completions")][-1]
    assert "The user said: No - that page is private" in json.dumps(last.json["messages"][-1])


HOSTILE_REPORT = """## Findings

Trio 0.35 adds **cancellation reasons** ([the notes](https://trio.example/notes)).

<script>window.pwned = "script"</script>
<img src="x" onerror="window.pwned = 'onerror'">
<a href="javascript:window.pwned='raw link'">raw</a>
<iframe src="javascript:window.pwned='iframe'"></iframe>

[click me](javascript:window.pwned='md link') and [data](data:text/html,<script>1</script>)
![tracker](https://tracker.example/pixel.png)

| engine | score |
| --- | --- |
| a | 1 |
"""


def test_a_hostile_report_renders_as_markdown_with_nothing_to_run(
    sim: Simulator, team: tuple[Served, dict[str, str]], page: Page
):
    """Regression: a finished report showed as its raw Markdown. It is rendered (headings,
    emphasis, links, tables) with raw HTML off: tags in it are text, and no link, attribute or
    element in the report can run anything (a model that read a hostile page may write one)."""
    served, tokens = team
    sim.script("m1", [Reply(HOSTILE_REPORT)])
    text = mcp(served.mcp, tokens["alice"], "start_research", model="sim", method="agent",
               query="what is new in trio?", timeout=0)
    job = re.search(r"\br-[0-9a-f]{10}\b", text).group(0)  # type: ignore[union-attr]
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    log_in(page, served, tokens["alice"], f"/console/jobs/{job}")
    expect(page.locator("#job-status")).to_have_text("completed")
    report = page.locator(".report .text")
    expect(report.get_by_role("heading", name="Findings")).to_be_visible()
    expect(report.locator("strong")).to_have_text("cancellation reasons")
    expect(report.get_by_role("link", name="the notes")).to_have_attribute(
        "href", "https://trio.example/notes")
    expect(report.get_by_role("columnheader", name="engine")).to_be_visible()
    # The hostile parts read as the text they are.
    expect(report).to_contain_text('<script>window.pwned = "script"</script>')
    expect(report).to_contain_text("[click me](javascript:")
    found = report.evaluate("""text => ({
        elements: [...text.querySelectorAll('script, img, iframe, object, embed, style, form,'
                                           + ' svg, math, base, meta, link')].map(e => e.tagName),
        handlers: [...text.querySelectorAll('*')].flatMap(
            e => [...e.attributes].map(a => a.name).filter(n => n.startsWith('on'))),
        hrefs: [...text.querySelectorAll('[href], [src]')].map(
            e => e.getAttribute('href') || e.getAttribute('src')),
        pwned: window.pwned ?? null})""")
    assert found["elements"] == [] and found["handlers"] == [], found
    assert found["hrefs"] == ["https://trio.example/notes", "https://tracker.example/pixel.png"
                              ], found
    assert found["pwned"] is None and dialogs == [], found


def test_the_approvals_title_counts_what_waits_across_refreshes(
    sim: Simulator, team: tuple[Served, dict[str, str]], page: Page
):
    """The waiting count is in the page title (a tab in the background shows it), and the live
    refresh keeps it true: it was always just "Approvals"."""
    served, tokens = team
    sim.script("m1", [ToolCalls([ToolCall("read_article", {"url": "http://127.0.0.1:9/x"},
                                          id="call-1")]), Reply("never")])
    log_in(page, served, tokens["alice"], "/console/approvals")
    expect(page).to_have_title("Approvals · ask-another console")
    job = start_agent(served, tokens["alice"])
    expect(page).to_have_title("(1) Approvals · ask-another console")  # by the refresh
    mcp(served.mcp, tokens["alice"], "answer_permission", job_id=job, tool_call_id="call-1",
        decision="deny")
    expect(page).to_have_title("Approvals · ask-another console")
