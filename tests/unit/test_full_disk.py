"""A full state dir mid-run (ENOSPC) stops `opsbench run` with the cause and records the run as errored."""

from __future__ import annotations

import errno
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from orchestrator import store
from orchestrator.cli import main
from orchestrator.lifecycle import Run


def test_enospc_is_a_recorded_error_not_a_traceback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPSBENCH_HOME", str(tmp_path))

    def full(self: Run) -> dict[str, object]:
        raise OSError(errno.ENOSPC, "No space left on device", str(self.run_dir / "run.json.tmp"))

    monkeypatch.setattr(Run, "execute", full)
    result = CliRunner().invoke(main, ["run", "loopweb-web-down", "--quiet"])
    assert result.exit_code == 2, result.output
    assert "No space left on device" in result.output and "opsbench cleanup" in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    (row,) = store.list_runs()
    assert row["status"] == "error"
    assert "state dir is full" in json.loads(row["outcome"])["reason"]


def test_other_os_errors_are_not_swallowed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPSBENCH_HOME", str(tmp_path))

    def broken(self: Run) -> dict[str, object]:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(Run, "execute", broken)
    result = CliRunner().invoke(main, ["run", "loopweb-web-down", "--quiet"])
    assert isinstance(result.exception, OSError) and result.exception.errno == errno.EIO
