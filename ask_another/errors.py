"""Every error ask-another raises on purpose, under one base class.

    AskAnotherError
    (subclasses are added by the module that owns the failure; see this module's tree below)
"""

from __future__ import annotations


class AskAnotherError(Exception):
    """Base class: catch this to catch every anticipated ask-another failure."""
