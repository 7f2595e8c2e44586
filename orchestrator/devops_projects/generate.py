"""DevOps tasks drawn from the real upstream projects, kept only when proven (issue 37, part 2).

Three families, each drawn deterministically from a seed per project (`random.Random(f"{seed}/{project}/{family}")`
shuffles the project's candidates, listed in a fixed order):

* ``issue`` (issue-resolving): a mutation of the project's own code (bench.py screens it on the host) kept when at
  most MAX_HIDDEN test functions the project already has fail on it and pass on the original. Those tests are
  removed from the agent's workspace (they come back with the protected files when evaluate_workspace rebuilds a
  fresh copy), and the issue text is written from what they observed (issue_text.py), never naming them or the
  mutation.
* ``testgen`` (test-generation): a mutation no existing test catches, with a hidden test that does (a differential
  test recorded from the original's behaviour, testgen.py); the reference solution adds that test.
* ``build`` (build-config): one of the build-cause families applied to the project's real build file
  (buildcfg.py).

Every drawn candidate that survives screening becomes an instance only after `verify`: the workspace as the agent
gets it, the untouched state as evaluate_workspace scores it (must fail) and the reference solution (must pass),
each a `make check` through the project's contract on a fresh copy (`orchestrator.evaluation.workspace`'s
`prepare_fix`/`prepare_variant` build those copies, as the evaluator does). A dropped draw keeps its reason.
"""

from __future__ import annotations

import hashlib
import json
import random
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from orchestrator.devops_projects import buildcfg, issue_text, mutate
from orchestrator.devops_projects import catalogue as cat
from orchestrator.devops_projects.bench import Bench, Suite
from orchestrator.devops_projects.fetch import CONTRACT_FILE, FETCHED, Cache, StepFailed, run_limited
from orchestrator.devops_projects.run import contract_meta, default_cache
from orchestrator.errors import OpsBenchError
from orchestrator.evaluation.workspace import count_report, files_of, prepare_fix, prepare_variant

FAMILIES = ("issue", "testgen", "build")
MAX_HIDDEN = 3
"""An issue hides at most this many test functions: a mutant more tests catch is a broken library, not an issue."""
CLASS = {"issue": "issue-resolving", "testgen": "test-generation", "build": "build-config"}


@dataclass
class Draw:
    """One drawn candidate and what became of it: `kept` with its instance id, or dropped with `reason`."""

    family: str
    project: str
    what: str
    kept: bool = False
    reason: str = ""
    instance: str = ""
    screen_s: float = 0.0
    verify_s: float = 0.0


@dataclass
class Instance:
    """A verified task: the scenario's parts and the proof."""

    id: str
    family: str
    project: str
    language: str
    title: str
    goal: str
    fault_edits: list[dict[str, Any]]
    stage: dict[str, Any]
    reference_edits: list[dict[str, Any]]
    provenance: dict[str, Any] = field(default_factory=dict)
    proof: dict[str, Any] = field(default_factory=dict)


@dataclass
class Report:
    project: str
    family: str
    seed: str
    candidates: int = 0
    draws: list[Draw] = field(default_factory=list)
    instances: list[Instance] = field(default_factory=list)
    error: str = ""
    seconds: float = 0.0

    def summary(self) -> dict[str, Any]:
        kept = [d for d in self.draws if d.kept]
        reasons: dict[str, int] = {}
        for d in self.draws:
            if not d.kept:
                reasons[d.reason.split(":", 1)[0]] = reasons.get(d.reason.split(":", 1)[0], 0) + 1
        verify = [d.screen_s + d.verify_s for d in kept]
        return {"project": self.project, "family": self.family, "seed": self.seed, "candidates": self.candidates,
                "drawn": len(self.draws), "kept": len(kept), "dropped_by_reason": reasons,
                "seconds": round(self.seconds, 1),
                "seconds_per_kept": round(self.seconds / len(kept), 1) if kept else None,
                "verify_seconds_per_kept": round(sum(verify) / len(verify), 1) if verify else None,
                "instances": [i.id for i in self.instances], "error": self.error}


