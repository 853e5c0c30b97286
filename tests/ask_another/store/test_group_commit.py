"""Group commit on the writing connection, against a real SQLite file: writes queued while a
batch runs share the next worker-thread hop, each still its own transaction; a failing write
fails only its caller; cancelling a queued write withdraws it; cancelling a caller whose batch
has started never loses the other callers' writes nor leaves the connection mid-transaction."""

from __future__ import annotations

import random
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path

import trio

from ask_another.errors import StoreError
from ask_another.store import Database, add_feedback, open_database


def _insert(issue: str) -> Callable[[sqlite3.Connection], int]:
    def go(conn: sqlite3.Connection) -> int:
        with conn:
            cursor = conn.execute(
                "INSERT INTO feedback (created_at, issue) VALUES ('t', ?)", (issue,))
            return cursor.lastrowid or 0
    return go


def _blocking_insert(issue: str, entered: threading.Event,
                     release: threading.Event) -> Callable[[sqlite3.Connection], int]:
    """A write that holds its batch (in the worker thread) until `release` is set."""
    def go(conn: sqlite3.Connection) -> int:
        with conn:
            cursor = conn.execute(
                "INSERT INTO feedback (created_at, issue) VALUES ('t', ?)", (issue,))
            entered.set()
            release.wait(10)
            return cursor.lastrowid or 0
    return go


async def _rows(db: Database) -> dict[int, str]:
    return {r["id"]: r["issue"] for r in await db.fetchall("SELECT id, issue FROM feedback")}


async def _issues(db: Database) -> set[str]:
    return set((await _rows(db)).values())


async def _until_queued(db: Database, n: int, exactly: bool = False) -> None:
    """Wait until `n` writes (at least, or `exactly`) wait for their batch."""
    with trio.fail_after(5):
        # Polling: the queue has no event to wait on, and this is a test's view from outside.
        while (db.queued != n) if exactly else (db.queued < n):  # noqa: ASYNC110
            await trio.sleep(0.001)


async def _not_in_transaction(db: Database) -> bool:
    return not await db.run(lambda conn: conn.in_transaction)


async def test_concurrent_writers_all_commit_in_far_fewer_thread_hops(tmp_path: Path):
    async with open_database(tmp_path / "db.sqlite3") as db:
        before_batches, before_writes = db.batches, db.writes
        ids: dict[int, int] = {}

        async def one(n: int) -> None:
            ids[n] = await db.insert(
                "INSERT INTO feedback (created_at, issue) VALUES ('t', ?) RETURNING id",
                (f"issue {n}",))

        async with trio.open_nursery() as nursery:
            for n in range(300):
                nursery.start_soon(one, n)
        rows = await _rows(db)
        assert sorted(rows.values()) == sorted(f"issue {n}" for n in range(300))
        assert all(rows[ids[n]] == f"issue {n}" for n in range(300))  # each its own row id
        assert db.writes - before_writes == 300
        # Grouped: 300 writes arriving at once cannot each have had their own hop.
        assert db.batches - before_batches < 100


async def test_a_failing_write_in_a_batch_fails_only_its_own_caller(tmp_path: Path):
    async with open_database(tmp_path / "db.sqlite3") as db:
        entered, release = threading.Event(), threading.Event()
        results: dict[str, object] = {}

        async def write(name: str, fn: Callable[[sqlite3.Connection], object]) -> None:
            try:
                results[name] = await db.run(fn)
            except Exception as exc:
                results[name] = exc

        def bad_sql(conn: sqlite3.Connection) -> None:
            with conn:
                conn.execute("INSERT INTO feedback (created_at, issue) VALUES ('t', 'half')")
                conn.execute("INSERT INTO no_such_table VALUES (1)")

        def forgets_commit(conn: sqlite3.Connection) -> None:
            conn.execute("INSERT INTO feedback (created_at, issue) VALUES ('t', 'uncommitted')")

        def buggy(conn: sqlite3.Connection) -> None:
            conn.execute("INSERT INTO feedback (created_at, issue) VALUES ('t', 'buggy')")
            raise ValueError("a bug in the caller")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(write, "holder", _blocking_insert("holder", entered, release))
            await trio.to_thread.run_sync(entered.wait, 5)
            # These queue behind the running batch and all run together in the next one.
            for name, fn in [("before", _insert("before")), ("bad", bad_sql),
                             ("open", forgets_commit), ("buggy", buggy),
                             ("after", _insert("after"))]:
                nursery.start_soon(write, name, fn)
            await _until_queued(db, 5)
            batches = db.batches
            release.set()
        assert db.batches == batches + 2  # the holder's batch, then the five together

        assert isinstance(results["bad"], StoreError)
        assert "no such table" in str(results["bad"])
        assert isinstance(results["open"], StoreError)
        assert "left its transaction open" in str(results["open"])
        assert isinstance(results["buggy"], ValueError)  # as raised, to its own caller only
        assert all(isinstance(results[n], int) for n in ("holder", "before", "after"))
        # Only the good writes are stored: nothing half-done, nothing left uncommitted.
        assert await _issues(db) == {"holder", "before", "after"}
        assert await _not_in_transaction(db)


