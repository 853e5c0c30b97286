"""`Services`: the runtime's shared handles as every long-lived part reaches them.

The store and the gateway are actors under the root supervisor; a restart gives them new handles.
Parts that outlive one call (research jobs, conversations, the runtime itself) hold a `Services`
and ask it for the current handle, which it finds by name in the runtime's registry and keeps
until that handle is closed. `price_map` is a `Once`: the value spend/ reads once for the
runtime's life (`spend.prices`); this module knows nothing of what it holds.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Final, Generic, TypeVar

import trio

from ask_another.config import Config, ModelEntry
from ask_another.errors import AskAnotherError
from ask_another.gateway import Gateway, GetGateway
from ask_another.store import Database, GetDatabase
from supervisors import ActorExited, CallTimeout, NoProcess, Registry

__all__ = ["RESTART_WAIT", "STARTS_AT_ONCE", "Once", "Services"]

T = TypeVar("T")

RESTART_WAIT: Final = 10.0
"""How long a caller waits for the store or the gateway while its supervisor restarts it."""


STARTS_AT_ONCE: Final = 16
"""Research job starts running at once in one runtime. A burst of thousands queues behind them:
each start is a store write, a supervisor call and the job's first steps, and thousands at once
in one pass of the event loop kept every other request (a check_research) waiting behind them
for hundreds of milliseconds."""


class Once(Generic[T]):
    """A value made the first time it is asked for, once however many callers ask at the same
    time (the others wait for it), then kept."""

    def __init__(self) -> None:
        self._value: T | None = None
        self._making = trio.Lock()

    async def get(self, make: Callable[[], Awaitable[T]]) -> T:
        if self._value is None:
            async with self._making:
                if self._value is None:
                    self._value = await make()
        return self._value


@dataclass
class Services:
    """The runtime's shared handles, found by name in its registry (refreshed after a restart)."""

    config: Config
    registry: Registry
    _gateway: Gateway | None = field(default=None, repr=False)
    _database: Database | None = field(default=None, repr=False)
    # One lookup at a time: a burst of thousands of callers finding no handle (the first calls
    # after a start or a restart) asks the actor once, not once each into its bounded mailbox.
    _looking: trio.Lock = field(default_factory=trio.Lock, repr=False, compare=False)
    price_map: Once[Any] = field(default_factory=Once, repr=False, compare=False)
    """litellm's prices of the allowed models, read once (spend.prices)."""
    starting: trio.CapacityLimiter = field(
        default_factory=lambda: trio.CapacityLimiter(STARTS_AT_ONCE), repr=False, compare=False)
    """Research job starts in progress at once; the others queue (research/jobs.py)."""

    async def gateway(self) -> Gateway:
        """The gateway handle (from the `gateway` actor; refreshed after a restart)."""
        if self._gateway is None or self._gateway.closed:
            async with self._looking:
                if self._gateway is None or self._gateway.closed:
                    self._gateway = await self._ask("gateway", GetGateway())
        return self._gateway

    async def database(self) -> Database:
        """The database handle (from the `store` actor; refreshed after a restart)."""
        if self._database is None or self._database.closed:
            async with self._looking:
                if self._database is None or self._database.closed:
                    self._database = await self._ask("store", GetDatabase())
        return self._database

    def model(self, model_id: str, variable: str | None = None) -> ModelEntry:
        """The allowed model with this id or shorthand (raises `ModelNotAllowed`); with the
        `MODEL_*` `variable` a stored record was made with, that entry (`Config.stored_entry`)."""
        return self.config.stored_entry(model_id, variable)

    async def _ask(self, name: str, msg: Any) -> Any:
        """Call the child registered as `name`; while its supervisor restarts it, the call waits
        (up to `RESTART_WAIT`) for the new one."""
        try:
            return await self.registry.call(name, msg, timeout=RESTART_WAIT)
        except NoProcess:
            raise AskAnotherError(f"the {name} is not running (its supervisor is gone); see the "
                                  "server's log") from None
        except (CallTimeout, ActorExited):
            raise AskAnotherError(f"the {name} did not come back within {RESTART_WAIT:g} s of a "
                                  "restart; try again, and see the server's log") from None
