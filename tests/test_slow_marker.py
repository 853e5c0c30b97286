"""`uv run pytest -m "not slow"` stays fast only if every test that starts a process says so."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parent
STARTS_A_PROCESS = ("stdio_client_for(", "subprocess.run(", "subprocess.Popen(",
                    "gateway_process=True")


def test_every_test_file_that_starts_a_process_is_marked_slow():
    unmarked = [
        str(path.relative_to(TESTS)) for path in sorted(TESTS.rglob("test_*.py"))
        if path.name != Path(__file__).name
        and any(sign in (text := path.read_text()) for sign in STARTS_A_PROCESS)
        and "pytest.mark.slow" not in text
    ]
    assert unmarked == []
