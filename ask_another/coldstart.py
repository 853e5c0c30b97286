"""Importing the MCP SDK quickly, for the stdio server's start-up.

Importing `mcp` is most of the server's cold start (about 1 s here): it defines some 550 pydantic
models, two protocol eras' worth, and pydantic builds each model's validator and serializer as
the class is created. A server answering `initialize` and `tools/list` uses a few dozen of them.
Two things make the import cheaper without changing what any model does:

- pydantic's `defer_build`, switched on as the default only while the SDK is imported: each
  model's validator, and each module-level `TypeAdapter`'s, is then built the first time it is
  used (a millisecond or two, once), so the ones a session never touches cost nothing (the
  client-side adapters a server never uses, most of the 2026 era's models for a 2025 client).
  pydantic has no public switch for the default: this sets the entry in its defaults table and
  makes `TypeAdapter` report deferral for that window, then puts both back. If a pydantic
  release moves either, that part is skipped and the import runs at the old speed
  (`tests/ask_another/test_coldstart.py` notices).
- The cyclic garbage collector is off during the import, and what the import built is frozen
  out of its reach afterwards. The SDK's ~100,000 long-lived objects are not garbage; without
  this the collector rescans them during the import (~80 ms) and on every full collection while
  serving (~65 ms a pause).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


def _pydantic_defaults() -> dict[str, Any] | None:
    try:
        from pydantic._internal import _config
    except ImportError:  # pragma: no cover - pydantic reorganised: import at the normal speed
        return None
    defaults = getattr(_config, "config_defaults", None)
    return defaults if isinstance(defaults, dict) and "defer_build" in defaults else None


def _adapter_deferral() -> tuple[type, object] | None:
    """`TypeAdapter` and its own `_defer_build` property, if this pydantic has one."""
    from pydantic import TypeAdapter

    own = TypeAdapter.__dict__.get("_defer_build")
    return (TypeAdapter, own) if isinstance(own, property) else None


@contextmanager
def quick_import() -> Iterator[None]:
    """Import heavy pydantic-based modules inside this block (the MCP SDK, the server).

    Only for start-up, before other threads run: it changes process-wide pydantic defaults for
    the length of the block.
    """
    defaults = _pydantic_defaults()
    previous = defaults["defer_build"] if defaults is not None else None
    adapters = _adapter_deferral()
    if defaults is not None:
        defaults["defer_build"] = True
    if adapters is not None:
        adapters[0]._defer_build = property(lambda self: True)  # type: ignore[attr-defined]
    gc.disable()
    try:
        yield
    finally:
        if defaults is not None:
            defaults["defer_build"] = previous
        if adapters is not None:
            adapters[0]._defer_build = adapters[1]  # type: ignore[attr-defined]
        gc.freeze()
        gc.enable()
