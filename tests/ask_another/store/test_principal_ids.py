"""Migration 8 on both backends: rows made under a user's name move to the `name:NAME` principal
id (users.py), which only the tokens-file entry written before ids (no `id`) still is; a user
added under that name later, and an issuer's user whose claim is that name, are other users."""

from __future__ import annotations

import json
from pathlib import Path

from ask_another.config import DatabaseUrl
from ask_another.server.auth import TokensFile
from ask_another.store import MIGRATIONS, open_database
from ask_another.store.jobs import job_store
from ask_another.store.usage import spent_since
from ask_another.users import User


async def test_migration_8_moves_named_rows_to_the_principal_of_their_name(
        store_target: Path | DatabaseUrl, tmp_path: Path):
    async with open_database(store_target, MIGRATIONS[:7]) as db:
        for job_id, user in (("r-carol", "carol"), ("r-local", None)):
            await db.execute(
                "INSERT INTO research_jobs (id, model, query, method, status, created_at, "
                "user_id) VALUES (?, 'm', 'q', 'provider', 'completed', 1, ?)", (job_id, user))
        await db.execute("INSERT INTO conversations (id, model, created_at, updated_at, user_id) "
                         "VALUES ('c-carol', 'm', 1, 1, 'carol')")
        await db.execute("INSERT INTO feedback (created_at, issue, user_id) VALUES "
                         "('2026-01-01', 'hi', 'carol')")
        await db.execute("INSERT INTO usage (at, kind, model, cost_usd, user_id) VALUES "
                         "(1, 'completion', 'm', 0.5, 'carol')")
    async with open_database(store_target) as db:
        assert await db.schema_version() == len(MIGRATIONS) >= 8
        for table in ("research_jobs", "conversations", "feedback", "usage"):
            rows = await db.fetchall(f"SELECT user_id FROM {table} WHERE user_id IS NOT NULL")
            assert [r["user_id"] for r in rows] == ["name:carol"], table
        local = await db.fetchone("SELECT user_id FROM research_jobs WHERE id = 'r-local'")
        assert local is not None and local["user_id"] is None  # the local user's stay NULL
        assert (await spent_since(db, 0, "name:carol")).calls == 1
        assert await spent_since(db, 0, "carol") == await spent_since(db, 0, "nobody")

    # A tokens file written before ids: its carol is still the user of those rows; once removed,
    # a carol added again is someone else, and so never the old rows' user.
    path = tmp_path / "tokens.json"
    path.write_text(json.dumps({"version": 1, "users": {"carol": {
        "sha256": "0" * 64, "admin": False, "created": "2026-01-01T00:00:00+00:00"}}}))
    tokens = TokensFile(path)
    assert [u.principal for u in tokens.users()] == ["name:carol"]
    tokens.remove("carol")
    tokens.add("carol")
    (again,) = tokens.users()
    assert again.principal.startswith("token:carol:") and again.principal != "name:carol"
    assert "name:carol" in json.loads(path.read_text())["removed"]
    async with open_database(store_target) as db:
        jobs = job_store(db)
        assert [r.id for r in await jobs.recent(user=User("name:carol", False))] == ["r-carol"]
        assert await jobs.recent(user=User(again.principal, False)) == []
