"""Where a running console of the home is (`console.url`): written while it runs, private, gone
after it, and not trusted once its process has died."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from ask_another.console_link import FILE_NAME, approval_url, publish_console, running_console

ROOT = "http://127.0.0.1:8123/console"


def test_a_console_is_found_while_it_runs_and_not_after(tmp_path: Path):
    assert running_console(tmp_path) is None
    with publish_console(tmp_path, ROOT):
        assert running_console(tmp_path) == ROOT
        assert (tmp_path / FILE_NAME).stat().st_mode & 0o777 == 0o600
        assert [p.name for p in tmp_path.iterdir()] == [FILE_NAME]  # no temporary file left
    assert running_console(tmp_path) is None and not (tmp_path / FILE_NAME).exists()
    assert approval_url(ROOT, "r-0123456789", "call-1") == f"{ROOT}/approvals/r-0123456789/call-1"


def test_the_file_of_a_console_whose_process_died_is_not_trusted(tmp_path: Path):
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    (tmp_path / FILE_NAME).write_text(json.dumps({"url": ROOT, "pid": int(gone.stdout)}))
    assert running_console(tmp_path) is None


def test_a_damaged_file_means_no_console(tmp_path: Path):
    for text in ("", "{", "[1]", '{"url": 3, "pid": 1}', f'{{"url": "{ROOT}", "pid": "1"}}',
                 f'{{"url": "{ROOT}", "pid": 0}}'):
        (tmp_path / FILE_NAME).write_text(text)
        assert running_console(tmp_path) is None, text


def test_a_console_leaving_does_not_remove_the_file_of_one_that_started_after_it(tmp_path: Path):
    with publish_console(tmp_path, ROOT):
        later = {"url": "http://127.0.0.1:9/console", "pid": os.getpid()}
        (tmp_path / FILE_NAME).write_text(json.dumps(later))
    assert running_console(tmp_path) == later["url"]


def test_a_second_console_leaving_gives_the_link_back_to_the_first_that_still_runs(
        tmp_path: Path):
    # Two `ask-another console` on one home: the second's exit removed console.url while the
    # first ran, and a terminal's research question lost its link to the first. The first is
    # a live process other than this one (this test's parent).
    first = "http://127.0.0.1:4001/console"
    (tmp_path / FILE_NAME).write_text(json.dumps({"url": first, "pid": os.getppid()}))
    with publish_console(tmp_path, "http://127.0.0.1:4002/console"):
        assert running_console(tmp_path) == "http://127.0.0.1:4002/console"
    assert running_console(tmp_path) == first
