"""`lazy_getattr`: a package face whose public names are imported at their first use (PEP 562).

The package faces `ask_another`, `ask_another.gateway` and `ask_another.server` use it, so the
gateway's worker process, `ask-another --help` and the people commands import them without the
runtime, the SDK and everything those import.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_getattr"]


def lazy_getattr(package: str, exports: Mapping[str, str]) -> Callable[[str], Any]:
    """The module `__getattr__` of `package`: each name of `exports` (name -> the module it
    lives in) is imported when first asked for, then kept in the package's namespace."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)  # found directly from now on
        return value

    return __getattr__
