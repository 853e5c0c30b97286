"""Spending a user controls: the usage ledger's writer, estimates, and the budget ceilings.

`intend_call` writes a provider call's ledger row before the call and `record_call` completes
it after (`paid`, `PaidGateway`: both around one call; store/usage.py holds the table); see
docs/server.md (spending).
"""

from .ledger import PaidGateway as PaidGateway
from .ledger import Purpose as Purpose
from .ledger import forget_call as forget_call
from .ledger import intend_call as intend_call
from .ledger import paid as paid
from .ledger import record_call as record_call
from .ledger import usage_row as usage_row

__all__ = ["PaidGateway", "Purpose", "forget_call", "intend_call", "paid", "record_call",
           "usage_row"]
