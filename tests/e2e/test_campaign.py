"""A campaign for real: two scenarios x two trials, two environments at once, each reused between its trials;
then the same campaign again, which resumes with nothing left to do."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from .conftest import assert_no_leftovers, run_cli, run_json, unfinished_trials

pytestmark = pytest.mark.e2e
SCENARIOS = {"loopweb-web-down": "web", "loopweb-gateway-bad-upstream": "gateway-config"}


def test_campaign_reuses_environments_keeps_runs_apart_and_resumes(home: Path) -> None:
    rc, result = run_json(home, "campaign", *SCENARIOS, "--trials", "2", "--parallel", "2", "--name", "ci",
                          timeout=1200)
    assert rc == 0, result
    assert result["unfinished"] == 0, f"{unfinished_trials(home, 'ci')} | {result}"
    assert {(r["scenario"], r["trials"], r["passed"]) for r in result["scenarios"]} == {
        (s, 2, 2) for s in SCENARIOS}

    records = [json.loads(line) for line in (home / "campaigns" / "ci" / "trials.jsonl").read_text().splitlines()]
    assert len(records) == 4
    hosts = {s: {r["host"] for r in records if r["scenario"] == s} for s in SCENARIOS}
    assert all(len(h) == 1 for h in hosts.values()), hosts  # one environment per scenario, reused
    assert hosts["loopweb-web-down"] != hosts["loopweb-gateway-bad-upstream"]  # two at once

    for rec in records:
        host_dir = home / "runs" / rec["host"]
        trial_dir = host_dir / "trials" / rec["run_id"]
        state = json.loads((trial_dir / "run.json").read_text())
        # Each trial ran against its own host's environment and was scored on its own scenario.
        assert state["scenario_id"] == rec["scenario"] and state["common"]["opsbench_run_id"] == rec["host"]
        assert rec["scores"]["diagnosis"]["predicted"] == [SCENARIOS[rec["scenario"]]]
        assert (trial_dir / "artifacts" / "agent-output.json").is_file()
        assert state["leftovers"] == [] and state["cleanup"] == "done"
        phases = state["results"]
        assert "deploy" not in phases and "teardown" not in phases and phases["pristine"]["status"] == "successful"
    # The second trial on an environment skips the baseline: the first one's recovery and leftover checks proved it.
    for s in SCENARIOS:
        _, second = sorted((r for r in records if r["scenario"] == s), key=lambda r: r["trial"])
        second_state = json.loads((home / "runs" / second["host"] / "trials" / second["run_id"] / "run.json")
                                  .read_text())
        assert "baseline" not in second_state["results"]
    for host in {h for hs in hosts.values() for h in hs}:
        assert not (home / "runs" / host / "agent").exists()  # moved into the trials
        assert_no_leftovers(home / "runs" / host)

    with sqlite3.connect(home / "opsbench.db") as db:
        rows = db.execute("SELECT status, count(*) FROM runs GROUP BY status").fetchall()
    assert dict(rows) == {"completed": 4, "hosted": 2}
    results = run_cli(home, "results", "--json")
    assert sorted((r["scenario"], r["n"]) for r in json.loads(results.stdout)["scenarios"]) == [
        ("loopweb-gateway-bad-upstream", 2), ("loopweb-web-down", 2)]

    again = run_cli(home, "campaign", *SCENARIOS, "--trials", "2", "--parallel", "2", "--name", "ci")
    assert again.returncode == 0 and "resuming: 4 of 4 trial(s) already finished" in again.stderr
    with sqlite3.connect(home / "opsbench.db") as db:
        assert db.execute("SELECT count(*) FROM runs").fetchone()[0] == 6  # nothing run again
