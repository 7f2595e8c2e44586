"""A real Prometheus on a private copy of a TSDB built by promtool: answers at the frozen now, stops cleanly."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from snapshot_fixtures import FROZEN_NOW, build_tsdb

from orchestrator.snapshots import frozen_prometheus as fp


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][:1]
    except OSError:
        return False
    return state != "Z"


@pytest.fixture(scope="module")
def tsdb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tsdb(tmp_path_factory.mktemp("tsdb") / "tsdb")


def _files(root: Path) -> dict[str, int]:
    return {p.relative_to(root).as_posix(): p.stat().st_mtime_ns for p in root.rglob("*")}


def test_serves_the_recorded_data_at_the_frozen_now_and_stops(tsdb: Path, tmp_path: Path) -> None:
    before = _files(tsdb)
    with fp.FrozenPrometheus(tsdb, tmp_path / "prom") as prom:
        pid = int((tmp_path / "prom" / fp.PID_FILE).read_text())
        assert _running(pid)
        instant = prom.query('http_requests_total{service="cart"}', FROZEN_NOW)
        assert [s["value"] for s in instant["result"]] == [[FROZEN_NOW, str(30 * 60 * 2)]]
        # A range ending at the frozen now: rate of +2/s, one point per minute over the last 10 minutes.
        ranged = prom.query_range('rate(http_requests_total{service="cart"}[1m])', FROZEN_NOW - 600, FROZEN_NOW, 60)
        values = ranged["result"][0]["values"]
        assert len(values) == 11 and values[-1][0] == FROZEN_NOW
        assert all(abs(float(v) - 2.0) < 1e-9 for _, v in values)
        # The incident is visible as recorded: cart down for the last two minutes.
        assert prom.query('up{service="cart"} == 0', FROZEN_NOW)["result"]
        # No scraping, no rules: nothing but the recorded series exists (no `up` of a self-scrape).
        names = fp.api(prom.url, "/api/v1/label/__name__/values")
        assert names == ["http_requests_total", "prometheus_tsdb_head_series", "up"]
        # The lookback is Prometheus's default: 5 minutes after the last sample, the series is gone.
        assert prom.query("http_requests_total", FROZEN_NOW + 301)["result"] == []
    assert not _running(pid)
    assert not (tmp_path / "prom" / fp.PID_FILE).exists()
    assert not (tmp_path / "prom" / fp.DATA_DIR).exists()
    assert _files(tsdb) == before, "the recorded TSDB itself must never be written"


def test_missing_binary_is_a_clear_error(tsdb: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(fp.PrometheusError, match="no `prometheus` binary on PATH"):
        fp.FrozenPrometheus(tsdb, tmp_path / "prom").start()
    assert not (tmp_path / "prom").exists()


def test_failed_start_names_the_log_and_leaves_nothing(tsdb: Path, tmp_path: Path) -> None:
    prom = fp.FrozenPrometheus(tsdb, tmp_path / "prom", extra_args=["--no-such-flag"])
    with pytest.raises(fp.PrometheusError, match="exited with status") as caught:
        prom.start()
    assert "no-such-flag" in str(caught.value)
    assert not (tmp_path / "prom" / fp.PID_FILE).exists() and not (tmp_path / "prom" / fp.DATA_DIR).exists()


def test_kill_leftover_after_the_owner_was_sigkilled(tsdb: Path, tmp_path: Path) -> None:
    work = tmp_path / "prom"
    code = (f"from pathlib import Path; from orchestrator.snapshots.frozen_prometheus import FrozenPrometheus; "
            f"FrozenPrometheus(Path({str(tsdb)!r}), Path({str(work)!r})).start(); "
            "print('ready', flush=True); import time; time.sleep(600)")
    owner = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                             cwd=Path(__file__).resolve().parents[2])
    try:
        assert owner.stdout is not None and owner.stdout.readline().strip() == "ready"
        pid = int((work / fp.PID_FILE).read_text())
        os.kill(owner.pid, signal.SIGKILL)
        owner.wait()
        assert _running(pid), "Prometheus runs in its own session and survives its owner"
        assert fp.kill_leftover(work) is True
        deadline = time.monotonic() + 5
        while _running(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _running(pid)
        assert not (work / fp.PID_FILE).exists() and not (work / fp.DATA_DIR).exists()
        assert fp.kill_leftover(work) is False
    finally:
        if owner.poll() is None:
            owner.kill()


def test_kill_leftover_ignores_a_recycled_pid(tmp_path: Path) -> None:
    (tmp_path / fp.PID_FILE).write_text(f"{os.getpid()}\n")
    assert fp.kill_leftover(tmp_path) is False
    assert not (tmp_path / fp.PID_FILE).exists()


def test_rewrite_without_drops_selected_series(tsdb: Path, tmp_path: Path) -> None:
    out = fp.rewrite_without(tsdb, tmp_path / "clean", tmp_path / "work", ['{service="loadgen"}',
                                                                           '{__name__=~"prometheus_.*"}'])
    assert not (tmp_path / "work" / fp.DATA_DIR).exists()
    with fp.FrozenPrometheus(out, tmp_path / "prom") as prom:
        services = fp.api(prom.url, "/api/v1/label/service/values")
        assert services == ["cart"]
        assert prom.query("prometheus_tsdb_head_series", FROZEN_NOW)["result"] == []
        assert prom.query('http_requests_total{service="cart"}', FROZEN_NOW)["result"]


def test_rewrite_without_cuts_samples_before_the_window(tsdb: Path, tmp_path: Path) -> None:
    keep_from = FROZEN_NOW - 600
    out = fp.rewrite_without(tsdb, tmp_path / "clean", tmp_path / "work", [], keep_from=keep_from)
    with fp.FrozenPrometheus(out, tmp_path / "prom") as prom:
        series = prom.query_range('http_requests_total{service="cart"}', FROZEN_NOW - 1800, FROZEN_NOW, 15)
        times = [float(t) for t, _ in series["result"][0]["values"]]
        assert min(times) >= keep_from and max(times) == FROZEN_NOW
        # Before the window there is nothing, not even a stale last sample within the lookback.
        assert prom.query('http_requests_total{service="cart"}', keep_from - 1)["result"] == []
