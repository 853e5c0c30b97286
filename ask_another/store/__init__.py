"""The store: `db.py` is its interface and the SQLite backend (the embedded default),
`postgres.py` the PostgreSQL backend; one module per table group, its SQL written once for both."""

from ask_another.store.actor import GetDatabase as GetDatabase
from ask_another.store.actor import StoreActor as StoreActor
from ask_another.store.actor import connect_database as connect_database
from ask_another.store.actor import open_database as open_database
from ask_another.store.db import MIGRATIONS as MIGRATIONS
from ask_another.store.db import Database as Database
from ask_another.store.db import Migration as Migration
from ask_another.store.db import SqliteDatabase as SqliteDatabase
from ask_another.store.feedback import FeedbackRecord as FeedbackRecord
from ask_another.store.feedback import add_feedback as add_feedback
from ask_another.store.feedback import list_feedback as list_feedback

__all__ = [
    "MIGRATIONS",
    "Database",
    "FeedbackRecord",
    "GetDatabase",
    "Migration",
    "SqliteDatabase",
    "StoreActor",
    "add_feedback",
    "connect_database",
    "list_feedback",
    "open_database",
]
