"""Pipeline tasks on a real upstream project (issue 37, family ``pipeline``): chained stages.

A pipeline joins two verified instances of the same project, as the hand-written ``devops-pipeline-*`` scenarios
do: a broken build (a ``build`` instance) and then either an issue to resolve (an ``issue`` instance: fix + fix) or
a bug to catch with a test (a ``testgen`` instance whose reference is a recorded test: fix + write-tests). Both
faults are in the workspace at once; each stage is scored on its own by ``evaluate_workspace``.

The sources are the instance folders `opsbench devops generate` wrote (``generated.json`` beside the scenario), so a
pipeline is as reproducible as they are: the seed orders the pairs per project (`tasks.draw_order`), and a source
instance joins at most one kept pipeline. A test-generation instance whose workspace hides tests of the project's
own (its fault carries more than the bug) is no source: the fix stage puts those tests back, and they catch the bug
the agent is not asked to fix.

A pair is kept only when proven by ``make check`` on fresh copies built as the evaluator builds them: the untouched
workspace fails, the build's fix alone does not pass an issue stage (the stages are really two) but does pass the
build stage, and the reference (both fixes, or the fix and the recorded test) passes. The build stage is scored
against its own cause only: the issue's fault hid the tests that catch its bug, the evaluator puts the project's
tests back, so the build stage hides those again (``withheld_tests``: the issue fault's edits of test files, and
how many tests they take out, measured on the build's fix alone). The write-tests stage is scored on the pristine
project with the bug and without, whatever the build fault: its proof is the test-generation instance's, which had
the same inputs, and is carried over.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from orchestrator.devops_projects.run import contract_meta
from orchestrator.devops_projects.tasks import (
    Draw,
    Host,
    Instance,
    Report,
    draw_order,
    instance_id,
    skipped,
    verify_fix,
)

SOURCE_FAMILIES = ("build", "issue", "testgen")


@dataclass(frozen=True)
class Source:
    """A verified instance read back from its folder."""

    id: str
    family: str
    project: str
    language: str
    title: str
    goal: str
    fault: list[dict[str, Any]]
    reference: list[dict[str, Any]]
    stage: dict[str, Any]
    provenance: dict[str, Any] = field(default_factory=dict)
    proof: dict[str, Any] = field(default_factory=dict)

    @property
    def usable(self) -> bool:
        if self.family != "testgen":
            return True
        return self.fault == list(self.stage.get("bug", [])) and "workspace_tests" not in self.provenance


def read_source(folder: Path) -> Source:
    """One instance folder of `devops generate` (scenario.yaml, ground_truth.yaml, generated.json)."""
    meta = json.loads((folder / "generated.json").read_text())
    scenario = yaml.safe_load((folder / "scenario.yaml").read_text())
    truth = yaml.safe_load((folder / "ground_truth.yaml").read_text())
    try:
        return Source(meta["id"], meta["family"], meta["project"], meta["language"],
                      scenario["metadata"]["name"], scenario["tasks"][0]["goal"],
                      list(scenario["faults"][0]["args"]["edits"]), list(scenario["reference"][0]["args"]["edits"]),
                      dict(truth["workspace"]["stages"][0]), dict(meta.get("provenance", {})),
                      dict(meta.get("proof", {})))
    except (KeyError, IndexError, TypeError) as exc:
        raise ValueError(f"{folder}: not an instance of `opsbench devops generate` (missing {exc})") from None


def load_sources(dirs: list[Path], project: str) -> list[Source]:
    """The build, issue and usable test-generation instances of `project` under `dirs` (output folders of `devops
    generate`, or instance folders), each id once, in id order."""
    found: dict[str, Source] = {}
    for d in dirs:
        metas = [d / "generated.json"] if (d / "generated.json").is_file() else sorted(d.glob("*/generated.json"))
        for meta in metas:
            head = json.loads(meta.read_text())
            if head.get("project") != project or head.get("family") not in SOURCE_FAMILIES or head["id"] in found:
                continue
            src = read_source(meta.parent)
            if src.usable:
                found[src.id] = src
    return [found[k] for k in sorted(found)]


def pairs(sources: list[Source]) -> list[tuple[Source, Source]]:
    builds = [s for s in sources if s.family == "build"]
    seconds = [s for s in sources if s.family in ("issue", "testgen")]
    return [(b, s) for b in builds for s in seconds]


def second_task(src: Source) -> dict[str, Any]:
    """The second stage: the source's own, under a task id of its kind."""
    if src.family == "issue":
        return {"task": "resolve-issue", "kind": "fix", "project": src.project}
    return {"task": "write-test", "kind": "write-tests", "project": src.project, "bug": list(src.stage["bug"])}


