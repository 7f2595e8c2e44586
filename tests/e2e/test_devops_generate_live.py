"""Live: task generation over a real upstream project, end to end. go-semver is fetched from the Go module proxy into a
private cache; issue and build-config instances are drawn from a seed, screened against the project's own tests and
proven by `make check` on fresh copies. The draw is `make test`'s live sample of the generated DevOps tasks (about a
minute: 60 s with a cold Go build cache at nice 19 and a load of 8.5, 2026-12-05); running the drawn tasks as
scenarios in the workspace image takes several minutes each and stays in `make reliability`."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import yaml

from orchestrator.devops_projects import issue_text
from orchestrator.devops_projects.fetch import Cache
from orchestrator.devops_projects.generate import generate
from orchestrator.devops_projects.run import run_projects
from orchestrator.spec import load_scenario

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(shutil.which("go") is None, reason="needs the go command")]


def test_issue_and_build_tasks_from_go_semver_are_drawn_proven_and_reproducible(tmp_path: Path) -> None:
    cache = Cache(tmp_path / "cache")
    gocache = os.environ.get("GOCACHE")
    if gocache is None:  # a warm build cache (a cold one rebuilds the standard library for tests first)
        shared = Path(".opsbench/cache/devops-projects/host-gocache").resolve()
        if shared.is_dir():
            os.environ["GOCACHE"] = str(shared)
    try:
        assert [r.error for r in run_projects(("go-semver",), fetch=True, cache=cache)] == [None]
        out = tmp_path / "out"
        reports = generate(["go-semver"], ["issue", "build"], "live-test", 1, out, cache=cache, work=tmp_path)
    finally:
        if gocache is None:
            os.environ.pop("GOCACHE", None)
    assert [(r.family, r.error) for r in reports] == [("issue", ""), ("build", "")]
    for report in reports:
        assert len(report.instances) == 1, [(d.what, d.reason) for d in report.draws]
        inst = report.instances[0]
        folder = out / inst.id
        load_scenario(folder / "scenario.yaml")
        proof = json.loads((folder / "generated.json").read_text())["proof"]
        assert proof["untouched"]["rc"] != 0  # the untouched state fails the evaluation
        assert proof["reference"]["rc"] == 0 and proof["reference"]["failed"] == 0
        assert proof["reference"]["passed"] >= 30  # go-semver v3.2.1: 36 top-level tests, subtests aside
    issue = reports[0].instances[0]
    hidden = [key.split("::", 1)[1] for key in issue.provenance["hidden_tests"]]
    goal = yaml.safe_load((out / issue.id / "scenario.yaml").read_text())["tasks"][0]["goal"]
    assert issue_text.leaks(goal, hidden) == []
    assert issue.provenance["mutation"]["after"].strip() not in goal or len(issue.provenance["mutation"]["after"]) < 6
    summary = json.loads((out / "yields.json").read_text())
    assert summary["go-semver/issue"]["kept"] == 1 and summary["go-semver/issue"]["drawn"] >= 1

    again = generate(["go-semver"], ["issue"], "live-test", 1, tmp_path / "again", cache=cache, work=tmp_path)
    assert [i.id for i in again[0].instances] == [issue.id]  # the same seed draws the same instance


@pytest.mark.reliability
def test_a_generated_task_runs_live_as_a_scenario(tmp_path: Path, home: Path) -> None:
    """The drawn issue goes through verify-scenarios like a hand-written scenario: env_workspace deploys go-semver
    from the (private) cache at its pinned version, the untouched workspace fails evaluate_workspace, the reference
    passes, nothing is left behind."""
    from .conftest import run_json

    cache = Cache(tmp_path / "cache")
    assert [r.error for r in run_projects(("go-semver",), fetch=True, cache=cache)] == [None]
    [report] = generate(["go-semver"], ["issue"], "live-test", 1, tmp_path / "out", cache=cache, work=tmp_path)
    [inst] = report.instances
    spec = tmp_path / "out" / inst.id / "scenario.yaml"
    scenario = yaml.safe_load(spec.read_text())
    assert scenario["environment"]["args"]["upstream"][0]["id"] == "go-semver"
    scenario["environment"]["args"]["upstream_cache"] = str(cache.root)  # the private cache, not the state dir's
    spec.write_text(yaml.safe_dump(scenario, sort_keys=False))
    rc, result = run_json(home, "verify-scenarios", "--repeats", "1", str(spec.parent), timeout=1500)
    [row] = result["scenarios"]
    assert rc == 0 and row["passed"] and row["leftovers"] == [], row
    run_dir = next(p for p in (home / "runs").iterdir() if (p / "run.json").is_file())
    state = json.loads((run_dir / "run.json").read_text())
    untouched = state["results"]["evaluate_untouched"]["stats"]["evaluations"]["workspace"]
    reference = state["results"]["evaluate_reference"]["stats"]["evaluations"]["workspace"]
    assert untouched["workspace_pass"] == 0 and reference["workspace_pass"] == 1, (untouched, reference)
    assert reference["stages"][0]["check"]["passed"] >= inst.provenance["pristine_tests"]


@pytest.mark.reliability
def test_a_generated_monitoring_task_is_proven_live_and_runs_as_a_scenario(tmp_path: Path, home: Path) -> None:
    """A monitoring instance beside go-semver: drawn and proven in a throwaway workspace container (the anomaly shows
    on the culprit alone, nothing left), then through verify-scenarios like a hand-written devops-monitor-*: the
    untouched run (no diagnosis) fails, the reference diagnosis passes, 0 leftovers."""
    from .conftest import run_json

    cache = Cache(tmp_path / "cache")
    assert [r.error for r in run_projects(("go-semver",), fetch=True, cache=cache)] == [None]
    [report] = generate(["go-semver"], ["monitoring"], "live-test", 1, tmp_path / "out", cache=cache, work=tmp_path)
    assert report.error == "" and report.where == "workspace", [(d.what, d.reason) for d in report.draws]
    [inst] = report.instances
    assert inst.proof["manifestation"]["ok"] and inst.proof["healthy_marked"] == []
    assert inst.proof["stopped"] == {"rc": 0, "leftovers": False}
    spec = tmp_path / "out" / inst.id / "scenario.yaml"
    scenario = yaml.safe_load(spec.read_text())
    scenario["environment"]["args"]["upstream_cache"] = str(cache.root)
    spec.write_text(yaml.safe_dump(scenario, sort_keys=False))
    rc, result = run_json(home, "verify-scenarios", "--repeats", "1", str(spec.parent), timeout=1200)
    [row] = result["scenarios"]
    assert rc == 0 and row["passed"] and row["leftovers"] == [], row