# -- verification: `make check` on fresh copies, as evaluate_workspace builds them -----------------------------------

class Checker:
    """`make -s -f opsbench.mk check` on a directory (on the host, offline, time-limited): (exit, passed, failed,
    report found)."""

    def __init__(self, project: cat.Project, cache: Cache, env: dict[str, str | None]) -> None:
        self.project, self.cache, self.env = project, cache, env
        self.meta = contract_meta(project)

        self.venv: Path | None = None

    def shared_venv(self, where: Path) -> Path:
        """One virtual environment with the test runner for every Python check of this project (made here, so its
        scripts point here)."""
        if self.venv is None:
            venv = where / f"{self.project.id}-venv"
            for argv in (["python3", "-m", "venv", str(venv)],
                         [str(venv / "bin" / "pip"), "install", "-q", "--no-index", "--find-links",
                          str(self.cache.deps / "wheels"), "pytest"]):
                proc = run_limited(argv, cwd=where, timeout=self.project.limits.build_s, env=self.env,
                                   project=self.project.id, step="build")
                if proc.returncode != 0:
                    raise StepFailed(self.project.id, "build", f"{' '.join(argv[:3])}: {proc.stdout.strip()[-400:]}")
            self.venv = venv
        return self.venv

    def __call__(self, root: Path) -> tuple[int, int, int, bool]:
        """A Python check reuses one virtual environment (linked in as `.venv`, which the contract's `build` keeps
        and re-installs the project into, forced), so it costs an install and the tests, not a new environment."""
        own = root / ".venv"
        if self.project.language == "python" and not own.exists():
            own.symlink_to(self.shared_venv(root.parent.parent), target_is_directory=True)
        try:
            proc = run_limited(["make", "-s", "-f", CONTRACT_FILE, "check", f"DEPS={self.cache.deps}"], cwd=root,
                               timeout=self.project.limits.build_s + self.project.limits.test_s, env=self.env,
                               project=self.project.id, step="verify")
        except StepFailed:
            return -1, 0, 0, False
        passed, failed, found = count_report(root, self.meta["report"])
        return proc.returncode, passed, failed, found


def _materialise(pristine: Path, edits: list[dict[str, Any]], dst: Path) -> None:
    shutil.copytree(pristine, dst, symlinks=True, ignore=shutil.ignore_patterns("__pycache__", ".venv",
                                                                               ".opsbench-fetch.json"))
    for edit in edits:
        file = dst / edit["path"]
        if edit.get("delete"):
            file.unlink(missing_ok=True)
        elif "content" in edit:
            file.write_text(edit["content"], encoding="utf-8")
        else:
            file.write_text(mutate.apply_edit(file.read_text(encoding="utf-8"), edit), encoding="utf-8")


def same_tree(a: Path, b: Path) -> bool:
    """Whether two project trees hold the same files with the same bytes (build output and caches aside)."""
    mine, theirs = ([r for r in files_of(t) if r != FETCHED] for t in (a, b))
    if mine != theirs:
        return False
    return all((a / rel).read_bytes() == (b / rel).read_bytes() for rel in mine if not (a / rel).is_symlink())


