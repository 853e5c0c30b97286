"""One process's first start on a home: wait for the start signal, open the database, exit.

Run by `first_starts(db, count, go)` (test_concurrent_first_starts.py, test_postgres.py) as
`python first_start.py DB GO`: it spins until the file GO exists (so twenty processes, started
one by one, open the database at the same instant), then opens and migrates DB (a SQLite file's
path, or a postgresql:// URL) through the store's own code and prints nothing (exit 0 on
success, the one-line error on stderr and exit 1 otherwise).
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import trio

from ask_another.config import Config, DatabaseUrl
from ask_another.errors import StoreError
from ask_another.store import MIGRATIONS, open_database


def first_starts(db: str, count: int, go: Path) -> list[str]:
    """Start `count` processes on `db` at once (they wait for `go`, then open it); the last
    line of each one that failed."""
    procs = [subprocess.Popen([sys.executable, __file__, db, str(go)], stderr=subprocess.PIPE,
                              text=True) for _ in range(count)]
    go.touch()
    failures = []
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        if proc.returncode != 0:
            failures.append(err.strip().splitlines()[-1] if err.strip() else "no output")
    return failures


async def main(db: Path | DatabaseUrl) -> None:
    async with open_database(db) as database:
        assert await database.schema_version() == len(MIGRATIONS)


if __name__ == "__main__":
    go = Path(sys.argv[2])
    while not go.exists():
        time.sleep(0.001)
    try:
        target = sys.argv[1]
        url = Config.from_env({"ASK_ANOTHER_DATABASE_URL": target}).database_url
        trio.run(main, url if target.startswith("postgresql://") and url else Path(target))
    except StoreError as exc:
        sys.stderr.write(f"{exc}\n")
        sys.exit(1)