def reference_of(build: Source, second: Source) -> list[dict[str, Any]]:
    """Both references: the build's fix, then the issue's fix or the recorded test."""
    return [*build.reference, *second.reference]


def withheld_tests(second: Source, meta: dict[str, Any]) -> list[dict[str, Any]]:
    """The edits of the second stage's fault that hide the project's tests catching its bug (test files only): the
    build stage applies them again, so it is not scored on a cause it does not own. None for a test-generation
    source (its bug survives the project's tests)."""
    from orchestrator.evaluation.workspace import matches, protected_tests

    if second.family != "issue":
        return []
    return [e for e in second.fault if matches(e["path"], protected_tests(meta))]


def build_stage(project: str, withheld: list[dict[str, Any]], withheld_count: int) -> dict[str, Any]:
    """The first stage of the ground truth: fix the build, scored without the later stage's tests."""
    stage: dict[str, Any] = {"task": "fix-build", "kind": "fix", "project": project}
    if withheld:
        stage.update(withheld_tests=withheld, withheld_test_count=withheld_count)
    return stage


def docs(build: Source, second: Source, iid: str, pristine: Path | None,
         stage1: dict[str, Any] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """(scenario.yaml, ground_truth.yaml) of a pipeline, in the shape of the hand-written devops-pipeline-*."""
    from orchestrator.complexity import complexity_level, complexity_value
    from orchestrator.devops_projects.scenario_parts import BUILD_FAULT_TYPES, environment_of, manifest_command

    project, lang = build.project, build.language
    fault = [*build.fault, *second.fault]
    tests = int(build.provenance.get("pristine_tests", 0))
    stage2 = second_task(second)
    what = "resolve an issue" if second.family == "issue" else "write a test for a bug"
    value = complexity_value(2, 5, 1)
    env_inst = Instance(iid, "pipeline", project, lang, "", "", fault, {}, [], provenance={"pristine_tests": tests})
    scenario = {
        "apiVersion": "opsbench/v1", "kind": "Scenario",
        "metadata": {"id": iid, "name": f"Repair the {project} build, then {what}", "generated": True,
                     "description": f"Generated from {project}: two stages, the build instance {build.id} "
                                    f"({build.provenance.get('cause', 'build cause')}) and then {second.id} "
                                    f"({second.family}), both faults in the workspace at once. Proven by make check "
                                    "on fresh copies: the untouched state fails, the reference passes.",
                     "version": 1, "domain": "DevOps", "class": "pipeline",
                     "complexity": {"level": complexity_level(value), "propagationLength": 2, "resolutionSteps": 5,
                                    "technologies": [lang], "value": value},
                     "tags": ["devops", "pipeline", project, "generated"]},
        "environment": environment_of(env_inst),
        "faults": [{"name": "breakage", "role": "fault_workspace_edit", "args": {"project": project, "edits": fault}}],
        "checks": {
            "baseline": [{"name": "project-at-baseline", "role": "check_workspace",
                          "args": {"project": project, "command": 'git diff --quiet HEAD && test -z "$(git status '
                                                                  '--porcelain)"'}, "timeout": 30}],
            "manifestation": [{"name": "faults-in-place", "role": "check_workspace",
                               "args": {"project": project, "command": manifest_command(fault, pristine)},
                               "timeout": 30}]},
        "tasks": [{"id": "fix-build", "kind": "fix", "goal": build.goal},
                  {"id": stage2["task"], "kind": stage2["kind"],
                   "goal": "Once the build works again (the first task): " + second.goal}],
        "budget": {"wallClockSeconds": 2400},
        "evaluation": {"evaluators": [{"role": "evaluate_workspace"}]},
        "reference": [{"name": "reference-fix", "role": "solve_workspace_edit",
                       "args": {"project": project, "edits": reference_of(build, second)}}],
    }
    truth = {"apiVersion": "opsbench/v1", "kind": "GroundTruth", "scenario": iid,
             "entities": [{"id": f"{project}-build", "rootCause": True, "layer": "configuration",
                           "faultType": BUILD_FAULT_TYPES.get(build.provenance.get("cause", ""), "broken_build_file")},
                          {"id": project, "rootCause": True, "layer": "application",
                           "faultType": "wrong_computation"}],
             "workspace": {"stages": [stage1 or build_stage(project, [], 0), stage2]}}
    return scenario, truth


def prove(host: Host, build: Source, second: Source) -> tuple[str, dict[str, Any]]:
    """('' when proven, else why not, the figures): `make check` on fresh copies as the evaluator makes them."""
    from orchestrator.devops_projects.tasks import materialise
    from orchestrator.evaluation.workspace import prepare_fix

    tests = int(build.provenance.get("pristine_tests", 0))
    meta = contract_meta(host.project, tests)
    fault = [*build.fault, *second.fault]
    why, proof = verify_fix(host.pristine, meta, tests, fault, reference_of(build, second), host.check,
                            host.verify_dir("pipeline"), visible_must_pass=False)
    if why:
        return why, proof
    if second.family == "issue":
        # The build's fix alone: the issue stage (the project's tests put back) must still fail.
        work = host.verify_dir("pipeline-build-only")
        try:
            materialise(host.pristine, [*fault, *build.reference], work / "tree")
        except (OSError, ValueError) as exc:
            return f"an edit does not apply: {exc}", proof
        prepare_fix(work / "tree", host.pristine, meta, [], work / "scored")
        rc, passed, failed, _ = host.check(work / "scored")
        proof["build_fixed_only"] = {"rc": rc, "passed": passed, "failed": failed}
        if rc == 0 and not failed and passed >= tests:
            return "the build's fix alone passes the issue stage (one stage, not two)", proof
        # ... and passes the build stage, scored as the evaluator scores it: without the tests.
        withheld = withheld_tests(second, meta)
        prepare_fix(work / "tree", host.pristine, meta, withheld, work / "build-stage")
        rc, passed, failed, _ = host.check(work / "build-stage")
        proof["build_stage"] = {"rc": rc, "passed": passed, "failed": failed, "withheld_edits": len(withheld),
                                "withheld_test_count": max(tests - passed, 0)}
        if rc != 0 or failed:
            return ("the build's fix alone does not pass its own stage (scored without the issue's tests): the "
                    "stages are not separable"), proof
    else:
        proof["write_tests"] = {"from": second.id, **second.proof}
    return "", proof


def generate(host: Host, report: Report, count: int, max_draws: int, sources: list[Path]) -> None:
    """Draw pairs of host.project's instances under `sources` in the seed's order, prove each, keep the proven
    ones; each source instance joins one kept pipeline at most."""
    project = host.project
    found = load_sources(sources, project.id)
    pool = pairs(found)
    report.candidates = len(pool)
    if not pool:
        report.error = (f"project {project.id}, step pipeline: no build instance with an issue or a recorded "
                        f"test-generation instance under {', '.join(map(str, sources))} (draw those first)")
        return
    used: set[str] = set()
    for build, second in draw_order(pool, host.seed, project.id, "pipeline"):
        if len(report.instances) >= count or len(report.draws) >= max_draws:
            break
        if build.id in used or second.id in used:
            continue
        what = f"{build.id} then {second.id}"
        draw = Draw("pipeline", project.id, what)
        report.draws.append(draw)
        if skipped(host, draw, build.id, second.id):
            continue
        t0 = time.monotonic()
        why, proof = prove(host, build, second)
        draw.verify_s = round(time.monotonic() - t0, 2)
        if why:
            draw.reason = f"verify: {why}"
            continue
        iid = instance_id("pipeline", project.id, what)
        own = proof.get("build_stage", {})
        stage1 = build_stage(project.id, withheld_tests(second, contract_meta(project, 0)),
                             int(own.get("withheld_test_count", 0)))
        scenario, truth = docs(build, second, iid, host.pristine, stage1)
        report.instances.append(Instance(
            iid, "pipeline", project.id, project.language, scenario["metadata"]["name"],
            scenario["tasks"][1]["goal"], scenario["faults"][0]["args"]["edits"], truth["workspace"]["stages"][0],
            scenario["reference"][0]["args"]["edits"],
            provenance={"stages": [build.id, second.id], "second_family": second.family, "seed": host.seed,
                        "pristine_tests": int(build.provenance.get("pristine_tests", 0)),
                        "cause": build.provenance.get("cause", "")},
            proof=proof, docs=(scenario, truth)))
        used.update((build.id, second.id))
        draw.kept, draw.instance = True, iid
        host.say(f"{project.id}: kept {iid} ({what})")

