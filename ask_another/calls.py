"""`CallSettings`: how one provider call is made, checked once, where it is made.

A temperature and a timeout arrive from every face (a tool's arguments, the command line, an
embedding program); each face once checked them in its own words. Like httpx's `Timeout`, the
value validates itself in its constructor, so a `CallSettings` that exists is one the gateway
can use, and `MAX_TIMEOUT` is said in one place.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from ask_another.errors import InvalidArgument

__all__ = ["MAX_TIMEOUT", "CallSettings"]

MAX_TIMEOUT: Final = 3600.0
"""The longest a provider call (or a start_research wait) may be given, in seconds."""


@dataclass(frozen=True, slots=True)
class CallSettings:
    """A provider call's temperature (0.0-2.0, None: the provider's default) and timeout
    (seconds, more than 0 and at most `MAX_TIMEOUT`; None: `ASK_ANOTHER_TIMEOUT`). Raises
    `InvalidArgument` for a value outside those ranges."""

    temperature: float | None = None
    timeout: float | None = None

    def __post_init__(self) -> None:
        if self.temperature is not None and not 0.0 <= self.temperature <= 2.0:
            raise InvalidArgument(
                f"temperature must be between 0.0 and 2.0, got {self.temperature:g}")
        if self.timeout is not None and not 0 < self.timeout <= MAX_TIMEOUT:
            raise InvalidArgument(f"timeout must be more than 0 and at most {MAX_TIMEOUT:g} "
                                  f"seconds, got {self.timeout:g}")

    def timeout_or(self, default: float) -> float:
        """The timeout, or `default` (the configured one) when none was given."""
        return self.timeout if self.timeout is not None else default
