"""The monitoring and pipeline families of generated DevOps tasks (orchestrator/devops_projects/monitoring.py,
pipeline.py): what they draw, the scenarios they write, and their proofs with fake provers and checks (no container,
no build)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from orchestrator.devops_projects import catalogue as cat
from orchestrator.devops_projects import generate, monitoring, pipeline, tasks
from orchestrator.devops_projects.run import contract_meta
from orchestrator.evaluation import workspace
from orchestrator.spec import load_scenario
from orchestrator.validate import validate_scenario_file


def project(pid: str = "python-idna") -> cat.Project:
    return cat.load().select([pid])[0]


class FakeHost:
    """What a family's drawer gets from the generator (tasks.Host), with a scripted `make check`."""

    def __init__(self, proj: cat.Project, pristine: Path, work: Path, check: Any = None, seed: str = "s1") -> None:
        self.project, self.pristine, self.work, self.seed = proj, pristine, work, seed
        self.check = check
        self.said: list[str] = []
        self.cache: Any = None
        self.skip: frozenset[str] = frozenset()

    def verify_dir(self, name: str) -> Path:
        path = self.work / "verify" / name
        path.mkdir(parents=True, exist_ok=True)
        for old in path.iterdir():
            shutil.rmtree(old) if old.is_dir() else old.unlink()
        return path

    def say(self, message: str) -> None:
        self.said.append(message)


# -- monitoring ----------------------------------------------------------------------------------------------------

def test_monitoring_candidates_are_every_anomaly_in_every_service_of_the_topology() -> None:
    pool = monitoring.candidates()
    assert len(pool) == len(monitoring.ANOMALIES) * 7 == len(set(pool))
    topology = yaml.safe_load((Path(monitoring.ROLE).parent / "env_workspace" / "files" / "topology.yml").read_text())
    processes = {e["id"] for e in topology["entities"] if e.get("kind") == "process"}
    assert {c.name for c in pool} == processes == set(monitoring.services())
    role = yaml.safe_load((monitoring.ROLE / "meta" / "argument_specs.yml").read_text())
    choices = role["argument_specs"]["inject"]["options"]["fault_workspace_process_anomaly"]["choices"]
    assert set(monitoring.ANOMALIES) == set(choices)


def test_swap_names_exchanges_whole_program_names_only() -> None:
    doc = {"a": "cache-warmer leaks; job-runner is fine; cache-warmer-2 and xcache-warmer are others",
           "b": ["/home/dev/.local/share/services/bin/cache-warmer", "job-runner"]}
    out = monitoring.swap_names(doc, "cache-warmer", "job-runner")
    assert out == {"a": "job-runner leaks; cache-warmer is fine; cache-warmer-2 and xcache-warmer are others",
                   "b": ["/home/dev/.local/share/services/bin/job-runner", "cache-warmer"]}
    assert monitoring.swap_names(doc, "log-shipper", "log-shipper") == doc


