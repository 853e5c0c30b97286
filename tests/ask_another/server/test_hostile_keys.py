"""Keys a provider sends back, through the real stdio server (issue 16, items 3-5): a key cut in
two by the message limit, a key shorter than 8 characters, and a key echoed in a successful
answer (plainly and in base64). None reaches a tool result, a progress message, stderr, the
SQLite files or the `ask` CLI."""

from __future__ import annotations

import base64
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from stdio_server import PYCACHE, REPO, stdio_client_for
from tool_results import call, text_of

from ask_another.simulator import Fail, Reply, Simulator

pytestmark = pytest.mark.slow  # starts real server processes

LONG_KEY = "sk-VERYSECRET1234-a9c8e7"
SHORT_KEY = "sk-1234"  # litellm proxy's documented example key


def env_for(sim: Simulator, home: Path) -> dict[str, str]:
    return {
        "ASK_ANOTHER_HOME": str(home),
        "ASK_ANOTHER_LOG_LEVEL": "DEBUG",
        "MODEL_LONG": f"openai/m1;{LONG_KEY};{sim.openai_base}",
        "MODEL_SHORT": f"openai/m2;{SHORT_KEY};{sim.openai_base}",
        "MODEL_DR": f"perplexity/sonar-deep-research;{SHORT_KEY};{sim.openai_base}",
        "ASK_ANOTHER_POLL_SECONDS": "0.05",
    }


def leaks(text: str | bytes) -> list[str]:
    data = text.encode() if isinstance(text, str) else text
    found = []
    if LONG_KEY[:10].encode() in data:  # any 10 characters from the start: a cut prefix too
        found.append("long key (or its first 10 characters)")
    if LONG_KEY[6:].encode() in data:
        found.append("long key's tail")
    if base64.b64encode(LONG_KEY.encode())[:16] in data:
        found.append("long key in base64")
    found.extend(f"short key followed by {edge!r}"
                 for edge in (b" ", b".", b"'", b'"', b":", b"\n")
                 if SHORT_KEY.encode() + edge in data)
    return found


def assert_nothing_stored_leaks(home: Path, stderr_path: Path) -> None:
    log = stderr_path.read_text()
    assert "completion.finished" in log or "gateway.call_failed" in log
    assert not leaks(log), leaks(log)
    # The database, its WAL and shared-memory files; the shared gateway worker's log.
    for path in (path for path in home.rglob("*") if path.is_file()):
        assert not leaks(path.read_bytes()), (path.name, leaks(path.read_bytes()))


async def test_a_key_cut_in_two_by_the_message_limit_leaks_no_prefix(sim: Simulator,
                                                                       tmp_path: Path):
    home, stderr_path = tmp_path / "home", tmp_path / "stderr.log"
    with stderr_path.open("w") as stderr:
        async with stdio_client_for(env_for(sim, home), stderr) as client:
            # The key straddles the 2,000-character cut at one of these three paddings at
            # least, whatever litellm puts in front of the provider's text.
            for pad in (0, 11, 23):
                sim.script("m1", [Fail(400, ("x" * pad) + f"Bearer {LONG_KEY} " * 80)])
                error, text = await call(client, "completion", model="long", prompt="hi")
                assert error and "The provider refused the request" in text, text
                assert not leaks(text), (pad, leaks(text), text[-200:])
    assert sim.requests_for("m1")[0].api_key == LONG_KEY
    assert_nothing_stored_leaks(home, stderr_path)


async def test_a_key_under_8_characters_is_masked_where_it_stands_as_a_token(
        sim: Simulator, tmp_path: Path):
    home, stderr_path = tmp_path / "home", tmp_path / "stderr.log"
    with stderr_path.open("w") as stderr:
        async with stdio_client_for(env_for(sim, home), stderr) as client:
            sim.script("m2", [Fail(401, f"Incorrect API key provided: {SHORT_KEY}. See docs.")])
            error, text = await call(client, "completion", model="short", prompt="hi")
            assert error and "Incorrect API key provided: ********." in text, text
            # ... and in a research job's error, shown and stored.
            sim.script("sonar-deep-research",
                       [Fail(401, f"Incorrect API key provided: {SHORT_KEY}")])
            error, research = await call(client, "start_research", model="dr", query="Q?",
                                         timeout=30)
            assert error and "failed" in research, research
    assert sim.requests_for("m2")[0].api_key == SHORT_KEY
    assert not leaks(text) and not leaks(research), (text, research)
    with sqlite3.connect(home / "ask-another.sqlite3") as db:
        (stored_error,) = db.execute("SELECT error FROM research_jobs").fetchone()
    assert "********" in stored_error and not leaks(stored_error), stored_error
    assert_nothing_stored_leaks(home, stderr_path)


async def test_an_answer_echoing_the_key_is_scrubbed_before_shown_or_stored(sim: Simulator,
                                                                             tmp_path: Path):
    home, stderr_path = tmp_path / "home", tmp_path / "stderr.log"
    progress: list[str] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append(message or "")

    b64 = base64.b64encode(LONG_KEY.encode()).decode()
    echo = f"Your key is {LONG_KEY}; encoded: {b64} (and {SHORT_KEY})."
    with stderr_path.open("w") as stderr:
        async with stdio_client_for(env_for(sim, home), stderr) as client:
            sim.script("m1", [Reply(echo), Reply(echo)])
            # Streamed (a progress token makes the server stream) and not.
            result = await client.call_tool("completion", {"model": "long", "prompt": "key?"},
                                            progress_callback=on_progress)
            streamed = text_of(result)
            assert not result.is_error and streamed.startswith(
                "Your key is ********; encoded: ********"), streamed
            error, text = await call(client, "completion", model="long", prompt="again",
                                     conversation_id=streamed.rsplit(": ", 1)[-1])
            assert not error and text.startswith("Your key is ********"), text
    assert progress, "the answer was streamed as progress"
    for output in (streamed, text, "\n".join(progress)):
        assert not leaks(output), (leaks(output), output)
    # The stored conversation holds the scrubbed answer: the second turn replayed it.
    replayed = str(sim.requests_for("m1")[-1].messages)
    assert "Your key is ********" in replayed and not leaks(replayed), replayed
    assert_nothing_stored_leaks(home, stderr_path)


def test_the_ask_command_masks_a_short_key(sim: Simulator, tmp_path: Path):
    sim.script("m2", [Fail(401, f"Incorrect API key provided: {SHORT_KEY}.")])
    env = {**os.environ, **env_for(sim, tmp_path / "home"), "PYTHONPYCACHEPREFIX": str(PYCACHE)}
    done = subprocess.run([sys.executable, "-m", "ask_another", "ask", "short", "hello"],
                          env=env, cwd=REPO, capture_output=True, timeout=120)
    assert done.returncode != 0
    assert b"********" in done.stdout + done.stderr
    assert not leaks(done.stdout) and not leaks(done.stderr), (done.stdout, done.stderr)


def test_the_stream_scrubber_holds_back_only_what_could_be_a_key() -> None:
    from ask_another.logs import StreamScrubber

    scrubber = StreamScrubber([LONG_KEY])
    assert scrubber.feed("plain words ") == "plain words "
    assert scrubber.feed("then sk-VERY") == "then "  # could be the key: held
    assert scrubber.feed("SECRET1234-a9c8e7 done") == "******** done"
    assert scrubber.feed(" sk-") == " "
    assert scrubber.feed("not it") == "sk-not it"
    assert scrubber.flush() == ""
