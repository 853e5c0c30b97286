"""Conversations belong to the user who started them: another user can neither continue, discuss
in, consensus on nor read one; an admin can. Real actors, SQLite and the simulator."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest

from ask_another.config import Config
from ask_another.conversations import NoSuchConversation, conversation_name
from ask_another.runtime import Runtime, open_runtime
from ask_another.simulator import Simulator
from ask_another.store.conversations import get_conversation
from ask_another.users import User

ALICE = User("alice", admin=False)
BOB = User("bob", admin=False)
ADMIN = User("root", admin=True)


@pytest.fixture
async def runtime(make_config: Callable[..., Config], sim: Simulator) -> AsyncIterator[Runtime]:
    # Two models, for a consensus.
    config = make_config(MODEL_SIM2=f"openai/m2;sk-test-users;{sim.openai_base}")
    async with open_runtime(config, prewarm_after=0) as rt:
        yield rt


async def test_another_users_conversation_is_none_and_gets_nothing_sent_or_stored(
    runtime: Runtime, sim: Simulator
):
    alice, bob = runtime.conversations_for(ALICE), runtime.conversations_for(BOB)
    first = await alice.turn("sim", "alice's secret plan")
    cid = first.conversation_id
    await alice.turn("sim", "and its details", cid)  # her second turn wakes her actor
    db = await runtime.database()
    stored = await get_conversation(db, cid)
    assert stored is not None and stored.user_id == "alice"
    usage = await db.fetchall("SELECT user_id FROM usage")
    assert [r["user_id"] for r in usage] == ["alice", "alice"]
    calls = len(sim.requests)
    attempts = [
        bob.turn("sim", "what did alice say?", cid),  # her actor is live
        bob.discuss("http://example.test/a", "sim", cid),
        bob.get(cid),
        bob.messages(cid),
        runtime.consensus_for(BOB).ask(["sim", "sim2"], "and now?", conversation_id=cid),
    ]
    # One answer for another user's conversation and for none: "Forbidden" told that it exists.
    with pytest.raises(NoSuchConversation) as missing:
        await bob.get("c-0000000000")
    nothing = str(missing.value).replace("c-0000000000", cid)
    for attempt in attempts:
        with pytest.raises(NoSuchConversation) as refused:
            await attempt
        assert str(refused.value) == nothing
    assert len(sim.requests) == calls  # nothing reached the provider
    assert len(await alice.messages(cid)) == 4
    # From the store too, once her actor has stopped.
    ref = runtime.registry.whereis(conversation_name(cid))
    assert ref is not None
    await ref.stop()
    with pytest.raises(NoSuchConversation):
        await bob.turn("sim", "again?", cid)
    # An admin may take part; the conversation stays alice's, the call is the admin's.
    await runtime.conversations_for(ADMIN).turn("sim", "admin here", cid)
    stored = await get_conversation(db, cid)
    assert stored is not None and stored.user_id == "alice"
    usage = await db.fetchall("SELECT user_id FROM usage ORDER BY id")
    assert [r["user_id"] for r in usage] == ["alice", "alice", "root"]
    assert len(await alice.messages(cid)) == 6