@pytest.mark.parametrize("anomaly", monitoring.ANOMALIES)
def test_a_monitoring_instance_is_its_template_beside_the_project_with_the_culprit_renamed(
        tmp_path: Path, anomaly: str) -> None:
    proj = project("java-commons-cli")
    template, _ = monitoring.template(anomaly)
    old = template["faults"][0]["args"]["name"]
    new = next(s for s in monitoring.services() if s != old)
    scenario, truth = monitoring.scenario_docs(proj, monitoring.Candidate(anomaly, new), "s1", 60)
    inst = tasks.Instance(scenario["metadata"]["id"], "monitoring", proj.id, proj.language, "", "", [], {}, [],
                          docs=(scenario, truth))
    folder = generate.write_instance(inst, tmp_path)
    load_scenario(folder / "scenario.yaml")
    assert validate_scenario_file(folder / "scenario.yaml") == []  # the id shape, the topology, the complexity
    written = yaml.safe_load((folder / "scenario.yaml").read_text())
    assert written["metadata"]["id"].startswith("devops-gen-monitoring-java-commons-cli-")
    assert written["metadata"]["class"] == "monitoring" and "java" in written["metadata"]["complexity"]["technologies"]
    assert written["faults"][0]["args"] == {"name": new, "anomaly": anomaly}
    [upstream] = written["environment"]["args"]["upstream"]
    assert upstream["id"] == proj.id and written["environment"]["args"]["projects"] == []
    assert {c["args"]["project"] for p in ("baseline", "manifestation") for c in written["checks"][p]} == {proj.id}
    # The culprit is the new name everywhere: the truth's root cause, the reference, the manifestation's process.
    [root] = [e for e in truth["entities"] if e.get("rootCause")]
    assert root["id"] == new and root["faultType"] == anomaly and truth["scenario"] == written["metadata"]["id"]
    assert f"-xo {new}" in written["checks"]["manifestation"][0]["args"]["command"]
    assert f"-xo {old}" not in written["checks"]["manifestation"][0]["args"]["command"]
    # The baseline still names all seven services, each once.
    baseline = written["checks"]["baseline"][0]["args"]["command"]
    assert sorted(baseline.split("'")[1].split("|")) == sorted(monitoring.services())
    why, scores = monitoring.proof_by_scoring(scenario, truth, tmp_path)
    assert why == "" and scores == {"untouched": 0.0, "wrong_culprit": 0.0, "reference": 1.0}


def test_a_scoring_that_passes_a_wrong_culprit_is_no_proof(tmp_path: Path) -> None:
    scenario, truth = monitoring.scenario_docs(project(), monitoring.Candidate("fd_leak", "job-runner"), "s1")
    truth["entities"].append({"id": "log-shipper", "rootCause": True, "layer": "process", "faultType": "fd_leak"})
    why, _ = monitoring.proof_by_scoring(scenario, truth, tmp_path)
    assert why  # the reference no longer names every root cause, or a wrong answer passes: either way not proven


