"""What an attached start_research call keeps across elicitation rounds (server/tools/attached.py):
the job, the questions it put to the person, and what was answered.

Plain data, in a module of its own that imports nothing of the server, so `ServerState`
(server/lifespan.py, which holds the table of them) names the type without an import circle
through the tools.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydantic import BaseModel

    from ask_another.store.jobs import JobRecord

__all__ = ["Asked", "Attachment"]


@dataclass
class Asked:
    """A question this call put to the person by elicitation, as it was worded."""

    tool_call_id: str
    kind: str
    message: str
    schema: type[BaseModel]


@dataclass
class Attachment:
    """One start_research call and its job, kept across elicitation rounds."""

    key: str
    record: JobRecord
    timeout: float
    began: float  # time.monotonic()
    deadline: float  # trio.current_time()
    asked: list[Asked] = field(default_factory=list)
    delivered: set[tuple[str, str]] = field(default_factory=set)
    by_url: set[tuple[str, str]] = field(default_factory=set)  # asked as a link, not a form
    estimate: str | None = None  # the cost estimated before the job started (spend/)

    def asked_keys(self) -> set[tuple[str, str]]:
        # One tool call can ask twice: ask_user needs a permission, then asks its choice.
        return {(q.tool_call_id, q.kind) for q in self.asked} | self.by_url
