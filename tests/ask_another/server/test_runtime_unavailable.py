"""A runtime that cannot start (a database file that is not SQLite) leaves the server answering:
`initialize`, then every tool that needs the store fails with the store's own one-line reason."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from mcp import Client
from tool_results import call

from ask_another.config import Config
from ask_another.errors import FEEDBACK_POINTER
from ask_another.server import build_server


async def test_a_database_that_is_not_sqlite_is_the_answer_to_each_tool(
    make_config: Callable[..., Config], tmp_path: Path
):
    config = make_config()
    config.home.mkdir(parents=True)
    config.database_path.write_bytes(b"this is not a database, just some bytes" * 100)
    async with Client(build_server(config, prewarm_after=None)) as client:
        assert client.instructions
        error, text = await call(client, "list_models")
        assert error
        assert f"cannot open the database {config.database_path}" in text
        assert text.endswith(FEEDBACK_POINTER)
        # A tool that needs no store still works.
        error, _ = await call(client, "sequential_research_plan", topic="tides")
        assert not error
