"""snapshot.json and verification: every bad snapshot gives one SnapshotError naming snapshot, file and problem."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from snapshot_fixtures import FROZEN_NOW, make_snapshot

import orchestrator
from orchestrator.errors import OpsBenchError
from orchestrator.snapshots import format as fmt


def _edit_index(root: Path, **changes: Any) -> None:
    data = json.loads((root / fmt.INDEX).read_text())
    data.update(changes)
    (root / fmt.INDEX).write_text(json.dumps(data))


def test_write_index_lists_every_file_with_checksum_and_size(tmp_path: Path) -> None:
    info = make_snapshot(tmp_path / "s")
    data = json.loads((tmp_path / "s" / fmt.INDEX).read_text())
    assert sorted(data["files"]) == ["alerts.json", "manifest.json", "telemetry/logs/cart-1.jsonl"]
    log = tmp_path / "s" / "telemetry" / "logs" / "cart-1.jsonl"
    assert data["files"]["telemetry/logs/cart-1.jsonl"] == {"sha256": fmt.sha256_file(log),
                                                            "size": log.stat().st_size}
    assert data["format_version"] == fmt.FORMAT_VERSION
    assert data["opsbench_version"] == orchestrator.__version__
    assert data["scenario"] == {"id": "shop-cart-down", "version": 1}
    assert data["window"] == {"start": FROZEN_NOW - 600, "end": FROZEN_NOW}
    assert data["families"] == ["alerts", "logs"]
    assert info.snapshot_id.startswith("shop-cart-down-20231114T221500Z-")
    assert fmt.verify(tmp_path / "s").snapshot_id == info.snapshot_id


def _problem(root: Path) -> fmt.SnapshotError:
    with pytest.raises(fmt.SnapshotError) as caught:
        fmt.verify(root)
    assert isinstance(caught.value, OpsBenchError)
    assert str(root) in str(caught.value)
    return caught.value


def test_checksum_mismatch_names_the_file(tmp_path: Path) -> None:
    make_snapshot(tmp_path / "s")
    (tmp_path / "s" / "alerts.json").write_text(json.dumps([{"alertname": "ServiceDovn"}]))
    error = _problem(tmp_path / "s")
    assert error.file == "alerts.json" and "checksum mismatch" in error.problem


def test_changed_size_names_the_file(tmp_path: Path) -> None:
    make_snapshot(tmp_path / "s")
    (tmp_path / "s" / "alerts.json").write_text("[]")
    error = _problem(tmp_path / "s")
    assert error.file == "alerts.json" and "size" in error.problem


def test_missing_file(tmp_path: Path) -> None:
    make_snapshot(tmp_path / "s")
    (tmp_path / "s" / "telemetry" / "logs" / "cart-1.jsonl").unlink()
    error = _problem(tmp_path / "s")
    assert error.file == "telemetry/logs/cart-1.jsonl" and "missing" in error.problem


def test_unlisted_extra_file_is_refused(tmp_path: Path) -> None:
    make_snapshot(tmp_path / "s")
    (tmp_path / "s" / "telemetry" / "logs" / "smuggled.jsonl").write_text("{}\n")
    error = _problem(tmp_path / "s")
    assert error.file == "telemetry/logs/smuggled.jsonl" and "not listed" in error.problem


def test_symlink_is_refused(tmp_path: Path) -> None:
    make_snapshot(tmp_path / "s")
    (tmp_path / "s" / "link").symlink_to("/etc/passwd")
    error = _problem(tmp_path / "s")
    assert error.file == "link"


def test_missing_index(tmp_path: Path) -> None:
    make_snapshot(tmp_path / "s")
    (tmp_path / "s" / fmt.INDEX).unlink()
    error = _problem(tmp_path / "s")
    assert error.file == fmt.INDEX and "missing" in error.problem


def test_unknown_format_version(tmp_path: Path) -> None:
    make_snapshot(tmp_path / "s")
    _edit_index(tmp_path / "s", format_version=99)
    error = _problem(tmp_path / "s")
    assert error.file == fmt.INDEX and "unknown format version 99" in error.problem


def test_malformed_index_field(tmp_path: Path) -> None:
    make_snapshot(tmp_path / "s")
    _edit_index(tmp_path / "s", window={"start": "yesterday", "end": 1})
    assert "window" in _problem(tmp_path / "s").problem


@pytest.mark.parametrize(("recorded", "current", "ok"), [
    ("0.1.0", "0.1.0", True),
    ("0.1.0", "0.1.7", True),       # an older patch release of the same series
    ("0.1.3", "0.1.1", False),      # newer than the reader
    ("0.2.0", "0.1.0", False),      # while the major version is 0, the minor version is the series
    ("0.1.0", "0.2.0", False),
    ("1.2.0", "1.4.1", True),       # from 1.0 on, the major version is the series
    ("1.2.0", "2.0.0", False),
    ("banana", "0.1.0", False),
])
def test_recorder_compatibility_rule(recorded: str, current: str, ok: bool) -> None:
    assert (fmt.compatible_recorder(recorded, current) is None) is ok


def test_incompatible_recorder_is_refused(tmp_path: Path) -> None:
    make_snapshot(tmp_path / "s")
    _edit_index(tmp_path / "s", opsbench_version="9.0.0")
    error = _problem(tmp_path / "s")
    assert error.file == fmt.INDEX and "9.0.0" in error.problem


def test_scenario_that_no_longer_exists(tmp_path: Path) -> None:
    make_snapshot(tmp_path / "s", scenario="shop-retired-long-ago")
    error = _problem(tmp_path / "s")
    assert "'shop-retired-long-ago' no longer exists" in error.problem


def test_scenario_spec_version_changed(tmp_path: Path) -> None:
    make_snapshot(tmp_path / "s", version=7)
    error = _problem(tmp_path / "s")
    assert "version 7" in error.problem and "record it again" in error.problem


def test_verify_without_scenario_check_accepts_unknown_scenario(tmp_path: Path) -> None:
    make_snapshot(tmp_path / "s", scenario="not-a-scenario")
    assert fmt.verify(tmp_path / "s", check_scenario=False).scenario_id == "not-a-scenario"


def test_write_index_refuses_unknown_family(tmp_path: Path) -> None:
    (tmp_path / "s").mkdir()
    with pytest.raises(ValueError, match="unknown evidence families"):
        fmt.write_index(tmp_path / "s", scenario_id="x", spec_version=1, frozen_now=2.0, window_start=1.0,
                        families=["ground_truth"])
