"""The public faces are explicit: every `__all__` is complete, sorted and importable."""

from __future__ import annotations

import importlib

import pytest

MODULES = ["ask_another.store", "ask_another.server", "ask_another.gateway",
           "ask_another.catalog", "ask_another.runtime", "ask_another.consensus",
           "ask_another.aio"]


def isort_order(name: str) -> tuple[int, str]:
    """ruff's RUF022 order: CONSTANTS, then Classes, then functions, each alphabetical."""
    kind = 0 if name.isupper() else 1 if name[:1].isupper() else 2
    return kind, name


@pytest.mark.parametrize("name", MODULES)
def test_all_is_sorted_and_importable(name: str):
    module = importlib.import_module(name)
    exported = module.__all__
    assert exported == sorted(exported, key=isort_order)
    for attribute in exported:
        assert hasattr(module, attribute), f"{name}.{attribute} is in __all__ but missing"


def test_only_what_may_be_a_bug_ends_with_the_feedback_pointer():
    from ask_another.errors import (
        FEEDBACK_POINTER,
        InvalidArgument,
        MalformedResponse,
        ModelNotAllowed,
        RateLimited,
        error_text,
    )

    assert error_text(RateLimited("slow down", model="openai/x")) == (
        "Rate limited (openai/x): slow down.")
    assert FEEDBACK_POINTER not in error_text(InvalidArgument("the prompt is empty"))
    assert FEEDBACK_POINTER not in error_text(ModelNotAllowed("gpt5"))
    assert error_text(MalformedResponse("no choices", model="openai/x")).endswith(FEEDBACK_POINTER)
    assert error_text(KeyError("secret internals")) == (
        f"Internal error (KeyError). {FEEDBACK_POINTER}")


@pytest.mark.parametrize("name", ["ask_another", "ask_another.gateway", "ask_another.server"])
def test_a_lazy_face_lists_each_name_once_in_all_and_in_its_exports(name: str):
    module = importlib.import_module(name)
    assert sorted(module._EXPORTS) == sorted(module.__all__)
    with pytest.raises(AttributeError, match="has no attribute 'nothing_here'"):
        module.nothing_here  # noqa: B018