class FakeProver:
    def __init__(self, refuse: set[str]) -> None:
        self.refuse, self.seen = refuse, []  # type: tuple[set[str], list[str]]

    def prove(self, scenario: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        anomaly = scenario["faults"][0]["args"]["anomaly"]
        self.seen.append(anomaly)
        return (f"the anomaly does not show ({anomaly})", {}) if anomaly in self.refuse else ("", {"live": True})


def test_monitoring_draws_in_the_seed_order_one_anomaly_each_and_keeps_what_is_proven(tmp_path: Path) -> None:
    proj = project()
    host = FakeHost(proj, tmp_path, tmp_path)
    prover = FakeProver({"cpu_spin"})
    report = tasks.Report(proj.id, "monitoring", "s1")
    monitoring.generate(host, report, 4, 40, prover)  # type: ignore[arg-type]
    assert len(report.instances) == 4 and report.where == "workspace"
    kept = [i.provenance["anomaly"] for i in report.instances]
    assert len(set(kept)) == 4 and "cpu_spin" not in kept
    assert all(d.kept or d.reason.startswith("verify: the anomaly does not show") for d in report.draws)
    assert all(i.proof["scores"]["reference"] == 1.0 and i.proof["live"] for i in report.instances)
    again = tasks.Report(proj.id, "monitoring", "s1")
    monitoring.generate(FakeHost(proj, tmp_path, tmp_path), again, 4, 40, FakeProver({"cpu_spin"}))  # type: ignore
    assert [i.id for i in again.instances] == [i.id for i in report.instances]  # reproducible from the seed
    other = tasks.Report(proj.id, "monitoring", "s2")
    monitoring.generate(FakeHost(proj, tmp_path, tmp_path, seed="s2"), other, 4, 40, FakeProver(set()))  # type: ignore
    assert [i.id for i in other.instances] != [i.id for i in report.instances]


def test_a_public_instance_is_skipped_before_its_proof(tmp_path: Path) -> None:
    """A private split's generator is told the public split's ids: such a draw is not proven (the live proof is
    minutes), it is a draw with the reason, and the next candidate takes its place."""
    proj = project()
    first = tasks.Report(proj.id, "monitoring", "s1")
    monitoring.generate(FakeHost(proj, tmp_path, tmp_path), first, 2, 40, FakeProver(set()))  # type: ignore
    public = first.instances[0]
    host = FakeHost(proj, tmp_path, tmp_path)
    host.skip = frozenset({public.id})
    prover = FakeProver(set())
    again = tasks.Report(proj.id, "monitoring", "s1")
    monitoring.generate(host, again, 2, 40, prover)  # type: ignore[arg-type]
    assert public.provenance["anomaly"] not in prover.seen
    assert again.draws[0].reason == "in the public split"
    assert again.instances[0].id == first.instances[1].id  # the next candidate in the seed's order
    assert public.id not in {i.id for i in again.instances} and len(again.instances) == 2


# -- pipeline ------------------------------------------------------------------------------------------------------

PRISTINE = {"setup.cfg": "[options]\npython_requires = >=3.8\n",
            "pkg/lib.py": "def double(x):\n    return x * 2\n\n\ndef triple(x):\n    return x * 3\n",
            "tests/test_lib.py": "from pkg.lib import double\n\n\ndef test_double():\n    assert double(2) == 4\n"}
BUILD_FAULT = {"path": "setup.cfg", "old": ">=3.8", "new": ">=3.99"}
BUG = {"path": "pkg/lib.py", "old": "x * 2", "new": "x + 2"}
SURVIVOR = {"path": "pkg/lib.py", "old": "x * 3", "new": "x + 3"}
"""A bug no test of the project catches (test generation's kind)."""
HIDE = {"path": "tests/test_lib.py", "old": "\n\ndef test_double():\n    assert double(2) == 4\n", "new": "\n"}


def fake_check(root: Path) -> tuple[int, int, int, bool]:
    """`make check` of the toy project: the build fails on the raised python_requires; each test function that
    exists runs; a test of double fails on BUG, one of triple on SURVIVOR."""
    if ">=3.99" in (root / "setup.cfg").read_text():
        return 2, 0, 0, False
    tests = [t for t in (root / "tests").glob("test_*.py")]
    names = [line for t in tests for line in t.read_text().splitlines() if line.startswith("def test_")]
    lib = (root / "pkg" / "lib.py").read_text()
    failed = sum(1 for n in names if ("x + 2" in lib and "double" in n) or ("x + 3" in lib and "triple" in n))
    return (1 if failed else 0), len(names) - failed, failed, True


def write_source(out: Path, pristine: Path, family: str, iid: str, fault: list[dict[str, Any]],
                 reference: list[dict[str, Any]], stage: dict[str, Any], **prov: Any) -> None:
    inst = tasks.Instance(iid, family, "python-idna", "python", f"title {iid}", f"goal of {iid}", fault, stage,
                          reference, provenance={"pristine_tests": 1, "seed": "s1", **prov},
                          proof={"proven": iid})
    generate.write_instance(inst, out, pristine)


@pytest.fixture()
def sources(tmp_path: Path) -> Path:
    pristine = tmp_path / "pristine"
    for rel, text in PRISTINE.items():
        (pristine / rel).parent.mkdir(parents=True, exist_ok=True)
        (pristine / rel).write_text(text)
    out = tmp_path / "out"
    rev = {"path": "setup.cfg", "old": ">=3.99", "new": ">=3.8"}
    write_source(out, pristine, "build", "devops-gen-build-python-idna-00000001", [BUILD_FAULT], [rev],
                 {"task": "fix-build", "kind": "fix", "project": "python-idna"}, cause="toolchain-target")
    bound = {"path": "setup.cfg", "old": "python_requires = >=3.8", "new": "python_requires = >=3.99,<4"}
    write_source(out, pristine, "build", "devops-gen-build-python-idna-00000005", [bound],
                 [{"path": "setup.cfg", "old": bound["new"], "new": bound["old"]}],
                 {"task": "fix-build", "kind": "fix", "project": "python-idna"}, cause="toolchain-target")
    write_source(out, pristine, "issue", "devops-gen-issue-python-idna-00000002", [BUG, HIDE],
                 [{"path": "pkg/lib.py", "old": "x + 2", "new": "x * 2"}],
                 {"task": "resolve-issue", "kind": "fix", "project": "python-idna"})
    test = {"path": "tests/test_new.py",
            "content": "from pkg.lib import triple\n\n\ndef test_new_triple():\n    assert triple(3) == 9\n"}
    write_source(out, pristine, "testgen", "devops-gen-testgen-python-idna-00000003", [SURVIVOR], [test],
                 {"task": "write-test", "kind": "write-tests", "project": "python-idna", "bug": [SURVIVOR]})
    # A test-generation instance whose workspace hides the project's own tests: no source (the fix stage puts
    # them back and they catch the bug).
    write_source(out, pristine, "testgen", "devops-gen-testgen-python-idna-00000004", [BUG, HIDE],
                 [{**test, "path": "tests/test_lib2.py"}],
                 {"task": "write-test", "kind": "write-tests", "project": "python-idna", "bug": [BUG]},
                 workspace_tests=0)
    return tmp_path


def test_pipeline_sources_are_build_issue_and_recorded_testgen_instances_of_the_project(sources: Path) -> None:
    found = pipeline.load_sources([sources / "out", sources / "out"], "python-idna")
    assert [s.id[-8:] for s in found] == ["00000001", "00000005", "00000002", "00000003"]
    assert pipeline.load_sources([sources / "out"], "go-semver") == []
    assert [(b.id[-1], s.id[-1]) for b, s in pipeline.pairs(found)] == [("1", "2"), ("1", "3"), ("5", "2"), ("5", "3")]


def test_pipelines_are_proven_written_in_the_hand_written_shape_and_each_source_used_once(sources: Path) -> None:
    proj = project()
    host = FakeHost(proj, sources / "pristine", sources / "work", fake_check)
    report = tasks.Report(proj.id, "pipeline", "s1")
    pipeline.generate(host, report, 5, 20, [sources / "out"])  # type: ignore[arg-type]
    # Two build instances, an issue and a test generation: two pipelines, each source in one.
    assert len(report.instances) == 2 and len(report.draws) == 2, [d.reason for d in report.draws]
    assert len({s for i in report.instances for s in i.provenance["stages"]}) == 4
    assert {i.provenance["second_family"] for i in report.instances} == {"issue", "testgen"}
    for inst in report.instances:
        check_written(inst, sources)


def check_written(inst: tasks.Instance, sources: Path) -> None:
    folder = generate.write_instance(inst, sources / "written", sources / "pristine")
    load_scenario(folder / "scenario.yaml")
    assert validate_scenario_file(folder / "scenario.yaml") == []
    scenario = yaml.safe_load((folder / "scenario.yaml").read_text())
    truth = yaml.safe_load((folder / "ground_truth.yaml").read_text())
    assert scenario["metadata"]["class"] == "pipeline" and len(scenario["tasks"]) == 2
    stages = truth["workspace"]["stages"]
    own = {"task": "fix-build", "kind": "fix", "project": "python-idna"}
    if stages[1]["kind"] == "write-tests":
        assert stages[0] == own  # the bug survives the project's tests: nothing to withhold
    else:
        # The build stage is scored without the issue's hidden tests, and the build's fix alone passes it.
        assert stages[0] == {**own, "withheld_tests": [HIDE], "withheld_test_count": 1}
        assert inst.proof["build_stage"] == {"rc": 0, "passed": 0, "failed": 0, "withheld_edits": 1,
                                             "withheld_test_count": 1}
    assert [t["id"] for t in scenario["tasks"]] == [s["task"] for s in stages]
    assert scenario["faults"][0]["args"]["edits"][0]["path"] == "setup.cfg"
    assert {e["layer"] for e in truth["entities"]} == {"configuration", "application"}
    assert truth["entities"][0]["faultType"] == "toolchain_mismatch"
    if stages[1]["kind"] == "write-tests":
        assert stages[1]["bug"] == [SURVIVOR] and inst.proof["write_tests"]["from"].endswith("00000003")
    else:
        assert inst.proof["build_fixed_only"]["failed"] == 1  # the issue stage still fails with the build fixed
    assert inst.proof["untouched"]["rc"] != 0
    meta = json.loads((folder / "generated.json").read_text())
    assert meta["family"] == "pipeline" and len(meta["provenance"]["stages"]) == 2


def test_a_pipeline_whose_second_stage_the_build_fix_already_passes_is_dropped(sources: Path) -> None:
    proj = project()
    build, _, issue, _ = pipeline.load_sources([sources / "out"], proj.id)
    # A check that never runs the project's tests: fixing the build alone passes everything.
    host = FakeHost(proj, sources / "pristine", sources / "work",
                    lambda root: (2, 0, 0, False) if ">=3.99" in (root / "setup.cfg").read_text() else (0, 1, 0, True))
    why, proof = pipeline.prove(host, build, issue)  # type: ignore[arg-type]
    assert why == "the build's fix alone passes the issue stage (one stage, not two)", proof
    host = FakeHost(proj, sources / "pristine", sources / "work", fake_check)
    assert pipeline.prove(host, build, issue)[0] == ""  # type: ignore[arg-type]


def test_the_build_stage_of_an_issue_pipeline_is_scored_against_its_own_cause_only(sources: Path) -> None:
    """An agent that repaired the build and not yet the issue passes the first stage and fails the second; one that
    repaired both passes both; one that repaired only the issue passes neither (the build still fails)."""
    proj = project()
    host = FakeHost(proj, sources / "pristine", sources / "work", fake_check)
    report = tasks.Report(proj.id, "pipeline", "s1")
    pipeline.generate(host, report, 5, 20, [sources / "out"])  # type: ignore[arg-type]
    inst = next(i for i in report.instances if i.provenance["second_family"] == "issue")
    assert inst.docs is not None
    truth = inst.docs[1]
    meta = {**contract_meta(proj, 1), "check": "make check", "report": "pytest"}
    build, _, issue, _ = pipeline.load_sources([sources / "out"], proj.id)
    shutil.copytree(sources / "pristine", sources / "src" / proj.id)  # where the evaluator finds the pristine tree

    def scored(edits: list[dict[str, Any]], name: str) -> list[bool]:
        trees = sources / name / "trees"
        tasks.materialise(sources / "pristine", [*inst.fault_edits, *edits], trees / proj.id)
        scores = workspace.score_workspace(
            None, truth, {"workspace": {"tree": str(trees)}}, sources / name / "work", source=sources / "src",
            projects={proj.id: meta}, check=lambda root, _p, _m: workspace.CheckRun(*fake_check(root)[:3], False, 0.0,
                                                                                   "", True))
        return [st["passed"] for st in scores["stages"]]

    assert scored(build.reference, "build-only") == [True, False]
    assert scored([*build.reference, *issue.reference], "both") == [True, True]
    assert scored(issue.reference, "issue-only") == [False, False]
    # Without the withheld tests (the stage as written before), the build-only agent failed the build stage too.
    bare = {**truth, "workspace": {"stages": [{k: v for k, v in truth["workspace"]["stages"][0].items()
                                               if not k.startswith("withheld")}, truth["workspace"]["stages"][1]]}}
    trees = sources / "bare" / "trees"
    tasks.materialise(sources / "pristine", [*inst.fault_edits, *build.reference], trees / proj.id)
    scores = workspace.score_workspace(
        None, bare, {"workspace": {"tree": str(trees)}}, sources / "bare" / "work", source=sources / "src",
        projects={proj.id: meta}, check=lambda root, _p, _m: workspace.CheckRun(*fake_check(root)[:3], False, 0.0,
                                                                               "", True))
    assert [st["passed"] for st in scores["stages"]] == [False, False]


def test_a_written_issue_pipeline_is_refused_when_its_reference_fails_the_build_stage(sources: Path) -> None:
    proj = project()
    build, _, issue, _ = pipeline.load_sources([sources / "out"], proj.id)
    fault, reference = [*build.fault, *issue.fault], pipeline.reference_of(build, issue)
    stages = [pipeline.build_stage(proj.id, [HIDE], 1), pipeline.second_task(issue)]
    pristine = sources / "pristine"
    why, proof = generate.verify_pipeline(proj, pristine, 1, stages, fault, reference, fake_check,  # type: ignore
                                           sources / "v1")
    assert why == "" and proof["fix-build"] == {"rc": 0, "passed": 0, "failed": 0}, proof
    # A withheld edit that no longer applies to the project's tests is a reason, not a crash.
    stale = [pipeline.build_stage(proj.id, [{**HIDE, "old": "def test_gone():"}], 1), pipeline.second_task(issue)]
    why, _ = generate.verify_pipeline(proj, pristine, 1, stale, fault, reference, fake_check,  # type: ignore
                                      sources / "v2")
    assert why.startswith("stage fix-build: an edit does not apply")


def test_a_pipeline_needs_sources(tmp_path: Path) -> None:
    proj = project()
    report = tasks.Report(proj.id, "pipeline", "s1")
    pipeline.generate(FakeHost(proj, tmp_path, tmp_path), report, 1, 5, [tmp_path])  # type: ignore[arg-type]
    assert "no build instance" in report.error and "python-idna" in report.error and not report.draws


def test_a_folder_that_is_no_instance_is_named(tmp_path: Path) -> None:
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "generated.json").write_text('{"id": "a", "family": "build", "project": "python-idna"}')
    (tmp_path / "x" / "scenario.yaml").write_text("metadata: {}\n")
    (tmp_path / "x" / "ground_truth.yaml").write_text("{}\n")
    with pytest.raises(ValueError, match="not an instance"):
        pipeline.load_sources([tmp_path], "python-idna")


