"""`opsbench bench --devops`'s selection (folders of generated tasks, families, the stratified sample), its
grouping into one workspace per environment and its per family / language / cell figures, on fake scenarios and a
fake lifecycle (the live measurement is a command, not a test)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

import pytest
from click.testing import CliRunner

from orchestrator.cli import main
from orchestrator.errors import OpsBenchError
from orchestrator.harness import bench_devops as bd
from orchestrator.progress import Progress
from orchestrator.spec import Scenario


def scenario(sid: str, cls: str, lang: str | None, project: str = "", techs: tuple[str, ...] = ()) -> Scenario:
    env: dict[str, Any] = {"backend": "local", "application": "workspace"}
    if lang is not None:
        env["args"] = {"projects": [], "upstream": [{"id": project or f"{lang}-proj", "language": lang}]}
    data = {"metadata": {"id": sid, "class": cls, "domain": "DevOps",
                         "complexity": {"technologies": list(techs)}}, "environment": env}
    return Scenario(path=Path(f"/nowhere/{sid}/scenario.yaml"), data=data)


def pool() -> list[Scenario]:
    out = []
    for cls, lang, n in (("build-config", "go", 5), ("build-config", "java", 2), ("monitoring", "python", 3),
                         ("issue-resolving", "go", 4), ("pipeline", "python", 1)):
        out += [scenario(f"{cls}-{lang}-{i}", cls, lang, project=f"{lang}-p{i % 2}") for i in range(n)]
    return out


def test_a_folder_of_generated_tasks_expands_to_its_scenario_folders(tmp_path: Path) -> None:
    batch = tmp_path / "batch"
    for name in ("b-task", "a-task"):
        (batch / name).mkdir(parents=True)
        (batch / name / "scenario.yaml").write_text("x")
    (batch / "yields.json").write_text("{}")
    (batch / "not-a-task").mkdir()
    single = batch / "a-task"
    assert bd.expand([str(batch), str(single), "devops-build-x"]) == [
        str(batch / "a-task"), str(batch / "b-task"), str(single), "devops-build-x"]
    (tmp_path / "empty").mkdir()
    with pytest.raises(OpsBenchError, match=r"empty: a folder with no scenario.yaml"):
        bd.expand([str(tmp_path / "empty")])


def test_language_is_the_upstream_projects_else_the_technologies() -> None:
    assert bd.language(scenario("a", "build-config", "java")) == "java"
    assert bd.language(scenario("b", "build-config", None, techs=("python", "pip", "setuptools"))) == "python"
    assert bd.language(scenario("c", "pipeline", None, techs=("go", "java", "make"))) == "mixed"
    assert bd.language(scenario("d", "monitoring", None, techs=("linux",))) == "mixed"


def test_families_keep_their_classes_and_an_unknown_one_is_named() -> None:
    chosen = bd.select(pool(), ["build-config", "monitoring"])
    assert {s.data["metadata"]["class"] for s in chosen} == {"build-config", "monitoring"}
    assert len(chosen) == 10
    with pytest.raises(OpsBenchError, match=r"--family build: no such class.*build-config"):
        bd.select(pool(), ["build"])


def test_the_stratified_sample_covers_every_cell_and_depends_on_the_seed_not_the_order() -> None:
    scenarios = pool()
    one = bd.select(scenarios, per_cell=1, seed="s1")
    cells = [(s.data["metadata"]["class"], bd.language(s)) for s in one]
    assert sorted(cells) == cells and len(set(cells)) == len(cells) == 5
    again = bd.select(list(reversed(scenarios)), per_cell=1, seed="s1")
    assert [s.id for s in again] == [s.id for s in one]
    draws = {tuple(s.id for s in bd.select(scenarios, ["build-config"], per_cell=2, seed=f"s{i}"))
             for i in range(12)}
    assert len(draws) > 1  # the seed decides (5 choose 2 for the Go cell)
    assert all(len(d) == 4 for d in draws)  # 2 Go + both Java
    assert len(bd.select(scenarios, per_cell=10)) == len(scenarios)  # cells smaller than N are kept whole


def test_the_same_instance_in_two_batches_counts_once() -> None:
    twice = [*pool(), scenario("build-config-go-0", "build-config", "go", project="go-p0")]
    assert len(bd.select(twice)) == len(pool())


def test_scenarios_share_a_workspace_only_when_their_environment_is_the_same() -> None:
    a = scenario("a", "build-config", "go", project="go-semver")
    b = scenario("b", "monitoring", "go", project="go-toml")
    c = scenario("c", "pipeline", "go", project="go-semver")
    hand = scenario("d", "build-config", None, techs=("java",))
    groups = bd.by_environment([a, b, c, hand])
    assert [[s.id for s in g] for g in groups] == [["a", "c"], ["b"], ["d"]]


class FakeRun:
    """Just enough of `Run` for `bench_trials`: a deploy that succeeds unless the project is in `broken`."""

    broken: ClassVar[set[str]] = set()
    made: ClassVar[list[FakeRun]] = []

    def __init__(self, scn: Scenario) -> None:
        self.scn = scn
        self.id = f"host-{scn.id}"
        self.state: dict[str, Any] = {"results": {}}
        self.cleaned = False
        self.interrupts: Any = None
        FakeRun.made.append(self)

    @classmethod
    def create(cls, scn: Scenario, **_: Any) -> FakeRun:
        return cls(scn)

    def step(self, name: str, *_: Any) -> Any:
        project = self.scn.data["environment"]["args"]["upstream"][0]["id"]
        ok = project not in self.broken
        self.state["results"][name] = {"elapsed": 3.5}
        return type("Result", (), {"status": "successful" if ok else "failed",
                                   "failures": [] if ok else [f"{project} is not fetched"]})()

    def cleanup(self) -> None:
        self.cleaned = True
        self.state["results"]["teardown"] = {"elapsed": 1.25}


def test_trials_run_per_workspace_and_a_workspace_that_fails_is_counted_apart(
        monkeypatch: pytest.MonkeyPatch) -> None:
    FakeRun.made, FakeRun.broken = [], {"java-p0"}
    ran: list[tuple[str, str]] = []

    def fake_trial_on(host: FakeRun, scn: Scenario, agent: str | None, purpose: str) -> Any:
        ran.append((host.id, scn.id))
        trial = FakeRun(scn)
        trial.id = f"trial-{scn.id}"
        trial.state["results"] = {"agent": {"elapsed": 2.0}, "evaluate": {"elapsed": 4.0}}
        trial.passes = scn.id.endswith("-0")  # type: ignore[attr-defined]
        return trial

    def fake_agent_trial(trial: Any, healthy: bool) -> dict[str, Any]:
        score = 1 if trial.passes else 0
        return {"status": "completed", "recovered": True, "leftovers": [], "cleanup": "done",
                "evaluations": {"workspace": {"workspace_pass": score, "stage_pass_rate": 0.5 * (1 + score)}}}

    monkeypatch.setattr(bd, "Run", FakeRun)
    monkeypatch.setattr(bd, "trial_on", fake_trial_on)
    monkeypatch.setattr(bd, "agent_trial", fake_agent_trial)
    scenarios = bd.select(pool(), ["build-config", "pipeline"])
    workspaces: list[dict[str, Any]] = []
    rows = bd.bench_trials(scenarios, Progress(), workspaces)
    assert len(rows) == 8
    hosts = [h for h in FakeRun.made if h.id.startswith("host-") and h.cleaned]
    assert len(workspaces) == len(hosts) == 5  # go-p0, go-p1, java-p0 (broken), java-p1, python-p0, all torn down
    broken = [w for w in workspaces if w["error"]]
    assert len(broken) == 1 and "java-p0 is not fetched" in broken[0]["error"]
    assert all(w["deploy_s"] == 3.5 and w["teardown_s"] == 1.25 for w in workspaces)
    errors = [r for r in rows if r["status"] == "error"]
    assert [r["scenario"] for r in errors] == ["build-config-java-0"]
    assert not any(sid == "build-config-java-0" for _, sid in ran)

    classes = bd.by_class(rows)
    assert classes["build-config"] == {**classes["build-config"], "scenarios": 6, "errors": 1, "passed": 1,
                                       "pass_at_1": 0.17, "median_agent_s": 2.0, "baseline": "build fixer"}
    assert classes["pipeline"]["stages_passed"] == 1.0 and classes["pipeline"]["pass_at_1"] == 1.0
    cells = bd.by_cell(rows)
    assert cells["build-config/java"]["scenarios"] == 1 and cells["build-config/java"]["errors"] == 1
    assert cells["build-config/java"]["pass_at_1"] == 0.0
    assert bd.by_language(rows)["go"]["pass_at_1"] == 0.2


def test_render_shows_the_sample_and_the_cells() -> None:
    rows = [{"scenario": "x", "class": "monitoring", "language": "java", "baseline": "monitor", "status": "completed",
             "passed": True, "wall_s": 10.0, "stage_pass_rate": None, "agent_s": 4.0, "evaluate_s": 1.0},
            {"scenario": "y", "class": "monitoring", "language": "go", "baseline": "monitor", "status": "error",
             "passed": False, "wall_s": None, "stage_pass_rate": None, "agent_s": None, "evaluate_s": None}]
    report = {"repeats": 1, "load": {"start": [1.5, 2.0, 2.5], "end": [1.0, 1.0, 1.0]},
              "selection": {"pool": 9, "selected": 2, "per_cell": 1, "seed": "s"},
              "start": {"median_deploy_s": 4.0, "deploy_s": [4.0], "median_teardown_s": 2.0},
              "trials": rows, "classes": bd.by_class(rows), "languages": bd.by_language(rows),
              "cells": bd.by_cell(rows)}
    text = bd.render(report)
    assert "stratified sample: 2 of 9 scenarios, at most 1 per class x language, seed s" in text
    assert "load (1/5/15 min) 1.5/2.0/2.5" in text
    assert "monitoring/java" in text and "1.00 (1/1)" in text
    assert "monitoring/go" in text and "1 not run (workspace error)" in text
    assert "y (error)" in text


def test_the_command_passes_families_sample_and_seed(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}

    def fake(repeats: int, progress: Any, ids: tuple[str, ...], families: tuple[str, ...], per_cell: int | None,
             seed: str) -> dict[str, Any]:
        seen.update(repeats=repeats, ids=ids, families=families, per_cell=per_cell, seed=seed)
        return {"trials": [], "classes": {}}

    monkeypatch.setattr(bd, "bench_devops", fake)
    result = CliRunner().invoke(main, ["bench", "--devops", "--trials", "1", "--family", "monitoring",
                                       "--family", "pipeline", "--per-cell", "2", "--seed", "abc", "--json",
                                       "--quiet", "dir1"])
    assert result.exit_code == 0, result.output
    assert seen == {"repeats": 1, "ids": ("dir1",), "families": ("monitoring", "pipeline"), "per_cell": 2,
                    "seed": "abc"}
    assert json.loads(result.output) == {"trials": [], "classes": {}}
    bad = CliRunner().invoke(main, ["bench", "--per-cell", "2"])
    assert bad.exit_code == 2 and "--family and --per-cell go with --devops" in bad.output


def test_a_sigterm_mid_trial_ends_that_trial_tears_every_workspace_down_and_counts_the_rest_apart(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Stopping the bench (SIGTERM, as a scheduler does, or Ctrl-C) once left a workspace running: the default
    handler killed the process before its clean-up. Now the signal sets a flag; the trial in flight finishes
    through its own clean-up, its workspace is torn down, and nothing else starts."""
    import os
    import signal
    FakeRun.made, FakeRun.broken = [], set()
    ran: list[str] = []

    def fake_trial_on(host: FakeRun, scn: Scenario, agent: str | None, purpose: str) -> Any:
        assert host.interrupts is not None  # the trial sees the same flag
        ran.append(scn.id)
        if len(ran) == 2:
            os.kill(os.getpid(), signal.SIGTERM)  # arrives mid-trial, like a scheduler's stop
        trial = FakeRun(scn)
        trial.id = f"trial-{scn.id}"
        trial.state["results"] = {"agent": {"elapsed": 2.0}, "evaluate": {"elapsed": 4.0}}
        return trial

    def fake_agent_trial(trial: Any, healthy: bool) -> dict[str, Any]:
        return {"status": "completed", "recovered": True, "leftovers": [], "cleanup": "done",
                "evaluations": {"workspace": {"workspace_pass": 1, "stage_pass_rate": 1.0}}}

    monkeypatch.setattr(bd, "Run", FakeRun)
    monkeypatch.setattr(bd, "trial_on", fake_trial_on)
    monkeypatch.setattr(bd, "agent_trial", fake_agent_trial)
    monkeypatch.setattr(bd, "domain_scenarios", lambda domain: pool())
    before = signal.getsignal(signal.SIGTERM)
    report = bd.bench_devops(1, Progress(), families=["build-config"])
    assert signal.getsignal(signal.SIGTERM) == before  # the handler is given back
    assert report["interrupted"] is True
    assert len(ran) == 2  # the trial in flight finished; no other started
    hosts = [h for h in FakeRun.made if h.id.startswith("host-")]
    assert hosts and all(h.cleaned for h in hosts)  # the start measurement's and the trials' workspaces
    statuses = [r["status"] for r in report["trials"]]
    assert statuses.count("completed") == 2 and statuses.count("interrupted") == 5
    build = report["classes"]["build-config"]
    assert (build["scenarios"], build["passed"], build["interrupted"], build["errors"]) == (2, 2, 5, 0)
    text = bd.render(report)
    assert "interrupted: 5 scenario(s) not run and not counted" in text
    assert "not passed:" not in text  # interrupted scenarios are not failures
