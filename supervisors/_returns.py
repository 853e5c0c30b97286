"""What a hook may return besides a reply: `Continue(term)` (OTP's ``{continue, Term}``) and, from
`init`, `IGNORE` (OTP's ``ignore``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, final


@final
@dataclass(frozen=True, slots=True)
class Continue:
    """Return from `init` or any handler: `Actor.handle_continue(term)` runs next, before any
    message already queued (OTP's ``{continue, Term}``). `handle_continue` may return another
    `Continue`. From `handle_call` it also means `NOREPLY`: call ``caller.reply(value)`` first
    for OTP's ``{reply, Value, State, {continue, Term}}``. Not run if the hook called
    `self.stop()` (the stop wins); an exception in `handle_continue` crashes the actor as any
    hook's does."""

    term: Any


@final
class _Ignore:
    __slots__ = ()

    def __repr__(self) -> str:
        return "IGNORE"


IGNORE: Final = _Ignore()
"""Return from `init` to start nothing, without an error (OTP's ``ignore``): the actor exits
`Normal()` at once. Under a static supervisor the child is kept as not running (status
``"stopped"``, `restart_child` tries again), but a temporary child's spec is dropped (OTP's
rule: nothing would start it again); a dynamic supervisor's `start_child` returns None;
a plain `spawn` raises `StartError` with reason `Normal()` (it promises a running actor)."""
