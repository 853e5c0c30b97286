"""Spending a user controls: the usage ledger's writer, estimates, and the budget ceilings.

`record_call` writes one ledger row per provider call (store/usage.py holds the table);
see docs/server.md (spending).
"""

from .ledger import Purpose as Purpose
from .ledger import record_call as record_call
from .ledger import usage_row as usage_row

__all__ = ["Purpose", "record_call", "usage_row"]
