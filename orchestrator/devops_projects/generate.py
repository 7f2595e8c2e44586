"""DevOps tasks drawn from the real upstream projects, kept only when proven (issue 37, part 2).

Three families, each drawn deterministically from a seed per project (`random.Random(f"{seed}/{project}/{family}")`
shuffles the project's candidates, listed in a fixed order):

* ``issue`` (issue-resolving): a mutation of the project's own code (bench.py screens it on the host) kept when at
  most MAX_HIDDEN test functions the project already has fail on it and pass on the original. Those tests are
  removed from the agent's workspace (they come back with the protected files when evaluate_workspace rebuilds a
  fresh copy), and the issue text is written from what they observed (issue_text.py), never naming them or the
  mutation.
* ``testgen`` (test-generation): a mutation no existing test catches, with a hidden test that does (a differential
  test recorded from the original's behaviour, or the project's own tests hidden, testgen.py); the reference
  solution adds that test. Hidden-test mutants come from a fixed share of the candidates (`testgen.testgen_share`)
  the issue family never draws, so each family's draw is the same whether or not the other ran.
* ``build`` (build-config): one of the build-cause families applied to the project's real build file
  (buildcfg.py).
* ``monitoring``: a process anomaly of the hand-written devops-monitor-* scenarios beside the project, proven live
  in the workspace image (monitoring.py).
* ``pipeline``: a build instance and an issue or test-generation instance of the same project chained, from the
  instances already written (pipeline.py).

Every drawn candidate that survives screening becomes an instance only after `verify`: the workspace as the agent
gets it, the untouched state as evaluate_workspace scores it (must fail) and the reference solution (must pass),
each a `make check` through the project's contract on a fresh copy (`orchestrator.evaluation.workspace`'s
`prepare_fix`/`prepare_variant` build those copies, as the evaluator does). A dropped draw keeps its reason.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import yaml

from orchestrator.devops_projects import buildcfg, issue_text, monitoring, mutate, pipeline, testgen
from orchestrator.devops_projects import catalogue as cat
from orchestrator.devops_projects.bench import Bench, Suite
from orchestrator.devops_projects.fetch import CONTRACT_FILE, Cache, StepFailed
from orchestrator.devops_projects.run import contract_meta, default_cache
from orchestrator.devops_projects.scenario_parts import BUILD_FAULT_TYPES, environment_of, manifest_command
from orchestrator.devops_projects.tasks import (
    Checker,
    Draw,
    Instance,
    Report,
    WorkspaceChecker,
    draw_order,
    instance_id,
    materialise,
    package_name,
    skipped,
    verify_fix,
)
from orchestrator.errors import OpsBenchError

FAMILIES = ("issue", "testgen", "build", "monitoring", "pipeline")
YIELDS = Path(__file__).resolve().parent / "yields.json"
"""Recorded yields (`opsbench devops generate --record`), per project and family: what docs/devops-projects.md
shows. Figures only: the instances themselves are never committed (a make target redraws them)."""
MAX_HIDDEN = 3
"""An issue hides at most this many test functions: a mutant more tests catch is a broken library, not an issue."""
CLASS = {"issue": "issue-resolving", "testgen": "test-generation", "build": "build-config",
         "monitoring": "monitoring", "pipeline": "pipeline"}
# The ground truth's fault type of each build cause (the hand-written devops-build-* scenarios' types).


class Generator:
    """Draws and verifies the instances of one project and family."""

    def __init__(self, project: cat.Project, cache: Cache, work: Path, seed: str,
                 say: Callable[[str], None] = lambda _m: None, where: str = "host",
                 sources: list[Path] | None = None, skip: frozenset[str] = frozenset()) -> None:
        self.project, self.cache, self.work, self.seed, self.say = project, cache, work, seed, say
        self.skip = skip
        """Instance ids not to draw (a private split's public ones): skipped before any screening or proof."""
        self.where = where
        self.sources = sources or []
        """Output folders of earlier draws, where a pipeline finds the instances it chains."""
        work.mkdir(parents=True, exist_ok=True)
        self.bench = Bench(project, cache, work / "bench")
        self.pristine = cache.tree(project)
        self.meta = contract_meta(project)
        self.tests = 0
        # Screening runs on the host; the proof where `where` says (the workspace image is where evaluate_workspace
        # runs: its Go 1.19 and the host's Go 1.26 disagree on some build causes).
        self.check = WorkspaceChecker(project, cache) if where == "workspace" else Checker(project, cache,
                                                                                           self.bench.env())
        self.prepared = False
        self.screened: dict[tuple[str, int, int, str, str], Suite] = {}
        self.kept: set[tuple[str, int, int, str, str]] = set()

    def screen(self, m: mutate.Mutation, edit: dict[str, Any]) -> Suite:
        """The project's tests on the mutant (each mutant run once, whichever family asks)."""
        if m.key not in self.screened:
            with self.bench.applied([edit]):
                self.screened[m.key] = self.bench.run()
        return self.screened[m.key]

    def pristine_tests(self) -> int:
        """How many test cases the pristine project's `make check` passes (the count the evaluation expects)."""
        with tempfile.TemporaryDirectory(dir=self.work) as tmp:
            copy = Path(tmp) / self.project.id
            materialise(self.pristine, [], copy)
            rc, passed, failed, found = self.check(copy)
        if rc != 0 or failed or not found or not passed:
            raise StepFailed(self.project.id, "test", f"the pristine project's make check does not pass (exit {rc}, "
                                                      f"{passed} passed, {failed} failed): dropped from generation")
        return passed

    def run(self, family: str, count: int, max_draws: int) -> Report:
        report = Report(self.project.id, family, self.seed, where=self.where)
        started = time.monotonic()
        try:
            if family == "monitoring":  # no make check: proven live beside the project
                monitoring.generate(self, report, count, max_draws)
            elif family == "pipeline":  # its sources carry the pristine test count they were proven with
                pipeline.generate(self, report, count, max_draws, self.sources)
            else:
                self._edits(report, family, count, max_draws)
        except StepFailed as exc:
            report.error = str(exc)
        report.seconds = time.monotonic() - started
        return report

    def _edits(self, report: Report, family: str, count: int, max_draws: int) -> None:
        """The families whose faults are edits proven by make check: issue, testgen, build."""
        if not self.tests:
            self.tests = self.pristine_tests()
            self.meta = contract_meta(self.project, self.tests)
        if family == "build":
            self._build(report, count, max_draws)
            return
        if not self.prepared:
            baseline = self.bench.prepare()
            self.prepared = True
            self.say(f"{self.project.id}: baseline {baseline.passed} passed in {self.bench.baseline_s:.1f} s")
        if family == "issue":
            self._issues(report, count, max_draws)
        else:
            testgen.generate(self, report, count, max_draws)

    def verify_dir(self, name: str) -> Path:
        path = self.work / "verify" / name
        if path.exists():
            shutil.rmtree(path)
        path.mkdir(parents=True)
        return path

    # -- issue-resolving -------------------------------------------------------------------------------------------

    def _issues(self, report: Report, count: int, max_draws: int) -> None:
        # The mutants test generation draws its hidden tests from are not the issue family's (a fixed split by seed:
        # neither family's draw depends on the other having run).
        candidates = [m for m in self.bench.mutations() if not testgen.testgen_share(self.seed, self.project.id, m)]
        report.candidates = len(candidates)
        for m in draw_order(candidates, self.seed, self.project.id, "issue"):
            if len(report.instances) >= count or len(report.draws) >= max_draws:
                break
            draw = Draw("issue", self.project.id, m.describe())
            report.draws.append(draw)
            if skipped(self, draw):
                continue
            t0 = time.monotonic()
            text = (self.bench.root / m.path).read_text(encoding="utf-8")
            edit = mutate.mutation_edit(text, m)
            if self.project.language == "python" and not mutate.python_compiles(mutate.apply_edit(text, edit)):
                draw.reason = "does not compile"
                continue
            if m.key in self.kept:  # never once the split holds (test generation keeps its share or survivors only)
                draw.reason = "kept by another family"
                continue
            suite = self.screen(m, edit)
            draw.screen_s = round(time.monotonic() - t0, 2)
            reason = self._issue_screen(suite)
            if reason:
                draw.reason = reason
                continue
            self._keep_issue(report, draw, m, edit, suite)

    @staticmethod
    def _issue_screen(suite: Suite) -> str:
        if suite.broken:
            return ("does not compile: " if "build" in suite.broken else "breaks the test run: ") + suite.broken[:200]
        if not suite.failed:
            return "no existing test fails (a surviving mutant)"
        if len(suite.failed) > MAX_HIDDEN:
            return f"too many tests fail: {len(suite.failed)} test functions, at most {MAX_HIDDEN} are hidden"
        return ""

    def _keep_issue(self, report: Report, draw: Draw, m: mutate.Mutation, edit: dict[str, Any], suite: Suite) -> None:
        failures = list(suite.failed.values())
        title, body = issue_text.write_issue(self.project.id, self.project.language, package_name(self.project),
                                             failures)
        # A Go failure's `file` is its package's folder (a package name belongs in an issue); a Python one's the
        # test file.
        forbidden = sorted({f.test for f in failures} | {Path(f.file).name for f in failures
                                                         if f.file.endswith((".py", ".go", ".java"))}
                           | {k.split("::", 1)[1].split(".")[0] for k in suite.failed})
        changed = m.after.strip()
        if len(changed) >= 6:
            forbidden.append(changed)
        leaked = issue_text.leaks(title + "\n" + body, forbidden)
        if leaked:
            draw.reason = f"the issue text would name what it must not: {', '.join(leaked[:3])}"
            return
        if not any(line.strip() for line in body.splitlines()[2:-2]):
            draw.reason = "the failing tests print nothing to write the issue from"
            return
        try:
            hide = self.bench.hide_edits(suite.failed)
        except (OpsBenchError, OSError, ValueError, SyntaxError) as exc:
            draw.reason = f"cannot hide the failing tests: {exc}"
            return
        t0 = time.monotonic()
        with self.bench.applied([edit, *hide]):
            visible = self.bench.run()
        if visible.broken or visible.failed or not visible.passed:
            draw.reason = (f"verify: the workspace's own tests do not pass with the failing ones hidden "
                           f"({visible.broken or ', '.join(sorted(visible.failed)[:3])})")
            return
        reverse = {"path": edit["path"], "old": edit["new"], "new": edit["old"]}
        why, proof = verify_fix(self.pristine, self.meta, self.tests, [edit, *hide], [reverse], self.check,
                                self.verify_dir("issue"), visible_must_pass=False)
        proof["visible"] = {"passed": visible.passed, "failed": 0, "screen": True}
        draw.verify_s = round(time.monotonic() - t0, 2)
        if why:
            draw.reason = f"verify: {why}"
            return
        iid = instance_id("issue", self.project.id, draw.what)
        lang = self.project.language
        goal = (f"A user filed this issue against the project at /workspace/{self.project.id} ({lang}, "
                f"{package_name(self.project)} {self.project.source.version}):\n\n> {title}\n>\n"
                + "\n".join(f"> {line}".rstrip() for line in body.splitlines())
                + f"\n\nResolve the issue in /workspace/{self.project.id}. `make -s -f {CONTRACT_FILE} check` in the "
                  "project builds it and runs its tests; it must pass. Keep the existing tests as they are: the "
                  "evaluation restores them and runs tests of its own for this issue.")
        report.instances.append(Instance(
            iid, "issue", self.project.id, lang, title, goal, [edit, *hide],
            {"task": "resolve-issue", "kind": "fix", "project": self.project.id},
            [reverse],
            provenance={"mutation": m.as_dict(), "hidden_tests": sorted(suite.failed), "seed": self.seed,
                        "pristine_tests": self.tests},
            proof=proof))
        draw.kept, draw.instance = True, iid
        self.kept.add(m.key)
        self.say(f"{self.project.id}: kept {iid} ({m.describe()})")

    # -- build-config ----------------------------------------------------------------------------------------------

    def _build(self, report: Report, count: int, max_draws: int) -> None:
        candidates = buildcfg.candidates(self.project, self.pristine)
        report.candidates = len(candidates)
        for cand in draw_order(candidates, self.seed, self.project.id, "build"):
            if len(report.instances) >= count or len(report.draws) >= max_draws:
                break
            draw = Draw("build", self.project.id, cand.describe())
            report.draws.append(draw)
            if skipped(self, draw):
                continue
            t0 = time.monotonic()
            why, proof = verify_fix(self.pristine, self.meta, self.tests, cand.edits, cand.reference, self.check,
                                    self.verify_dir("build"), visible_must_pass=False)
            draw.verify_s = round(time.monotonic() - t0, 2)
            if why:
                draw.reason = f"verify: {why}"
                continue
            iid = instance_id("build", self.project.id, draw.what)
            goal = (f"`make -s -f {CONTRACT_FILE} check` fails in the project at /workspace/{self.project.id} "
                    f"({self.project.language}). Make the build and its tests pass again; the workspace has no "
                    "network (dependencies come from the offline caches it has). Keep the tests and the check "
                    "contract as they are.")
            report.instances.append(Instance(
                iid, "build", self.project.id, self.project.language, f"Broken build ({self.project.id})", goal,
                cand.edits, {"task": "fix-build", "kind": "fix", "project": self.project.id}, cand.reference,
                provenance={"cause": cand.cause, "detail": cand.detail, "seed": self.seed,
                            "pristine_tests": self.tests}, proof=proof))
            draw.kept, draw.instance = True, iid
            self.say(f"{self.project.id}: kept {iid} ({cand.describe()})")


# -- writing instances ---------------------------------------------------------------------------------------------

def _literal(data: Any) -> str:
    class Dumper(yaml.SafeDumper):
        pass

    def text(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
        style = "|" if "\n" in value and not any(c in value for c in "\r\t") and value == value.rstrip(" ") \
            and not value.startswith((" ", "\n")) else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    Dumper.add_representer(str, text)
    return yaml.dump(data, Dumper=Dumper, sort_keys=False, allow_unicode=True, width=120)


def scenario_docs(inst: Instance, pristine: Path | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """(scenario.yaml, ground_truth.yaml) of an instance, in the shape of the hand-written devops-* scenarios (the
    manifestation check compares the edited files' sha256 with the faulty ones: `pristine` is the project's tree)."""
    from orchestrator.complexity import complexity_level, complexity_value

    kind = inst.stage["kind"]
    check_args = {"project": inst.project}
    scenario = {
        "apiVersion": "opsbench/v1", "kind": "Scenario",
        "metadata": {"id": inst.id, "name": f"{inst.title}", "generated": True,
                     "description": f"Generated from {inst.project} (family {inst.family}); proven by make check "
                                    "on fresh copies: the untouched state fails, the reference passes.",
                     "version": 1, "domain": "DevOps", "class": CLASS[inst.family],
                     "complexity": {"level": complexity_level(complexity_value(1, 3, 1)), "propagationLength": 1,
                                    "resolutionSteps": 3, "technologies": [inst.language],
                                    "value": complexity_value(1, 3, 1)},
                     "tags": ["devops", CLASS[inst.family], inst.project, "generated"]},
        "environment": environment_of(inst),
        "faults": [{"name": "injected-defect", "role": "fault_workspace_edit",
                    "args": {"project": inst.project, "edits": inst.fault_edits}}],
        "checks": {
            "baseline": [{"name": "project-at-baseline", "role": "check_workspace",
                          "args": {**check_args, "command": 'git diff --quiet HEAD && test -z "$(git status '
                                                            '--porcelain)"'}, "timeout": 30}],
            "manifestation": [{"name": "fault-in-place", "role": "check_workspace",
                               "args": {**check_args, "command": manifest_command(inst.fault_edits, pristine)},
                               "timeout": 30}]},
        "tasks": [{"id": inst.stage["task"], "kind": kind, "goal": inst.goal}],
        "budget": {"wallClockSeconds": 1800},
        "evaluation": {"evaluators": [{"role": "evaluate_workspace"}]},
        "reference": [{"name": "reference-fix" if kind == "fix" else "reference-test", "role": "solve_workspace_edit",
                       "args": {"project": inst.project, "edits": inst.reference_edits}}],
    }
    truth = {"apiVersion": "opsbench/v1", "kind": "GroundTruth", "scenario": inst.id,
             "entities": [{"id": inst.project, "rootCause": True, "layer": "application",
                           "faultType": BUILD_FAULT_TYPES.get(inst.provenance.get("cause", ""), "wrong_computation")}],
             "workspace": {"stages": [inst.stage]}}
    return scenario, truth


def write_instance(inst: Instance, out: Path, pristine: Path | None = None) -> Path:
    folder = out / inst.id
    folder.mkdir(parents=True, exist_ok=True)
    scenario, truth = inst.docs if inst.docs is not None else scenario_docs(inst, pristine)
    header = "# yaml-language-server: $schema=../../orchestrator/schemas/{}.schema.json\n# Generated by `opsbench " \
             "devops generate`: do not edit; regenerate from the seed.\n"
    (folder / "scenario.yaml").write_text(header.format("scenario") + _literal(scenario))
    (folder / "ground_truth.yaml").write_text(header.format("ground_truth") + _literal(truth))
    (folder / "generated.json").write_text(json.dumps(
        {"id": inst.id, "family": inst.family, "project": inst.project, "language": inst.language,
         "provenance": inst.provenance, "proof": inst.proof}, indent=2, sort_keys=True) + "\n")
    return folder


def _write_yields(out: Path, reports: list[Report]) -> None:
    """Merge the reports' yields (with every draw and its reason) into out/yields.json, after each project and
    family: an interrupted run keeps what it finished."""
    yields = out / "yields.json"
    previous = json.loads(yields.read_text()) if yields.is_file() else {}
    for r in reports:
        previous[f"{r.project}/{r.family}"] = {**r.summary(), "draws": [asdict(d) for d in r.draws]}
    yields.write_text(json.dumps(previous, indent=2, sort_keys=True) + "\n")


def generate(project_ids: list[str], families: list[str], seed: str, count: int, out: Path, *,
             max_draws: int = 0, cache: Cache | None = None, work: Path | None = None,
             say: Callable[[str], None] = lambda _m: None,
             done: Callable[[Report], None] = lambda _r: None, where: str = "host",
             sources: list[Path] | None = None, skip: frozenset[str] = frozenset()) -> list[Report]:
    """Draw, verify and write up to `count` instances per project and family into `out` (one folder each, plus
    `yields.json`); `max_draws` caps the candidates tried (default 6 x count + 10; 20 x count + 10 for testgen).
    A pipeline chains instances found under `out` and `sources` (earlier draws' output folders). `skip`: instance
    ids never drawn (counted as draws, with the reason)."""
    catalogue = cat.load()
    cache = cache or default_cache()
    unknown = [f for f in families if f not in FAMILIES]
    if unknown:
        raise StepFailed("-", "generate", f"unknown famil{'ies' if len(unknown) > 1 else 'y'} "
                                          f"{', '.join(unknown)}; the families are {', '.join(FAMILIES)}")
    projects = catalogue.select(project_ids)
    out.mkdir(parents=True, exist_ok=True)
    reports: list[Report] = []
    with tempfile.TemporaryDirectory(prefix="opsbench-generate-", dir=work) as tmp:
        for project in projects:
            gen = Generator(project, cache, Path(tmp) / project.id, seed, say, where, [out, *(sources or [])], skip)
            for family in families:
                if not cache.fetched(project):
                    reports.append(Report(project.id, family, seed, error=f"project {project.id}, step fetch: not "
                                          f"fetched into {cache.root}: run `make devops-projects IDS={project.id}`"))
                    continue
                say(f"{project.id}: drawing {family} (seed {seed})")
                # A test-generation draw mostly ends at the recorded calls (about a second): it may try more.
                report = gen.run(family, count, max_draws or (20 if family == "testgen" else 6) * count + 10)
                for inst in report.instances:
                    write_instance(inst, out, cache.tree(project))
                reports.append(report)
                _write_yields(out, [report])
                done(report)
    return reports


def record_yields(reports: list[Report], path: Path = YIELDS, today: str | None = None) -> list[str]:
    """Keep each report's figures (drawn, kept, reasons, times, the machine's load) under path[project/family];
    other entries stay. Returns the keys written."""
    import datetime as dt
    import os

    data: dict[str, Any] = json.loads(path.read_text()) if path.is_file() else {}
    written = []
    for r in reports:
        if r.error and not r.draws:
            continue
        summary = {k: v for k, v in r.summary().items() if k != "instances"}
        summary["date"] = today or dt.datetime.now(dt.UTC).date().isoformat()
        summary["load"] = round(os.getloadavg()[0], 1)
        data[f"{r.project}/{r.family}@{r.where}"] = summary
        written.append(f"{r.project}/{r.family}@{r.where}")
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    return written


def verify_written(folder: Path, where: str = "host", cache: Cache | None = None,
                   work: Path | None = None) -> tuple[str, dict[str, Any]]:
    """Prove a written instance again from its files alone (scenario.yaml, ground_truth.yaml, generated.json):
    ('' when proven, else why not, the figures), with `make check` on the host or in the workspace image
    (`where`)."""
    from orchestrator.devops_projects.tasks import verify_tests

    scenario = yaml.safe_load((folder / "scenario.yaml").read_text())
    truth = yaml.safe_load((folder / "ground_truth.yaml").read_text())
    meta_file = json.loads((folder / "generated.json").read_text())
    project = cat.load().select([meta_file["project"]])[0]
    cache = cache or default_cache()
    if meta_file["family"] == "monitoring":  # live in the workspace image, whatever `where` says
        with tempfile.TemporaryDirectory(prefix="opsbench-verify-", dir=work) as tmp:
            why, scores = monitoring.proof_by_scoring(scenario, truth, Path(tmp))
        if why:
            return why, {"scores": scores}
        why, live = monitoring.LiveProver(project, cache).prove(scenario)
        return why, {"scores": scores, **live}
    stage = truth["workspace"]["stages"][0]
    fault = scenario["faults"][0]["args"]["edits"]
    reference = scenario["reference"][0]["args"]["edits"]
    tests = int(meta_file["provenance"].get("workspace_tests", meta_file["provenance"]["pristine_tests"]))
    with tempfile.TemporaryDirectory(prefix="opsbench-verify-", dir=work) as tmp:
        bench_env = Bench(project, cache, Path(tmp) / "bench").env()
        check: Checker = WorkspaceChecker(project, cache) if where == "workspace" else Checker(project, cache,
                                                                                               bench_env)
        if stage["kind"] == "write-tests":
            return verify_tests(cache.tree(project), tests, stage["bug"], reference, check, Path(tmp))
        if meta_file["family"] == "pipeline":
            return verify_pipeline(project, cache.tree(project), tests, truth["workspace"]["stages"], fault,
                                    reference, check, Path(tmp))
        return verify_fix(cache.tree(project), contract_meta(project, tests), tests, fault, reference, check,
                          Path(tmp), visible_must_pass=meta_file["family"] == "issue")


def verify_pipeline(project: cat.Project, pristine: Path, tests: int, stages: list[dict[str, Any]],
                     fault: list[dict[str, Any]], reference: list[dict[str, Any]], check: Checker,
                     work: Path) -> tuple[str, dict[str, Any]]:
    """A written pipeline from its files alone: the fix stages as one (the untouched state fails, the whole
    reference passes), a build stage scored without the later stage's tests (`withheld_tests`) passing on the
    reference too, then each write-tests stage with the reference's test files."""
    from orchestrator.devops_projects.tasks import materialise, verify_tests
    from orchestrator.evaluation.workspace import matches, prepare_fix, protected_tests

    meta = contract_meta(project, tests)
    why, proof = verify_fix(pristine, meta, tests, fault, reference, check, work / "fix", visible_must_pass=False)
    if why:
        return why, proof
    for stage in stages:
        if stage["kind"] == "fix" and stage.get("withheld_tests"):
            where = work / f"{stage['task']}-own"
            try:
                materialise(pristine, [*fault, *reference], where / "tree")
                prepare_fix(where / "tree", pristine, meta, stage["withheld_tests"], where / "scored")
            except (OSError, ValueError, OpsBenchError) as exc:
                return f"stage {stage['task']}: an edit does not apply: {exc}", proof
            rc, passed, failed, _ = check(where / "scored")
            proof[stage["task"]] = {"rc": rc, "passed": passed, "failed": failed}
            if rc != 0 or failed or passed < tests - int(stage.get("withheld_test_count", 0)):
                return (f"stage {stage['task']}: the reference does not pass it scored without the later stage's "
                        "tests"), proof
    test_edits = [e for e in reference if matches(e["path"], protected_tests(meta))]
    for stage in stages:
        if stage["kind"] == "write-tests":
            why, proof[stage["task"]] = verify_tests(pristine, tests, stage["bug"], test_edits, check,
                                                     work / stage["task"])
            if why:
                return f"stage {stage['task']}: {why}", proof
    return "", proof
