"""``python -m frameworks.elastic`` refuses a damaged work dir with a message, not a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from frameworks.elastic.__main__ import main


@pytest.mark.parametrize(
    ("content", "message"),
    [('{"job_id": 1}', "bad job record"), ("not json", "1.json"), ("[1, 2]", "not a JSON object")],
)
def test_a_damaged_job_file_is_a_clear_error(tmp_path: Path, content: str, message: str) -> None:
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "1.json").write_text(content)
    r = CliRunner().invoke(main, ["--master", "127.0.0.1:1", "--port", "0", "--work-dir", str(tmp_path)])
    assert r.exit_code == 1 and message in r.output and "Traceback" not in r.output
