"""The allowed models' rows of litellm's price map, read once per runtime for the estimates.

Kept in the runtime's `Services.price_map` (a `Once`): the first caller reads the map in a thread
(without importing litellm, about 0.1 s), the rest of a burst waits for that read. Hundreds of
reads at once, one per start, held the GIL long enough that a job owner's heartbeat came late.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import trio

from ask_another.services import Services
from ask_another.spend.estimate import allowed_prices

__all__ = ["prices"]


async def prices(services: Services) -> Mapping[str, Mapping[str, Any]]:
    """The allowed models' rows of litellm's price map, by model id."""
    models = [entry.model for entry in services.config.models]

    async def read() -> Mapping[str, Mapping[str, Any]]:
        return await trio.to_thread.run_sync(allowed_prices, models)

    found: Mapping[str, Mapping[str, Any]] = await services.price_map.get(read)
    return found