def verify_fix(pristine: Path, meta: dict[str, Any], tests: int, fault: list[dict[str, Any]],
               reference: list[dict[str, Any]], check: Callable[[Path], tuple[int, int, int, bool]],
               work: Path, *, visible_must_pass: bool) -> tuple[str, dict[str, Any]]:
    """('' when proven, else why not, the figures) for a `fix` stage: the workspace as given (its own tests green
    when `visible_must_pass`), the untouched state scored as evaluate_workspace does (fails), the reference (passes
    with at least the project's tests)."""
    proof: dict[str, Any] = {}
    workspace = work / "workspace"
    _materialise(pristine, fault, workspace)
    if visible_must_pass:
        rc, passed, failed, _ = check(workspace)
        proof["visible"] = {"rc": rc, "passed": passed, "failed": failed}
        if rc != 0 or failed:
            return f"the workspace's own tests fail on the bug (exit {rc}, {failed} failed)", proof
    untouched = work / "untouched"
    prepare_fix(workspace, pristine, meta, [], untouched)
    rc, passed, failed, _ = check(untouched)
    proof["untouched"] = {"rc": rc, "passed": passed, "failed": failed}
    if rc == 0 and failed == 0 and passed >= tests:
        return "the untouched workspace passes the evaluation", proof
    fixed = work / "reference"
    _materialise(workspace, reference, work / "reference-tree")
    prepare_fix(work / "reference-tree", pristine, meta, [], fixed)
    if same_tree(fixed, pristine):
        # The reference undoes the fault file for file: its tree is the pristine one, whose make check passed with
        # `tests` cases when the generator started (no second run of the same tree).
        rc, passed, failed = 0, tests, 0
        proof["reference"] = {"rc": rc, "passed": passed, "failed": failed, "same_as_pristine": True}
    else:
        rc, passed, failed, _ = check(fixed)
        proof["reference"] = {"rc": rc, "passed": passed, "failed": failed}
    if rc != 0 or failed or passed < tests:
        return f"the reference fix does not pass (exit {rc}, {passed} passed, {failed} failed)", proof
    return "", proof


def verify_tests(pristine: Path, tests: int, bug: list[dict[str, Any]], test_edit: dict[str, Any],
                 check: Callable[[Path], tuple[int, int, int, bool]], work: Path) -> tuple[str, dict[str, Any]]:
    """('' when proven, else why not, the figures) for a `write-tests` stage: the reference test, put into the
    pristine project with the bug and without, as evaluate_workspace does, fails there and passes here (with more
    tests than the pristine suite); an agent that adds no test fails by the evaluator's first rule."""
    proof: dict[str, Any] = {}
    agent = work / "agent"
    _materialise(pristine, [*bug, test_edit], agent)
    fixed_dir, buggy_dir = work / "fixed", work / "buggy"
    prepare_variant(pristine, agent, [test_edit["path"]], [], fixed_dir)
    prepare_variant(pristine, agent, [test_edit["path"]], bug, buggy_dir)
    rc, passed, failed, _ = check(fixed_dir)
    proof["fixed"] = {"rc": rc, "passed": passed, "failed": failed}
    if rc != 0 or failed or passed <= tests:
        return f"the reference test does not pass on the original (exit {rc}, {passed} passed, {failed} failed)", proof
    rc, passed, failed, _ = check(buggy_dir)
    proof["buggy"] = {"rc": rc, "passed": passed, "failed": failed}
    if rc == 0 or not failed:
        return f"the reference test does not fail on the mutant (exit {rc}, {failed} failed)", proof
    return "", proof


# -- drawing ------------------------------------------------------------------------------------------------------

def instance_id(family: str, project: str, what: str) -> str:
    digest = hashlib.sha256(f"{project}\n{what}".encode()).hexdigest()[:8]
    return f"devops-gen-{family}-{project}-{digest}"


def _package(project: cat.Project) -> str:
    return project.source.coordinates.split("@")[0].split("==")[0]


def _draw_order(items: list[Any], seed: str, project: str, family: str) -> list[Any]:
    order = list(items)
    random.Random(f"{seed}/{project}/{family}").shuffle(order)
    return order


