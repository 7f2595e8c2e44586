"""`opsbench replay` through the real lifecycle (real Ansible, no podman): trials on one frozen environment, runs
recorded as replays, the frozen Prometheus stopped after the trials and by `opsbench cleanup` after a SIGKILL, and
scenarios that need the live world refused before anything starts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from gateway_fixtures import NOW

from orchestrator import store
from orchestrator.catalog import find_scenario
from orchestrator.errors import OpsBenchError
from orchestrator.harness.replay import replay
from orchestrator.lifecycle import Run
from orchestrator.snapshots import format as fmt
from orchestrator.snapshots.frozen_prometheus import PID_FILE
from orchestrator.trials import replay_host

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("home")]




def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][:1] != "Z"
    except OSError:
        return False


def test_trials_share_one_frozen_environment_and_are_recorded_as_replays(snapshot: Path) -> None:
    info = fmt.verify(snapshot)
    records = replay([snapshot], agent="true", trials=2)
    assert [(r.trial, r.status) for r in records] == [(1, "completed"), (2, "completed")]
    assert records[0].host == records[1].host and records[0].run_id != records[1].run_id
    assert records[0].scores["diagnosis"]["status"] == "no_submission"  # scored by the unchanged evaluator

    rows = {r["id"]: r for r in store.list_runs()}
    assert {(rows[r.run_id]["mode"], rows[r.run_id]["snapshot_id"]) for r in records} == {
        ("replay", info.snapshot_id)}
    host = rows[records[0].host]
    assert (host["mode"], host["status"]) == ("replay", "hosted")

    recorded = json.loads((snapshot / fmt.MANIFEST).read_text())
    for r in records:
        trial_dir = Path(rows[r.run_id]["run_dir"])
        manifest = json.loads((trial_dir / "agent" / "manifest.json").read_text())
        assert manifest["replay"] == {"snapshot": info.snapshot_id, "now": NOW}
        assert manifest["alerts"] == recorded["alerts"] and manifest["endpoints"] == {}
        assert manifest["topology"] == recorded["topology"]
        assert json.loads((trial_dir / "run.json").read_text())["done"] == [
            "handover", "agent", "collect", "evaluate", "revoke"]
    host_dir = Path(host["run_dir"])
    assert not (host_dir / "environment.json").exists() and not (host_dir / "prometheus").exists()
    assert not (host_dir / "snapshot").exists()


def test_cleanup_after_a_sigkill_stops_the_frozen_prometheus(snapshot: Path) -> None:
    scn = find_scenario("shop-cart-down")
    host = replay_host(scn, snapshot, fmt.verify(snapshot).snapshot_id)
    assert host.step("deploy", 1, 1).status == "successful"
    pid = int((host.run_dir / "prometheus" / PID_FILE).read_text())
    assert _alive(pid)
    # The orchestrator dies here; `opsbench cleanup` works from run.json alone.
    again = Run.load(host.id)
    assert again.pending_cleanup() == ["teardown"]
    again.cleanup()
    assert again.state["cleanup"] == "done" and not _alive(pid)


def test_a_scenario_that_needs_the_live_world_is_refused_before_anything_runs(tmp_path: Path) -> None:
    scn = find_scenario("shop-cart-down-mitigate")
    snap = tmp_path / "snap"
    snap.mkdir()
    (snap / fmt.MANIFEST).write_text("{}")
    fmt.write_index(snap, scenario_id=scn.id, spec_version=scn.version, frozen_now=NOW, window_start=NOW - 60,
                    families=[])
    with pytest.raises(OpsBenchError, match=r"task\(s\) .*\(mitigate\) that need the live world"):
        replay([snap], agent="true")
    assert store.list_runs() == []


def test_a_gateway_whose_port_was_taken_fails_the_handover_with_its_log(snapshot: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The run's gateway port (base + 9) taken after the block was chosen: the trial errors (the agent never ran)
    and the reason carries the gateway's own words."""
    import socket

    from orchestrator import lifecycle, ports

    base = ports.free_port_base()
    monkeypatch.setattr(lifecycle, "free_port_base", lambda: base)
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", base + 9))  # bound, not listening: the gateway cannot bind, nothing answers
        records = replay([snapshot], agent="true")
    assert [r.status for r in records] == ["error"]
    assert "did not answer" in records[0].reason and "gateway/gateway.log ends" in records[0].reason
    assert "address already in use" in records[0].reason.lower(), records[0].reason
    rows = {r["id"]: r for r in store.list_runs()}
    assert "agent" not in json.loads((Path(rows[records[0].run_id]["run_dir"]) / "run.json").read_text())["done"]
