"""read_article, discuss and conversations through completion, with an in-memory `mcp.Client`."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable

import pytest
import trio
from conversation_pages import ARTICLE_FACT, tool_messages
from loopback_pages import Page, PageServer
from mcp import Client
from tool_results import call

from ask_another.config import Config
from ask_another.conversations import DISCUSS_PROMPT
from ask_another.errors import FEEDBACK_POINTER
from ask_another.server import build_server
from ask_another.simulator import Reply, Simulator, Slow


def conversation_id_of(text: str) -> str:
    last = text.rstrip().splitlines()[-1]
    assert last.startswith("conversation_id: c-"), text
    return last.split(": ", 1)[1]


@pytest.fixture
def config(make_config: Callable[..., Config], pages: PageServer, sim: Simulator) -> Config:
    return make_config(ASK_ANOTHER_ALLOW_HOSTS=pages.hostport,
                       MODEL_OTHER=f"openai/m2;k;{sim.openai_base}")


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_the_tools_are_listed_with_their_annotations(config: Config, mode: str):
    async with Client(build_server(config, prewarm_after=None), mode=mode) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        for name in ("read_article", "discuss"):
            annotations = tools[name].annotations
            assert annotations is not None
            assert annotations.read_only_hint is True and annotations.open_world_hint is True
        assert tools["read_article"].input_schema["required"] == ["url"]
        assert tools["discuss"].input_schema["required"] == ["url", "model"]
        assert set(tools["discuss"].input_schema["properties"]) == {
            "url", "model", "conversation_id", "prompt"}
        assert "conversation_id" in tools["completion"].input_schema["properties"]
        assert "discuss(url, model)" in (client.instructions or "")


async def test_read_article_returns_the_functions_json(config: Config, pages: PageServer):
    pages.add("/doc.pdf", Page(b"%PDF-1.7", content_type="application/pdf"))
    async with Client(build_server(config, prewarm_after=None)) as client:
        error, text = await call(client, "read_article", url=f"http://{pages.hostport}/ledger")
        article = json.loads(text)
        assert not error
        assert article["success"] is True and article["type"] == "article_content"
        assert article["url"] == f"http://{pages.hostport}/ledger"
        assert ARTICLE_FACT in article["content"] and article["truncated"] is False
        assert "Cookie settings" not in article["content"]
        # Failures are results with success false, for the client to read.
        for url, reason in [(f"http://{pages.hostport}/gone", "404"),
                            (f"http://{pages.hostport}/doc.pdf", "application/pdf"),
                            ("http://127.0.0.1:9/private", "")]:
            error, text = await call(client, "read_article", url=url)
            failure = json.loads(text)
            assert not error and failure["success"] is False
            assert failure["error"].startswith(f"Could not fetch article content from {url}")
            assert reason in failure["error"]
        error, text = await call(client, "read_article", url="  ")
        assert json.loads(text) == {"success": False, "error": "No URL provided"}


async def test_discuss_then_follow_ups_keep_the_article_in_context(
    config: Config, sim: Simulator, pages: PageServer
):
    url = f"http://{pages.hostport}/ledger"
    async with Client(build_server(config, prewarm_after=None)) as client:
        error, text = await call(client, "discuss", url=url, model="sim")
        assert not error, text
        conversation = conversation_id_of(text)
        first = sim.requests_for("m1")[-1].messages
        assert first[-1] == {"role": "user", "content": DISCUSS_PROMPT}
        assert ARTICLE_FACT not in json.dumps([m for m in first if m["role"] == "user"])
        for question in ("Who kept the ledger?", "How many ships?"):
            error, text = await call(client, "completion", model="sim", prompt=question,
                                     conversation_id=conversation)
            assert not error, text
            assert conversation_id_of(text) == conversation
        sent = sim.requests_for("m1")[-1].messages
        assert [m["role"] for m in sent] == ["assistant", "tool", "user", "assistant", "user",
                                             "assistant", "user"]
        (tool,) = tool_messages(sent)
        assert tool["tool_call_id"] == sent[0]["tool_calls"][0]["id"]
        assert ARTICLE_FACT in json.loads(tool["content"])["content"]


async def test_conversation_errors_are_tool_errors_a_person_can_act_on(
    config: Config, sim: Simulator, pages: PageServer
):
    async with Client(build_server(config, prewarm_after=None)) as client:
        error, text = await call(client, "completion", model="sim", prompt="hi",
                                 conversation_id="c-unknown")
        assert error and "No conversation has the id 'c-unknown'" in text
        assert FEEDBACK_POINTER not in text
        error, text = await call(client, "completion", model="sim", prompt="hi")
        conversation = conversation_id_of(text)
        error, text = await call(client, "completion", model="other", prompt="hi",
                                 conversation_id=conversation)
        assert error and f"Conversation {conversation} is with openai/m1, not openai/m2" in text
        error, text = await call(client, "discuss", url=f"http://{pages.hostport}/gone",
                                 model="sim", conversation_id=conversation)
        assert error and "Could not fetch article content from" in text
        assert "Nothing was sent to the model or stored" in text
        error, text = await call(client, "discuss", url="", model="sim")
        assert error and "No URL provided" in text

        sim.script("m1", [Slow(1.0, then=Reply("done"))])
        async with trio.open_nursery() as nursery:
            nursery.start_soon(functools.partial(
                call, client, "completion", model="sim", prompt="slow",
                conversation_id=conversation))
            with trio.fail_after(5):
                while len(sim.requests_for("m1")) < 2:  # noqa: ASYNC110 - another thread's state
                    await trio.sleep(0.01)
            error, text = await call(client, "completion", model="sim", prompt="again",
                                     conversation_id=conversation)
            assert error and f"Conversation {conversation} is busy" in text
