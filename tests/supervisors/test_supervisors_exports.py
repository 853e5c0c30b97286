"""The public face: __all__ is complete and sorted, and the error tree holds together."""

from __future__ import annotations

import inspect

import supervisors
from supervisors import SupervisorError


def test_all_is_sorted_and_complete() -> None:
    public = {
        name
        for name, value in vars(supervisors).items()
        if not name.startswith("_") and not inspect.ismodule(value)
    }
    assert set(supervisors.__all__) == public

    def key(name: str) -> tuple[int, str]:
        # ruff's RUF022 order: SCREAMING_CASE, then CamelCase, then lower_case.
        return (0 if name.isupper() else 1 if name[0].isupper() else 2, name)

    assert supervisors.__all__ == sorted(supervisors.__all__, key=key)


def test_every_public_error_derives_from_supervisor_error_and_is_drawn() -> None:
    errors = [
        value
        for value in vars(supervisors).values()
        if isinstance(value, type) and issubclass(value, BaseException)
    ]
    tree = inspect.getdoc(supervisors._errors) or ""
    assert len(errors) >= 9
    for error in errors:
        assert issubclass(error, SupervisorError)
        assert error.__name__ in tree
