"""`GET /health` of a real `serve --http` on a real PostgreSQL server that goes away and comes
back: 503 while the store does not answer, its reason in the log and not in the answer (anyone
who reaches the port may ask), 200 again once the database is back."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
import trio
from http_server import http_server
from postgres_server import PostgresServer, find_bindir

from ask_another.simulator import Simulator

pytestmark = pytest.mark.slow  # a PostgreSQL server of its own, and a server process


async def health_until(base: str, status: int, seconds: float = 60) -> httpx.Response:
    async with httpx.AsyncClient(timeout=30) as http:
        with trio.fail_after(seconds):
            while True:
                answer = await http.get(base + "/health")
                if answer.status_code == status:
                    return answer
                await trio.sleep(0.2)


async def test_health_is_503_while_the_database_is_down_and_keeps_its_details_in_the_log(
    sim: Simulator, tmp_path: Path
):
    bindir = find_bindir()
    assert bindir is not None
    database = PostgresServer.start(bindir)
    try:
        url = database.new_database().replace("postgres@", "postgres:s3cret-PW@")
        env = {"ASK_ANOTHER_HOME": str(tmp_path / "home"), "ASK_ANOTHER_DATABASE_URL": url,
               "MODEL_SIM": f"openai/m1;sk-test-HEALTH-1234;{sim.openai_base}"}
        async with http_server(env, tmp_path / "server.log", "--no-auth") as server:
            assert (await health_until(server.base, 200)).json() == {"status": "ok"}
            await trio.to_thread.run_sync(database._stop_server)
            down = await health_until(server.base, 503)
            await trio.to_thread.run_sync(database._start_server)
            back = await health_until(server.base, 200)
            log = server.log()
    finally:
        database.stop()
    assert down.json() == {"status": "unavailable",
                           "error": "the store does not answer; the server's log says why"}
    assert "127.0.0.1" not in down.text and "postgres" not in down.text
    assert back.json() == {"status": "ok"}
    assert "http.unhealthy" in log and "cannot reach the database" in log
    assert "http.healthy" in log and "s3cret-PW" not in log
