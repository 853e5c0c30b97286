"""A consensus's `stances` as a client writes them: a list of {model, stance} pairs (what the
schema shows: a strict-mode converter cannot write an open map), or the {model: stance} map
earlier clients send; both become the map the panel takes. Shared by the consensus tool, its
spend check (confirm.py) and a consensus task (server/tasks/)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict

from ask_another.errors import InvalidArgument

__all__ = ["Stance", "stances_map"]


class Stance(BaseModel):
    """One model's stance, as the schema shows stances: a list of these pairs (a strict-mode
    converter cannot write an open map)."""

    model_config = ConfigDict(extra="forbid")
    model: str
    stance: str


def stances_map(value: Any) -> dict[str, str] | None:
    """`stances` as the panel takes it, {model: stance}, from the list of pairs the schema
    shows or the map earlier clients send; `InvalidArgument` naming what is wrong otherwise."""
    if value is None:
        return None
    if isinstance(value, Mapping):
        pairs = list(value.items())
    elif isinstance(value, list):
        pairs = []
        for entry in value:
            if isinstance(entry, Stance):
                entry = entry.model_dump()
            if not (isinstance(entry, Mapping) and set(entry) == {"model", "stance"}):
                raise InvalidArgument("Invalid arguments for consensus: each stance must be "
                                      f"{{model, stance}}, got {entry!r}")
            pairs.append((entry["model"], entry["stance"]))
    else:
        raise InvalidArgument("Invalid arguments for consensus: stances must be a list of "
                              f"{{model, stance}}, got {value!r}")
    stances: dict[str, str] = {}
    for model, stance in pairs:
        if not isinstance(model, str) or not isinstance(stance, str):
            raise InvalidArgument("Invalid arguments for consensus: each stance's model and "
                                  "stance must be strings ('for', 'against', 'neutral' or your "
                                  f"own words), got {model!r}: {stance!r}")
        if model in stances:
            raise InvalidArgument(f"Invalid arguments for consensus: stances name {model!r} "
                                  "twice; give each model one stance")
        stances[model] = stance
    return stances
