"""Live: task generation over a real upstream project, end to end (`make reliability`, not `make test`: it builds and
tests the project a few dozen times, about a minute for go-semver on a quiet machine). go-semver is fetched from
the Go module proxy into a private cache; issue and build-config instances are drawn from a seed, screened against
the project's own tests and proven by `make check` on fresh copies."""

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

pytestmark = [pytest.mark.e2e, pytest.mark.reliability,
              pytest.mark.skipif(shutil.which("go") is None, reason="needs the go command")]


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
