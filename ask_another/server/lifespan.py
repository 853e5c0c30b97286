"""What the server's lifespan holds: the running `Runtime`, or why it could not start (an
`Unavailable`, from `ask_another.hosting.open_lifespan`, which the console shares), and the MCP
face's own state (`ServerState`).

When the runtime cannot start (an unusable `ASK_ANOTHER_HOME`, a database file that is not
SQLite), the server still answers `initialize`, and every tool call that needs the runtime fails
with that reason (over stdio; `serve --http` exits with the reason instead, server/http.py).
This module does not import the MCP SDK, so `ask-another serve` opens the lifespan before the
SDK's import (ask_another/hosting.py says why).

`ServerState` is what every tool handler reads (`Context[ServerState]`; `state_of(ctx)` in
server/context.py): what `open_lifespan` opened, plus what only the MCP face keeps between the
rounds of one call, the attached start_research calls and the consensus spend confirmations.
The library object (`Runtime`) knows nothing of either.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ask_another.console_link import running_console
from ask_another.hosting import Unavailable, open_lifespan
from ask_another.runtime import Runtime

if TYPE_CHECKING:  # plain data (server/attachment.py), named in `ServerState.attached`
    from ask_another.server.attachment import Attachment

__all__ = ["ServerState", "Unavailable", "open_lifespan"]


@dataclass
class ServerState:
    """The MCP face's state for the server's lifetime: the lifespan's value."""

    opened: Runtime | Unavailable
    attached: dict[str, list[Attachment]] = field(default_factory=dict, repr=False)
    """start_research calls waiting on a job across elicitation rounds, by the call's arguments
    (server/tools/attached.py)."""
    confirmations: dict[str, float] = field(default_factory=dict, repr=False)
    """When each consensus call awaiting a spend confirmation asked it, by its arguments, so an
    answer in a later 2026-07-28 round can be found too late (server/tools/confirm.py)."""
    console_url: str | None = None
    """The console's root as people reach it (`serve --http`: ``.../console``), for the
    approval links the tools show; None where no console is served with this server."""

    def console_root(self) -> str | None:
        """Where the approval links of this server's texts point: the console served with it,
        else an `ask-another console` running on the same home (ask_another/console_link.py),
        else None (no link). Blocking, briefly: a stat of the home's `console.url`."""
        if self.console_url is not None:
            return self.console_url
        if isinstance(self.opened, Unavailable):
            return None
        return running_console(self.opened.config.home)

    @property
    def runtime(self) -> Runtime:
        """The running runtime; raises the `AskAnotherError` that kept it from starting."""
        if isinstance(self.opened, Unavailable):
            raise self.opened.error
        return self.opened
