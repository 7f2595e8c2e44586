"""Run records in the SQLite index under OPSBENCH_HOME."""

from __future__ import annotations

import pytest

from orchestrator import paths, store

pytestmark = pytest.mark.usefixtures("home")  # a private OPSBENCH_HOME (conftest)



def _run(run_id: str, scenario: str = "loopweb-web-down") -> dict:
    return {"id": run_id, "scenario_id": scenario, "spec_version": 1, "spec_digest": "abc123",
            "status": "running", "pid": 4242, "run_dir": f"/runs/{run_id}", "agent": "noop"}


def test_db_lives_under_opsbench_home(home):
    store.create_run(_run("r1"))
    assert store.db_path() == home.resolve() / "opsbench.db"
    assert store.db_path().is_file()
    assert paths.state_dir() == home.resolve()


def test_run_round_trip_with_phases():
    store.create_run(_run("r1"))
    seq_deploy = store.start_phase("r1", "deploy")
    store.end_phase("r1", seq_deploy, "successful")
    seq_inject = store.start_phase("r1", "inject")
    store.end_phase("r1", seq_inject, "failed", "fault did not manifest")
    store.update_run("r1", status="finished", outcome="invalid")

    assert (seq_deploy, seq_inject) == (1, 2)
    run = store.get_run("r1")
    assert run is not None
    assert {k: run[k] for k in ("id", "scenario_id", "spec_version", "spec_digest", "status",
                                "outcome", "pid", "run_dir", "agent")} == {
        "id": "r1", "scenario_id": "loopweb-web-down", "spec_version": 1, "spec_digest": "abc123",
        "status": "finished", "outcome": "invalid", "pid": 4242, "run_dir": "/runs/r1",
        "agent": "noop"}
    assert run["updated"] >= run["created"]
    assert [(p["phase"], p["status"], p["detail"]) for p in run["phases"]] == [
        ("deploy", "successful", None), ("inject", "failed", "fault did not manifest")]
    assert all(p["ended"] is not None and p["ended"] >= p["started"] for p in run["phases"])


def test_phase_left_running_has_no_end():
    store.create_run(_run("r1"))
    store.start_phase("r1", "deploy")
    (phase,) = store.get_run("r1")["phases"]
    assert (phase["status"], phase["ended"]) == ("running", None)


def test_phase_numbers_are_per_run():
    store.create_run(_run("r1"))
    store.create_run(_run("r2"))
    assert store.start_phase("r1", "deploy") == 1
    assert store.start_phase("r1", "baseline") == 2
    assert store.start_phase("r2", "deploy") == 1


def test_unknown_run_is_none():
    assert store.get_run("nope") is None


def test_list_runs_newest_first_with_filter_and_limit(monkeypatch):
    clock = iter(range(1000, 2000))
    monkeypatch.setattr(store.time, "time", lambda: float(next(clock)))  # distinct timestamps
    store.create_run(_run("r1", "loopweb-web-down"))
    store.create_run(_run("r2", "loopweb-gateway-bad-upstream"))
    store.create_run(_run("r3", "loopweb-web-down"))
    assert [r["id"] for r in store.list_runs()] == ["r3", "r2", "r1"]
    assert [r["id"] for r in store.list_runs(scenario="loopweb-web-down")] == ["r3", "r1"]
    assert [r["id"] for r in store.list_runs(limit=1)] == ["r3"]


def test_duplicate_run_id_is_rejected():
    import sqlite3

    store.create_run(_run("r1"))
    with pytest.raises(sqlite3.IntegrityError):
        store.create_run(_run("r1"))


def test_run_json_round_trip(tmp_path):
    data = {"id": "r1", "extravars": {"opsbench_port_base": 18080}}
    store.write_run_json(tmp_path, data)
    assert store.read_run_json(tmp_path) == data
    assert not (tmp_path / "run.json.tmp").exists()
