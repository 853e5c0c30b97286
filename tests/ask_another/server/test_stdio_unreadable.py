"""Requests the MCP SDK's stdio reader cannot parse (issue 16, item 8), sent as raw lines to the
real `python -m ask_another`: each gets a JSON-RPC parse error with its id, instead of no reply,
and the session goes on."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import trio
from pycache import PYCACHE
from stdio_server import REPO

from ask_another.simulator import Reply, Simulator


class RawSession:
    def __init__(self, process: trio.Process) -> None:
        self.process = process
        self.buffer = b""

    async def send(self, line: str) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send_all(line.encode() + b"\n")

    async def receive(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        while b"\n" not in self.buffer:
            chunk = await self.process.stdout.receive_some(65536)
            assert chunk, "the server closed stdout"
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        message: dict[str, Any] = json.loads(line)
        return message

    async def reply_to(self, request_id: int | str | None) -> dict[str, Any]:
        """The next reply with this id (None: an error reply with a null id)."""
        with trio.fail_after(30):
            while True:
                message = await self.receive()
                if "id" in message and message["id"] == request_id and (
                        request_id is not None or "error" in message):
                    return message


def call_line(request_id: int, arguments_json: str) -> str:
    return ('{"jsonrpc":"2.0","id":' + str(request_id) + ',"method":"tools/call",'
            '"params":{"name":"completion","arguments":' + arguments_json + '}}')


async def test_unparseable_requests_are_answered_with_a_parse_error(sim: Simulator,
                                                                    tmp_path: Path):
    env = {"ASK_ANOTHER_HOME": str(tmp_path / "home"), "PYTHONPYCACHEPREFIX": str(PYCACHE),
           "MODEL_SIM": f"openai/m1;sk-test-RAW-5e6f7a8b;{sim.openai_base}"}
    sim.script("m1", [Reply("still here")])
    with (tmp_path / "stderr.log").open("w") as stderr:
        process = await trio.lowlevel.open_process(
            [sys.executable, "-m", "ask_another"], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=stderr, env=env, cwd=REPO)
        session = RawSession(process)
        try:
            await session.send(json.dumps({
                "jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                           "clientInfo": {"name": "raw", "version": "0"}}}))
            assert "result" in await session.reply_to(1)
            await session.send('{"jsonrpc":"2.0","method":"notifications/initialized"}')
            # A lone surrogate, and a number of 5,000 digits.
            await session.send(call_line(2, '{"model":"sim","prompt":"\\ud800"}'))
            lone = await session.reply_to(2)
            await session.send(call_line(3, '{"model":"sim","prompt":"x","temperature":'
                                         + "9" * 5000 + "}"))
            huge = await session.reply_to(3)
            # A string id is answered with that id too.
            await session.send(call_line(4, '{"prompt":"\\udfff"}').replace('"id":4', '"id":"s4"'))
            by_string = await session.reply_to("s4")
            # Not JSON at all: JSON-RPC's parse error, with a null id.
            await session.send("this is not json")
            not_json = await session.reply_to(None)
            # JSON, but not a request: params must be an object.
            await session.send('{"jsonrpc":"2.0","id":6,"method":"tools/call","params":"x"}')
            malformed = await session.reply_to(6)
            # 1,000 nested arrays (2 kB): the SDK refuses it and Python's parser would recurse
            # past its limit (RecursionError ended the server); a parse error with a null id.
            await session.send(call_line(8, '{"model":"sim","prompt":"x","a":'
                                         + "[" * 1000 + "]" * 1000 + "}"))
            deep = await session.reply_to(None)
            # The session goes on.
            await session.send(call_line(7, '{"model":"sim","prompt":"hello"}'))
            fine = await session.reply_to(7)
        finally:
            process.kill()
            await process.wait()
    assert lone["error"]["code"] == -32700, lone
    assert "lone surrogate" in lone["error"]["message"], lone
    assert huge["error"]["code"] == -32700 and "4,300 digits" in huge["error"]["message"], huge
    assert by_string["error"]["code"] == -32700, by_string
    assert not_json["error"]["code"] == -32700 and not_json["id"] is None, not_json
    assert malformed["error"]["code"] == -32600, malformed
    assert deep["error"]["code"] == -32700 and "nest" in deep["error"]["message"], deep
    assert "still here" in json.dumps(fine["result"]), fine
    assert "stdio.unreadable_request" in (tmp_path / "stderr.log").read_text()


def test_lines_the_sdk_reads_and_lines_owed_no_reply_are_passed_through() -> None:
    from ask_another.server.stdio import AnsweringStdin

    assert AnsweringStdin.answer_for('{"jsonrpc":"2.0","id":1,"method":"ping"}') is None
    # A notification is never answered, nor a response from the client.
    assert AnsweringStdin.answer_for('{"jsonrpc":"2.0","method":"x","params":"\\ud800"}') is None
    assert AnsweringStdin.answer_for('{"jsonrpc":"2.0","id":3,"result":"\\ud800"}') is None


def test_a_request_whose_id_cannot_be_read_is_answered_with_a_null_id() -> None:
    from ask_another.server.stdio import AnsweringStdin

    for line in ("not json at all", "[1, 2]", "42"):
        answer = AnsweringStdin.answer_for(line)
        assert answer is not None and answer.id is None, line
    assert AnsweringStdin.answer_for("not json").error.code == -32700  # type: ignore[union-attr]
    assert AnsweringStdin.answer_for("[1]").error.code == -32600  # type: ignore[union-attr]
    # Deeper than Python's own parser can go: answered, not raised.
    deep = AnsweringStdin.answer_for('{"jsonrpc":"2.0","id":9,"method":"x","params":{"a":'
                                     + "[" * 100_000 + "]" * 100_000 + "}}")
    assert deep is not None and deep.id is None and deep.error.code == -32700
