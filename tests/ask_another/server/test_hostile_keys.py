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
from key_needles import LONG_KEY, SHORT_KEY, leaks
from pycache import PYCACHE
from stdio_server import REPO, stdio_client_for
from tool_results import call, text_of

from ask_another.simulator import Fail, Reply, Simulator

pytestmark = pytest.mark.slow  # starts real server processes

def env_for(sim: Simulator, home: Path) -> dict[str, str]:
    return {
        "ASK_ANOTHER_HOME": str(home),
        "ASK_ANOTHER_LOG_LEVEL": "DEBUG",
        "MODEL_LONG": f"openai/m1;{LONG_KEY};{sim.openai_base}",
        "MODEL_SHORT": f"openai/m2;{SHORT_KEY};{sim.openai_base}",
        "MODEL_DR": f"perplexity/sonar-deep-research;{SHORT_KEY};{sim.openai_base}",
        "ASK_ANOTHER_POLL_SECONDS": "0.05",
    }


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
    # "e" could start a fragment of the key (its "e7"), or of the key reversed: held.
    assert scrubber.feed("SECRET1234-a9c8e7 done") == "******** don"
    assert scrubber.feed(" sk-") == "e "
    assert scrubber.feed("not it") == "sk-not it"
    assert scrubber.flush() == ""
    # A fragment of 12 characters is masked whole, however the chunks cut it.
    scrubber = StreamScrubber([LONG_KEY])
    streamed = "".join(scrubber.feed(c) for c in f"a {LONG_KEY[3:15]} b {LONG_KEY[::-1]} c")
    assert streamed + scrubber.flush() == "a ******** b ******** c"


def encoded_forms(key: str) -> dict[str, str]:
    """The forms of `key` a provider's text carried out (issue 30): each must be masked."""
    forms = {}
    for name, data in (("base64", key.encode()), ("base64 of Bearer", f"Bearer {key}".encode())):
        forms[name] = base64.b64encode(data).decode()
        forms[name + "url"] = base64.urlsafe_b64encode(data).decode()
    return {"first half": key[:12], "second half": key[12:], "reversed": key[::-1], **forms}


def form_leaks(text: str | bytes) -> list[str]:
    data = text.encode() if isinstance(text, str) else text
    # 16 characters of a form from its start: its encoded core whatever the padding.
    return [name for name, form in encoded_forms(LONG_KEY).items()
            if form[:12].encode() in data or form[-12:].rstrip("=").encode() in data]


def test_the_forms_the_test_looks_for_are_the_forms_sent() -> None:
    assert form_leaks(" ".join(encoded_forms(LONG_KEY).values())) == list(encoded_forms(LONG_KEY))


async def test_a_key_encoded_split_or_reversed_is_masked_in_results_and_the_log(
        sim: Simulator, tmp_path: Path):
    # Provider text carried base64(key), base64("Bearer key"), their url-safe forms, and the
    # key split in two or reversed, into the tool result and the server's log.
    home, stderr_path = tmp_path / "home", tmp_path / "stderr.log"
    carried = " | ".join(f"{name}: {form}" for name, form in encoded_forms(LONG_KEY).items())
    with stderr_path.open("w") as stderr:
        async with stdio_client_for(env_for(sim, home), stderr) as client:
            sim.script("m1", [Fail(400, f"Bad request; we saw {carried}"), Reply(carried)])
            error, refused = await call(client, "completion", model="long", prompt="hi")
            assert error and "The provider refused the request" in refused, refused
            error, answered = await call(client, "completion", model="long", prompt="again")
            assert not error, answered
    assert "********" in refused and "********" in answered
    assert not form_leaks(refused), (form_leaks(refused), refused)
    assert not form_leaks(answered), (form_leaks(answered), answered)
    log = stderr_path.read_text()
    assert not form_leaks(log), form_leaks(log)
    for path in (path for path in home.rglob("*") if path.is_file()):
        assert not form_leaks(path.read_bytes()), (path.name, form_leaks(path.read_bytes()))


def test_the_ask_command_masks_a_key_in_any_form(sim: Simulator, tmp_path: Path):
    carried = " ".join(encoded_forms(LONG_KEY).values())
    sim.script("m1", [Fail(401, f"Unauthorized: {carried}")])
    env = {**os.environ, **env_for(sim, tmp_path / "home"), "PYTHONPYCACHEPREFIX": str(PYCACHE)}
    done = subprocess.run([sys.executable, "-m", "ask_another", "ask", "long", "hello"],
                          env=env, cwd=REPO, capture_output=True, timeout=120)
    assert done.returncode != 0 and b"********" in done.stderr, done.stderr
    assert not form_leaks(done.stdout + done.stderr), (form_leaks(done.stderr), done.stderr)


def test_the_log_masks_encoded_keys_on_its_own() -> None:
    # A line that never passed through a provider's scrubbing (a library's debug line).
    import io

    from ask_another.logs import configure_logging, get_logger, register_secrets

    register_secrets([LONG_KEY])
    out = io.StringIO()
    configure_logging("INFO", stream=out)
    try:
        get_logger("test").warning("headers", sent=encoded_forms(LONG_KEY)["base64 of Bearer"])
    finally:
        configure_logging("INFO")
    assert "********" in out.getvalue() and not form_leaks(out.getvalue()), out.getvalue()
