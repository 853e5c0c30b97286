"""Standing permission rules (store/rules.py) on both backends: one per user and tool, replaced
by a later answer, the local user's kept apart from every named user's, revocable."""

from __future__ import annotations

from pathlib import Path

from ask_another.config import DatabaseUrl
from ask_another.store import open_database
from ask_another.store.rules import remove_rule, rules_of, set_rule


async def test_a_standing_rule_is_per_user_and_tool_replaced_and_revoked(
        store_target: Path | DatabaseUrl):
    async with open_database(store_target) as db:
        await set_rule(db, "token:alice:1", "read_article", "allow")
        await set_rule(db, None, "read_article", "deny")
        await set_rule(db, "token:alice:1", "read_article", "deny")  # changed her mind
        await set_rule(db, "token:alice:1", "search_web", "allow")
        assert [(r.tool, r.rule) for r in await rules_of(db, "token:alice:1")] == [
            ("read_article", "deny"), ("search_web", "allow")]
        assert [(r.tool, r.rule) for r in await rules_of(db, None)] == [("read_article", "deny")]
        assert await rules_of(db, "token:bob:2") == []
        assert await remove_rule(db, "token:alice:1", "read_article")
        assert not await remove_rule(db, "token:alice:1", "read_article")
        assert [r.tool for r in await rules_of(db, "token:alice:1")] == ["search_web"]
        assert [r.tool for r in await rules_of(db, None)] == ["read_article"]