def test_a_written_pipeline_is_proven_again_from_its_files(sources: Path) -> None:
    proj = project()
    build, _, _, testgen = pipeline.load_sources([sources / "out"], proj.id)
    fault, reference = [*build.fault, *testgen.fault], pipeline.reference_of(build, testgen)
    stages = [{"task": "fix-build", "kind": "fix", "project": proj.id}, pipeline.second_task(testgen)]
    pristine = sources / "pristine"
    why, proof = generate.verify_pipeline(proj, pristine, 1, stages, fault, reference, fake_check,  # type: ignore
                                           sources / "v1")
    assert why == "" and proof["write-test"]["buggy"]["failed"] == 1, proof
    # A reference test that passes on the bug too proves nothing.
    weak = [*build.reference, {"path": "tests/test_new.py", "content": "def test_nothing():\n    assert True\n"}]
    why, _ = generate.verify_pipeline(proj, pristine, 1, stages, fault, weak, fake_check,  # type: ignore
                                       sources / "v2")
    assert why.startswith("stage write-test: the reference test does not fail on the mutant")


def test_a_pipeline_that_chains_a_public_instance_is_skipped_with_the_one_it_chains(tmp_path: Path) -> None:
    host = FakeHost(project(), tmp_path, tmp_path)
    host.skip = frozenset({"devops-gen-issue-p-1"})
    chained = tasks.Draw("pipeline", "p", "devops-gen-build-p-0 then devops-gen-issue-p-1")
    assert tasks.skipped(host, chained, "devops-gen-build-p-0", "devops-gen-issue-p-1")  # type: ignore[arg-type]
    assert chained.reason == "chains devops-gen-issue-p-1, in the public split"
    own = tasks.Draw("pipeline", "p", "devops-gen-build-p-0 then devops-gen-issue-p-2")
    assert not tasks.skipped(host, own, "devops-gen-build-p-0", "devops-gen-issue-p-2")  # type: ignore[arg-type]
    assert own.reason == ""
