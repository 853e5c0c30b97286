"""The `slow` guard (tests/support/slow_marks.py) fails a test outside `slow` that starts a
process, and lets a marked one and the standard library's own `uname` probe through."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow  # the tests it runs start processes (`true`)

CASES = '''
import platform
import subprocess

import pytest


def test_unmarked_starts_a_process():
    subprocess.run(["true"], check=True)


@pytest.mark.slow
def test_marked_starts_a_process():
    subprocess.run(["true"], check=True)


def test_platform_probes_the_processor():
    platform._uname_cache = None  # type: ignore[attr-defined]  # so that it runs `uname -p`
    platform.processor()


def test_starts_nothing():
    assert True
'''


def test_an_unmarked_test_that_starts_a_process_fails_naming_it(pytester: pytest.Pytester):
    pytester.makeini("[pytest]\nmarkers =\n    slow: starts processes\n")
    pytester.makepyfile(test_cases=CASES)
    # slow_marks is imported already (this run's conftest): too late to rewrite its asserts.
    result = pytester.runpytest("-p", "slow_marks",
                                "-W", "ignore::pytest.PytestAssertRewriteWarning")
    result.assert_outcomes(passed=3, failed=1)
    assert "FAILED test_cases.py::test_unmarked_starts_a_process" in result.stdout.str()
    assert "this test starts a process (['true']): mark it slow" in result.stdout.str()
