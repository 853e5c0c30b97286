"""Permission-gated tool calls over the real thing: `python -m ask_another` on stdio, an
`mcp.Client`, the loopback simulator scripting the model's tool calls, and a local article
server that counts its hits (the side effect a denied call must not have).

Each test starts real server processes (seconds each, for litellm's import), so each runs a
session of scenarios in order. The server asks before every read (ASK_ANOTHER_PERMISSIONS=
read=ask), so read_article stands in for a tool that needs a person's permission.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import AbstractAsyncContextManager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import IO, Any

import pytest
import trio
from mcp import Client
from mcp.types import ElicitResult
from stdio_server import stdio_client_for
from tool_results import call, check_until, job_id_in

from ask_another.simulator import Reply, Simulator, Slow, ToolCalls
from ask_another.simulator import ToolCall as SimCall

pytestmark = pytest.mark.slow  # starts real server processes

ARTICLE = "<html><body><article><h1>Tides</h1><p>" + "The moon pulls the sea. " * 40 + \
    "</p></article></body></html>"


class Articles:
    """A local web server: /fast answers an article at once, /slow after 30 s; hits counted."""

    def __init__(self) -> None:
        self.hits: list[str] = []
        hits = self.hits

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                hits.append(self.path)
                if self.path.startswith("/slow"):
                    threading.Event().wait(30)
                body = ARTICLE.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                try:
                    self.wfile.write(body)
                except OSError:
                    pass

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"


@pytest.fixture
def articles() -> Iterator[Articles]:
    served = Articles()
    thread = threading.Thread(target=served.server.serve_forever, daemon=True)
    thread.start()
    yield served
    served.server.shutdown()
    served.server.server_close()


def server_env(sim: Simulator, home: Path, **extra: str) -> dict[str, str]:
    return {"ASK_ANOTHER_HOME": str(home), "MODEL_SIM": f"openai/m1;sk-test-key;{sim.openai_base}",
            "ASK_ANOTHER_PERMISSIONS": "read=ask", "ASK_ANOTHER_ALLOW_HOSTS": "127.0.0.1",
            **extra}


def connect(env: dict[str, str], stderr: IO[str], mode: str = "auto",
            elicitation_callback: Any = None) -> AbstractAsyncContextManager[Client]:
    return stdio_client_for(env, stderr, mode, elicitation_callback=elicitation_callback)


def tool_results(sim: Simulator) -> list[dict[str, Any]]:
    last = sim.requests_for("m1")[-1]
    return [json.loads(m["content"]) for m in last.messages if m["role"] == "tool"]


def read_call(url: str, call_id: str) -> ToolCalls:
    return ToolCalls([SimCall("read_article", {"url": url}, id=call_id)])


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_elicitation_answered_by_a_real_client(
    sim: Simulator, articles: Articles, tmp_path: Path, mode: str
):
    answers = iter(["allow", "deny", "allow", "allow"])
    asked: list[str] = []

    async def on_elicit(_ctx: Any, params: Any) -> ElicitResult:
        asked.append(params.message)
        fields = set(params.requested_schema["properties"])
        if fields == {"option_id"}:
            assert params.requested_schema["properties"]["option_id"]["enum"] == ["short", "long"]
            return ElicitResult(action="accept", content={"option_id": "long"})
        assert fields == {"decision"}
        return ElicitResult(action="accept", content={"decision": next(answers)})

    progress: list[str] = []

    async def on_progress(_done: float, _total: float | None, message: str | None) -> None:
        progress.append(message or "")

    env = server_env(sim, tmp_path / "home")
    with (tmp_path / "stderr.log").open("w") as stderr:
        async with connect(env, stderr, mode, on_elicit) as client:
            # 1. Allowed through elicitation: the article is read, the report uses it.
            sim.script("m1", [read_call(f"{articles.url}/fast/allowed", "call-a"),
                              Reply("The report: the moon pulls the sea.")])
            result = await client.call_tool(
                "start_research", {"model": "sim", "query": "tides?", "method": "agent",
                                   "timeout": 60}, progress_callback=on_progress)
            text = result.content[0].text  # type: ignore[union-attr]
            assert not result.is_error, text
            assert json.loads(text)["report"] == "The report: the moon pulls the sea."
            assert len(asked) == 1 and "read_article" in asked[0] and "call-a" in asked[0]
            assert "/fast/allowed" in asked[0]
            assert articles.hits == ["/fast/allowed"]
            assert tool_results(sim)[0]["success"] is True
            # The tool's lifecycle reached the attached call as progress.
            steps = [p for p in progress if "(call-a)" in p]
            assert any("pending" in p for p in steps) and any("completed" in p for p in steps)

            # 2. Denied through elicitation: the tool never runs, the model is told why.
            sim.script("m1", [read_call(f"{articles.url}/fast/denied", "call-d"),
                              Reply("I was not allowed to read it.")])
            error, text = await call(client, "start_research", model="sim", query="tides?",
                                     method="agent", timeout=60)
            assert not error, text
            assert len(asked) == 2 and "call-d" in asked[1]
            assert articles.hits == ["/fast/allowed"]  # no request for /fast/denied
            (told,) = tool_results(sim)
            assert told["success"] is False and "denied (rejected)" in told["error"]
            job = job_id_in(text)
            _, checked = await call(client, "check_research", job_id=job)
            assert json.loads(checked)["status"] == "completed"

            # 3. Several questions in one attached call: two permissions, then a choice.
            options = [{"id": "short", "label": "Short"}, {"id": "long", "label": "Long"}]
            sim.script("m1", [ToolCalls([
                SimCall("read_article", {"url": f"{articles.url}/fast/three"}, id="call-3a"),
                SimCall("ask_user", {"prompt": "How long?", "options": options}, id="call-3b"),
            ]), Reply("A long report on tides.")])
            error, text = await call(client, "start_research", model="sim", query="tides?",
                                     method="agent", timeout=60)
            assert not error, text
            # ask_user's question is its own asking: no permission request before it.
            assert ["call-3a" in asked[2], "call-3b" in asked[3], "How long?" in asked[3]] == [
                True, True, True]
            assert len(asked) == 4
            assert articles.hits == ["/fast/allowed", "/fast/three"]
            article, choice = tool_results(sim)
            assert article["success"] is True
            assert choice == {"success": True, "option_id": "long", "label": "Long"}


async def test_detached_questions_answer_tools_late_answers_and_cancel(
    sim: Simulator, articles: Articles, tmp_path: Path
):
    # ask_user=allow: a tool name overrides its class (read=ask), so questions need no permit.
    env = server_env(sim, tmp_path / "home", ASK_ANOTHER_PERMISSION_TIMEOUT="2",
                     ASK_ANOTHER_PERMISSIONS="read=ask,ask_user=allow")
    with (tmp_path / "stderr.log").open("w") as stderr:
        async with connect(env, stderr) as client:  # no elicitation capability
            # 1. Detached: the job shows what it waits for; answer_permission lets it go on.
            # The call returns as soon as the job waits for a person, naming the call to make
            # (it waited out its whole timeout, then said "check back in a minute or two").
            sim.script("m1", [read_call(f"{articles.url}/fast/one", "call-1"),
                              Reply("Read it.")])
            began = trio.current_time()
            error, text = await call(client, "start_research", model="sim", query="q",
                                     method="agent", timeout=100)
            assert not error, text
            assert trio.current_time() - began < 60
            job = job_id_in(text)
            assert "waits for permission to run read_article" in text, text
            assert f"answer_permission(job_id='{job}', tool_call_id='call-1'" in text
            waiting = await check_until(client, job, "Waiting for", no_errors=True)
            # 127.0.0.1 is in ASK_ANOTHER_ALLOW_HOSTS: a model reading it is an internal read.
            assert "permission to run read_article (class internal, server ask-another)" in waiting
            assert "tool_call_id 'call-1'" in waiting and "/fast/one" in waiting
            assert "expires 20" in waiting and "answer_permission(" in waiting
            assert articles.hits == []
            error, text = await call(client, "answer_permission", job_id=job,
                                     tool_call_id="call-9", decision="allow")
            assert error and "no question for tool call 'call-9'" in text
            error, text = await call(client, "answer_permission", job_id=job,
                                     tool_call_id="call-1", decision="allow")
            assert not error and "was allowed" in text, text
            error, text = await call(client, "answer_permission", job_id=job,
                                     tool_call_id="call-1", decision="deny")
            assert error and "already allowed by the user" in text and "changes nothing" in text
            done = await check_until(client, job, '"status": "completed"', no_errors=True)
            assert json.loads(done)["report"] == "Read it."
            assert articles.hits == ["/fast/one"]
            error, text = await call(client, "answer_permission", job_id=job,
                                     tool_call_id="call-1", decision="allow")
            assert error and "completed and waits for nothing" in text

            # 2. Nobody answers: denied as expired; a late answer is refused, nothing runs.
            sim.script("m1", [read_call(f"{articles.url}/fast/two", "call-2"),
                              Slow(3, then=Reply("Too late to read it."))])
            job = job_id_in((await call(client, "start_research", model="sim", query="q",
                                        method="agent", timeout=0))[1])
            await check_until(client, job, "tool_call_id 'call-2'", no_errors=True)
            await check_until(client, job, "call-2 Read an article: failed (denied: expired)",
                              no_errors=True)
            error, text = await call(client, "answer_permission", job_id=job,
                                     tool_call_id="call-2", decision="allow")
            assert error and "expired without an answer" in text, text
            await check_until(client, job, '"status": "completed"', no_errors=True)
            assert "denied (expired)" in tool_results(sim)[0]["error"]
            assert "/fast/two" not in articles.hits

            # 3. ask_user answered with answer_choice; a wrong option is refused.
            options = [{"id": "short", "label": "A short summary"},
                       {"id": "long", "label": "A long report"}]
            sim.script("m1", [ToolCalls([SimCall("ask_user", {"prompt": "How long?",
                                                              "options": options}, id="ask-1")]),
                              Reply("A short one, then.")])
            job = job_id_in((await call(client, "start_research", model="sim", query="q",
                                        method="agent", timeout=0))[1])
            waiting = await check_until(client, job, "the question 'How long?'", no_errors=True)
            assert "'short' (A short summary)" in waiting and "answer_choice(" in waiting
            error, text = await call(client, "answer_choice", job_id=job, tool_call_id="ask-1",
                                     option_id="medium")
            assert error and "'medium' is not an option" in text
            error, text = await call(client, "answer_permission", job_id=job,
                                     tool_call_id="ask-1", decision="allow")
            assert error and "use answer_choice" in text
            error, text = await call(client, "answer_choice", job_id=job, tool_call_id="ask-1",
                                     option_id="short")
            assert not error and "'short' was chosen" in text
            await check_until(client, job, '"status": "completed"', no_errors=True)
            assert tool_results(sim) == [
                {"success": True, "option_id": "short", "label": "A short summary"}]

            # 4. Cancel one running tool call: it fails "cancelled by the user", the job goes on.
            sim.script("m1", [read_call(f"{articles.url}/slow/page", "call-s"),
                              Reply("The page took too long; here is what I know.")])
            job = job_id_in((await call(client, "start_research", model="sim", query="q",
                                        method="agent", timeout=0))[1])
            await check_until(client, job, "tool_call_id 'call-s'", no_errors=True)
            await call(client, "answer_permission", job_id=job, tool_call_id="call-s",
                       decision="allow")
            await check_until(client, job, "call-s Read an article: in progress", no_errors=True)
            with trio.fail_after(10):
                # The list is filled by the web server's thread, not by a trio task.
                while "/slow/page" not in articles.hits:  # noqa: ASYNC110
                    await trio.sleep(0.02)
            error, text = await call(client, "cancel_research", job_id=job,
                                     tool_call_id="call-s")
            assert not error and "job goes on" in text, text
            done = await check_until(client, job, '"status": "completed"', no_errors=True)
            assert "here is what I know" in json.loads(done)["report"]
            assert tool_results(sim) == [{"success": False, "error": "cancelled by the user"}]
            error, text = await call(client, "cancel_research", job_id=job,
                                     tool_call_id="call-s")
            assert error and "waits for nothing" in text


async def test_text_previews_reach_an_attached_call_in_order(sim: Simulator, tmp_path: Path):
    answer = " ".join(f"sentence {n} of the report." for n in range(400))
    progress: list[str] = []

    async def on_progress(_done: float, _total: float | None, message: str | None) -> None:
        progress.append(message or "")

    sim.script("m1", [Slow(0.5, then=Reply(answer))])
    env = server_env(sim, tmp_path / "home")
    with (tmp_path / "stderr.log").open("w") as stderr:
        async with connect(env, stderr) as client:
            result = await client.call_tool(
                "start_research", {"model": "sim", "query": "q", "method": "agent",
                                   "timeout": 60}, progress_callback=on_progress)
    assert json.loads(result.content[0].text)["report"] == answer  # type: ignore[union-attr]
    previews = [p for p in progress if "writing the answer" in p]
    assert previews, progress
    counts = []
    for message in previews:
        chars = int(message.split("writing the answer (")[1].split(" ")[0])
        tail = message.split("…", 1)[1]
        assert answer[:chars].endswith(tail)  # each preview is the answer so far, in order
        counts.append(chars)
    assert counts == sorted(counts)