class Generator:
    """Draws and verifies the instances of one project and family."""

    def __init__(self, project: cat.Project, cache: Cache, work: Path, seed: str,
                 say: Callable[[str], None] = lambda _m: None) -> None:
        self.project, self.cache, self.work, self.seed, self.say = project, cache, work, seed, say
        self.bench = Bench(project, cache, work / "bench")
        self.pristine = cache.tree(project)
        self.meta = contract_meta(project)
        self.tests = 0
        self.check = Checker(project, cache, self.bench.env())
        self.prepared = False
        self.screened: dict[tuple[str, int, int, str, str], Suite] = {}

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
            _materialise(self.pristine, [], copy)
            rc, passed, failed, found = self.check(copy)
        if rc != 0 or failed or not found or not passed:
            raise StepFailed(self.project.id, "test", f"the pristine project's make check does not pass (exit {rc}, "
                                                      f"{passed} passed, {failed} failed): dropped from generation")
        return passed

    def run(self, family: str, count: int, max_draws: int) -> Report:
        report = Report(self.project.id, family, self.seed)
        started = time.monotonic()
        try:
            if not self.tests:
                self.tests = self.pristine_tests()
                self.meta = contract_meta(self.project, self.tests)
            if family == "build":
                self._build(report, count, max_draws)
            else:
                if not self.prepared:
                    baseline = self.bench.prepare()
                    self.prepared = True
                    self.say(f"{self.project.id}: baseline {baseline.passed} passed in {self.bench.baseline_s:.1f} s")
                if family == "issue":
                    self._issues(report, count, max_draws)
                else:
                    from orchestrator.devops_projects import testgen
                    testgen.generate(self, report, count, max_draws)
        except StepFailed as exc:
            report.error = str(exc)
        report.seconds = time.monotonic() - started
        return report

    def _verify_dir(self, name: str) -> Path:
        path = self.work / "verify" / name
        if path.exists():
            shutil.rmtree(path)
        path.mkdir(parents=True)
        return path

    # -- issue-resolving -------------------------------------------------------------------------------------------

    def _issues(self, report: Report, count: int, max_draws: int) -> None:
        candidates = self.bench.mutations()
        report.candidates = len(candidates)
        for m in _draw_order(candidates, self.seed, self.project.id, "issue"):
            if len(report.instances) >= count or len(report.draws) >= max_draws:
                break
            draw = Draw("issue", self.project.id, m.describe())
            report.draws.append(draw)
            t0 = time.monotonic()
            text = (self.bench.root / m.path).read_text(encoding="utf-8")
            edit = mutate.mutation_edit(text, m)
            if self.project.language == "python" and not mutate.python_compiles(mutate.apply_edit(text, edit)):
                draw.reason = "does not compile"
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
        title, body = issue_text.write_issue(self.project.id, self.project.language, _package(self.project),
                                             failures)
        forbidden = sorted({f.test for f in failures} | {Path(f.file).name for f in failures if f.file != "."}
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
                                self._verify_dir("issue"), visible_must_pass=False)
        proof["visible"] = {"passed": visible.passed, "failed": 0, "screen": True}
        draw.verify_s = round(time.monotonic() - t0, 2)
        if why:
            draw.reason = f"verify: {why}"
            return
        iid = instance_id("issue", self.project.id, draw.what)
        lang = self.project.language
        goal = (f"A user filed this issue against the project at /workspace/{self.project.id} ({lang}, "
                f"{_package(self.project)} {self.project.source.version}):\n\n> {title}\n>\n"
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
        self.say(f"{self.project.id}: kept {iid} ({m.describe()})")

    # -- build-config ----------------------------------------------------------------------------------------------

    def _build(self, report: Report, count: int, max_draws: int) -> None:
        candidates = buildcfg.candidates(self.project, self.pristine)
        report.candidates = len(candidates)
        for cand in _draw_order(candidates, self.seed, self.project.id, "build"):
            if len(report.instances) >= count or len(report.draws) >= max_draws:
                break
            draw = Draw("build", self.project.id, cand.describe())
            report.draws.append(draw)
            t0 = time.monotonic()
            why, proof = verify_fix(self.pristine, self.meta, self.tests, cand.edits, cand.reference, self.check,
                                    self._verify_dir("build"), visible_must_pass=False)
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


def scenario_docs(inst: Instance) -> tuple[dict[str, Any], dict[str, Any]]:
    """(scenario.yaml, ground_truth.yaml) of an instance, in the shape of the hand-written devops-* scenarios."""
    kind = inst.stage["kind"]
    scenario = {
        "apiVersion": "opsbench/v1", "kind": "Scenario",
        "metadata": {"id": inst.id, "name": f"{inst.title}",
                     "description": f"Generated from {inst.project} (family {inst.family}); proven by make check "
                                    "on fresh copies: the untouched state fails, the reference passes.",
                     "version": 1, "domain": "DevOps", "class": CLASS[inst.family],
                     "complexity": {"level": "Medium", "propagationLength": 1, "resolutionSteps": 3,
                                    "technologies": [inst.language]},
                     "tags": ["devops", CLASS[inst.family], inst.project, "generated"]},
        "environment": {"backend": "local", "application": "workspace"},
        "faults": [{"name": "injected-defect", "role": "fault_workspace_edit",
                    "args": {"project": inst.project, "edits": inst.fault_edits}}],
        "tasks": [{"id": inst.stage["task"], "kind": kind, "goal": inst.goal}],
        "budget": {"wallClockSeconds": 1800},
        "evaluation": {"evaluators": [{"role": "evaluate_workspace"}]},
        "reference": [{"name": "reference-fix" if kind == "fix" else "reference-test", "role": "solve_workspace_edit",
                       "args": {"project": inst.project, "edits": inst.reference_edits}}],
    }
    truth = {"apiVersion": "opsbench/v1", "kind": "GroundTruth", "scenario": inst.id,
             "entities": [{"id": inst.project, "rootCause": True, "layer": "application",
                           "faultType": "build_failure" if inst.family == "build" else "wrong_computation"}],
             "workspace": {"stages": [inst.stage]}}
    return scenario, truth


def write_instance(inst: Instance, out: Path) -> Path:
    folder = out / inst.id
    folder.mkdir(parents=True, exist_ok=True)
    scenario, truth = scenario_docs(inst)
    header = "# yaml-language-server: $schema=../../orchestrator/schemas/{}.schema.json\n# Generated by `opsbench " \
             "devops generate`: do not edit; regenerate from the seed.\n"
    (folder / "scenario.yaml").write_text(header.format("scenario") + _literal(scenario))
    (folder / "ground_truth.yaml").write_text(header.format("ground_truth") + _literal(truth))
    (folder / "generated.json").write_text(json.dumps(
        {"id": inst.id, "family": inst.family, "project": inst.project, "language": inst.language,
         "provenance": inst.provenance, "proof": inst.proof}, indent=2, sort_keys=True) + "\n")
    return folder


def generate(project_ids: list[str], families: list[str], seed: str, count: int, out: Path, *,
             max_draws: int = 0, cache: Cache | None = None, work: Path | None = None,
             say: Callable[[str], None] = lambda _m: None) -> list[Report]:
    """Draw, verify and write up to `count` instances per project and family into `out` (one folder each, plus
    `yields.json`); `max_draws` caps the candidates tried (default 6 x count + 10)."""
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
            gen = Generator(project, cache, Path(tmp) / project.id, seed, say)
            for family in families:
                if not cache.fetched(project):
                    reports.append(Report(project.id, family, seed, error=f"project {project.id}, step fetch: not "
                                          f"fetched into {cache.root}: run `make devops-projects IDS={project.id}`"))
                    continue
                say(f"{project.id}: drawing {family} (seed {seed})")
                report = gen.run(family, count, max_draws or 6 * count + 10)
                for inst in report.instances:
                    write_instance(inst, out)
                reports.append(report)
    yields = out / "yields.json"
    previous = json.loads(yields.read_text()) if yields.is_file() else {}
    for r in reports:
        previous[f"{r.project}/{r.family}"] = {**r.summary(),
                                                "draws": [asdict(d) for d in r.draws]}
    yields.write_text(json.dumps(previous, indent=2, sort_keys=True) + "\n")
    return reports
