"""Standing permission rules (store/rules.py) on both backends: one per user, tool and scope,
replaced by a later answer, the local user's kept apart from every named user's, revocable; a
rule from before rules were scoped keeps covering every call of its tool."""

from __future__ import annotations

from pathlib import Path

import psycopg

from ask_another.config import Config, DatabaseUrl
from ask_another.policy import ANY_SCOPE
from ask_another.store import MIGRATIONS, open_database
from ask_another.store.rules import remove_rule, rules_of, set_rule

HOST = "host:docs.example.com"


async def test_a_standing_rule_is_per_user_tool_and_scope_replaced_and_revoked(
        store_target: Path | DatabaseUrl):
    async with open_database(store_target) as db:
        await set_rule(db, "token:alice:1", "read_article", "allow", HOST, "console")
        await set_rule(db, None, "read_article", "deny", HOST, "console")
        await set_rule(db, "token:alice:1", "read_article", "deny", HOST, "console")  # changed
        await set_rule(db, "token:alice:1", "read_article", "allow", "host:other.example",
                       "console")
        await set_rule(db, "token:alice:1", "search_web", "allow", "engine:configured",
                       "console")
        assert [(r.tool, r.scope, r.rule, r.face) for r in await rules_of(db, "token:alice:1")
                ] == [("read_article", HOST, "deny", "console"),
                      ("read_article", "host:other.example", "allow", "console"),
                      ("search_web", "engine:configured", "allow", "console")]
        assert [(r.tool, r.rule) for r in await rules_of(db, None)] == [("read_article", "deny")]
        assert (await rules_of(db, None))[0].covers == "reads of docs.example.com"
        assert await rules_of(db, "token:bob:2") == []
        assert await remove_rule(db, "token:alice:1", "read_article", HOST)
        assert not await remove_rule(db, "token:alice:1", "read_article", HOST)
        assert [r.scope for r in await rules_of(db, "token:alice:1")] == [
            "host:other.example", "engine:configured"]
        assert [r.tool for r in await rules_of(db, None)] == ["read_article"]


async def test_a_rule_made_before_scopes_covers_every_call_of_its_tool(
        postgres_url: str):
    """Migration 14 on PostgreSQL (SQLite runs the same statements): a rule of the old table
    comes across with the scope '*'."""
    before = [m for m in MIGRATIONS if m.version < 12]
    target = Config.from_env({"ASK_ANOTHER_DATABASE_URL": postgres_url}).database_url
    assert target is not None
    async with open_database(target, before):
        pass
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("INSERT INTO permission_rules (principal, tool, rule, created_at) "
                     "VALUES ('token:alice:1', 'read_article', 'allow', 5.0)")
    async with open_database(target) as db:
        (rule,) = await rules_of(db, "token:alice:1")
        assert (rule.tool, rule.scope, rule.rule, rule.face) == (
            "read_article", ANY_SCOPE, "allow", None)
        assert rule.covers == "every call (a rule made before rules were scoped)"