async def test_a_write_cancelled_while_queued_never_runs(tmp_path: Path):
    async with open_database(tmp_path / "db.sqlite3") as db:
        entered, release = threading.Event(), threading.Event()
        for victim in (0, 1):  # the first queued (who would run the next batch), then another
            entered.clear()
            release.clear()
            scope = trio.CancelScope()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(db.run, _blocking_insert(f"holder {victim}", entered,
                                                            release))
                await trio.to_thread.run_sync(entered.wait, 5)
                for n in range(3):
                    if n == victim:
                        nursery.start_soon(_run_in, scope, db, _insert(f"withdrawn {victim}"))
                    else:
                        nursery.start_soon(db.run, _insert(f"queued {victim}.{n}"))
                    await _until_queued(db, n + 1)
                scope.cancel()
                await _until_queued(db, 2, exactly=True)
                release.set()
            assert scope.cancelled_caught
        assert await _issues(db) == {"holder 0", "queued 0.1", "queued 0.2",
                                     "holder 1", "queued 1.0", "queued 1.2"}
        assert await _not_in_transaction(db)


async def test_random_cancellations_never_lose_nor_invent_a_write(tmp_path: Path):
    # Cancellations landing at every moment (queued, asked to run the next batch, running):
    # a caller that got its result has its row stored; one cancelled without it has none.
    def slow_insert(issue: str) -> Callable[[sqlite3.Connection], int]:
        def go(conn: sqlite3.Connection) -> int:
            time.sleep(0.0003)  # batches take a while, so cancels land inside them too
            return _insert(issue)(conn)
        return go

    for seed in range(3):
        rng = random.Random(seed)
        async with open_database(tmp_path / f"db{seed}.sqlite3") as db:
            delivered: set[str] = set()
            withdrawn: set[str] = set()

            async def one(name: str, start: float, patience: float, db: Database = db,
                          delivered: set[str] = delivered, withdrawn: set[str] = withdrawn
                          ) -> None:
                await trio.sleep(start)
                with trio.move_on_after(patience):
                    await db.run(slow_insert(name))
                    delivered.add(name)  # no checkpoint between the result and this
                if name not in delivered:
                    withdrawn.add(name)

            with trio.fail_after(30):  # a stranded queue would hang here
                async with trio.open_nursery() as nursery:
                    for n in range(400):
                        nursery.start_soon(one, f"w{n}", rng.random() * 0.1,
                                           rng.random() * 0.05)
            assert len(delivered | withdrawn) == 400
            assert delivered and withdrawn  # both cases happened
            assert await _issues(db) == delivered
            assert await _not_in_transaction(db)
            assert db.queued == 0


async def _run_in(scope: trio.CancelScope, db: Database,
                  fn: Callable[[sqlite3.Connection], object]) -> None:
    with scope:
        await db.run(fn)


async def test_cancelling_callers_whose_batch_runs_loses_no_write(tmp_path: Path):
    async with open_database(tmp_path / "db.sqlite3") as db:
        entered, release = threading.Event(), threading.Event()
        entered2, release2 = threading.Event(), threading.Event()
        got: dict[str, object] = {}

        async def write(name: str, scope: trio.CancelScope,
                        fn: Callable[[sqlite3.Connection], int]) -> None:
            with scope:
                got[name] = await db.run(fn)  # the result arrives even when cancelled
                await trio.lowlevel.checkpoint()  # ...and the cancellation right after
                got[name + " not cancelled"] = True

        leader, second_leader, follower = trio.CancelScope(), trio.CancelScope(), \
            trio.CancelScope()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(write, "first", leader,
                               _blocking_insert("first", entered, release))
            await trio.to_thread.run_sync(entered.wait, 5)
            nursery.start_soon(write, "second", second_leader,
                               _blocking_insert("second", entered2, release2))
            await _until_queued(db, 1)
            nursery.start_soon(write, "third", follower, _insert("third"))
            await _until_queued(db, 2)
            leader.cancel()  # its batch is running: the write completes anyway
            release.set()
            await trio.to_thread.run_sync(entered2.wait, 5)  # batch two: second + third
            second_leader.cancel()
            follower.cancel()
            release2.set()
        assert set(got) == {"first", "second", "third"}  # every result delivered, then cancelled
        assert all(isinstance(v, int) for v in got.values())
        assert await _issues(db) == {"first", "second", "third"}
        assert await _not_in_transaction(db)


async def test_close_runs_the_queued_writes_first_and_refuses_later_ones(tmp_path: Path):
    path = tmp_path / "db.sqlite3"
    async with open_database(path) as db:
        entered, release = threading.Event(), threading.Event()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(db.run, _blocking_insert("holder", entered, release))
            await trio.to_thread.run_sync(entered.wait, 5)
            for n in range(5):
                nursery.start_soon(db.run, _insert(f"queued {n}"))
            await _until_queued(db, 5)
            nursery.start_soon(db.aclose)
            await trio.sleep(0.01)
            release.set()
        assert db.closed
        try:
            await add_feedback(db, "too late")
        except StoreError as exc:
            assert "closed" in str(exc)
        else:
            raise AssertionError("a write after close was accepted")
    async with open_database(path) as db:
        assert await _issues(db) == {"holder", *(f"queued {n}" for n in range(5))}
