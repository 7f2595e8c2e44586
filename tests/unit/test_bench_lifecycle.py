"""`opsbench bench`'s arithmetic on recorded runs (the live measurement is a command, not a test)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator import paths, store
from orchestrator.harness.bench_lifecycle import (
    MemorySampler,
    lifecycle_by_scenario,
    phase_times,
    render,
    step_split,
)
from orchestrator.harness.campaign import TrialRecord


def write_run(run_id: str, run_dir: Path, results: dict[str, dict[str, object]], status: str) -> None:
    run_dir.mkdir(parents=True)
    (run_dir / "run.json").write_text(json.dumps({"id": run_id, "results": results}))
    store.create_run({"id": run_id, "scenario_id": "s", "spec_version": 1, "spec_digest": "d", "status": status,
                      "pid": 1, "run_dir": str(run_dir), "agent": "true"})


def test_phase_times_split_trials_from_their_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPSBENCH_HOME", str(tmp_path))
    host_dir = paths.runs_dir() / "h1"
    write_run("h1", host_dir, {"deploy": {"elapsed": 20.0}, "teardown": {"elapsed": 4.0}}, "hosted")
    records = []
    for i, alert in ((1, 9.0), (2, 11.0)):
        results = {"inject": {"elapsed": 3.0}, "agent": {"elapsed": 0.5},
                   "manifestation": {"elapsed": 12.0, "stats": {"checks": {"a": {"waited_s": alert}}}},
                   "recovery": {"elapsed": 6.0, "stats": {"checks": {"b": {"waited_s": 5.0}}}}}
        write_run(f"t{i}", host_dir / "trials" / f"t{i}", results, "completed")
        records.append(TrialRecord("s", "true", i, f"t{i}", "completed", None, 30.0, host="h1"))
    phases, per_trial, hosts = phase_times(records)
    assert phases["deploy"] == [20.0] and phases["teardown"] == [4.0]  # counted once for the host
    assert phases["time_to_alert"] == [9.0, 11.0] and phases["time_to_recover"] == [5.0, 5.0]
    assert per_trial == [21.0, 21.0]  # inject + manifestation + recovery; the agent's 0.5 s is not lifecycle
    assert hosts == [24.0]


def test_a_trial_whose_steps_overlap_counts_its_wall_clock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPSBENCH_HOME", str(tmp_path))
    t = 1000.0
    results: dict[str, dict[str, object]] = {"inject": {"elapsed": 3.0, "started_at": t, "ended_at": t + 3},
               "agent": {"elapsed": 2.0, "started_at": t + 3, "ended_at": t + 5},
               "collect": {"elapsed": 1.0, "started_at": t + 5, "ended_at": t + 6},
               "remove": {"elapsed": 4.0, "started_at": t + 5, "ended_at": t + 9},  # beside collect
               "recovery": {"elapsed": 6.0, "started_at": t + 9, "ended_at": t + 15},
               "pristine": {"elapsed": 2.0, "started_at": t + 9, "ended_at": t + 11}}  # beside recovery
    write_run("t1", paths.runs_dir() / "t1", results, "completed")
    records = [TrialRecord("s", "true", 1, "t1", "completed", None, 15.0)]
    _, per_trial, _ = phase_times(records)
    assert per_trial == [13.0]  # 15 s from inject's start to recovery's end, less the agent's 2 s (the sum is 16)
    assert lifecycle_by_scenario(records) == {"s": {"median": 13.0, "min": 13.0, "max": 13.0, "n": 1}}


def test_step_split_takes_medians_of_where_each_playbook_spent_its_time(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPSBENCH_HOME", str(tmp_path))
    records = []
    for i, startup in ((1, 1.0), (2, 2.0), (3, 9.0)):
        results = {"inject": {"elapsed": 4.0, "timing": {"startup": startup, "work": 2.0, "exit": 0.25}},
                   "agent": {"elapsed": 0.5}}  # not a playbook: no timing
        write_run(f"t{i}", paths.runs_dir() / f"t{i}", results, "completed")
        records.append(TrialRecord("s", "true", i, f"t{i}", "completed", None, 30.0))
    assert step_split(records) == {"inject": {"startup": 2.0, "work": 2.0, "exit": 0.25}}


def test_timing_is_empty_without_both_marks() -> None:
    from orchestrator.runner import play_timing

    assert play_timing(100.0, 5.0, {"playbook_on_start": 101.5, "playbook_on_stats": 104.0}) == {
        "startup": 1.5, "work": 2.5, "exit": 1.0}
    assert play_timing(100.0, 5.0, {"playbook_on_start": 101.5}) == {}  # a playbook that died before its recap
    assert play_timing(100.0, 5.0, {"playbook_on_start": 99.0, "playbook_on_stats": 104.0}) == {}  # clock went back


def test_memory_units_and_render() -> None:
    sampler = MemorySampler("20260101")
    assert sampler._bytes("12.5MiB") == 12.5 * 1024**2 and sampler._bytes("1.2GB") == 1.2e9
    report = {"scenarios": ["s"], "trials": 2, "agent": "true", "levels": {"1": {
        "finished": 2, "trials": 2, "wall_s": 60.0, "runs_per_hour": 120.0, "peak_memory_mib": 300.0,
        "peak_containers": 5, "phases_s": {"deploy": {"median": 20.0, "min": 20.0, "max": 20.0, "n": 1}},
        "phases_split_s": {"inject": {"startup": 1.9, "work": 1.2, "exit": 0.3}},
        "trial_lifecycle_without_agent_s": {"median": 21.0, "min": 21.0, "max": 21.0, "n": 2},
        "trial_lifecycle_with_deploy_share_s": None}},
        "overhead": {"step": "x", "repeats": 3, "ratio_median": 1.05, "ratio_mean": 1.06}}
    text = render(report)
    assert "120.0 runs/hour" in text and "deploy" in text and "1.05 (median)" in text
    assert "inject           1.9 / 1.2 / 0.3" in text
