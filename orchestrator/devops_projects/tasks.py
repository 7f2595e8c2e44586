"""The parts every family of generated DevOps tasks shares: what a draw and a verified instance are, the seeded draw
order, and the proof (`make check` through the project's contract on fresh copies built the way evaluate_workspace
builds them). `generate` drives the families; `testgen` is one of them.
"""

from __future__ import annotations

import hashlib
import os
import random
import secrets
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from orchestrator import paths
from orchestrator.devops_projects import catalogue as cat
from orchestrator.devops_projects import mutate
from orchestrator.devops_projects.bench import Bench, Suite
from orchestrator.devops_projects.check import WORKSPACE_DEPS, WORKSPACE_IMAGE, WORKSPACE_LIMITS, WORKSPACE_UID
from orchestrator.devops_projects.fetch import CONTRACT_FILE, FETCHED, Cache, StepFailed, run_limited
from orchestrator.devops_projects.run import contract_meta
from orchestrator.errors import OpsBenchError
from orchestrator.evaluation.workspace import count_report, files_of, prepare_fix, prepare_variant


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
    docs: tuple[dict[str, Any], dict[str, Any]] | None = None
    """(scenario.yaml, ground_truth.yaml) when the family writes its own (monitoring, pipeline); else they are built
    from the edits (`generate.scenario_docs`)."""


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
    where: str = "host"
    """Where the instances were proven: "host" or "workspace" (the image evaluate_workspace runs)."""

    def summary(self) -> dict[str, Any]:
        kept = [d for d in self.draws if d.kept]
        reasons: dict[str, int] = {}
        for d in self.draws:
            if not d.kept:
                reasons[d.reason.split(":", 1)[0]] = reasons.get(d.reason.split(":", 1)[0], 0) + 1
        verify = [d.screen_s + d.verify_s for d in kept]
        return {"project": self.project, "family": self.family, "seed": self.seed, "where": self.where,
                "candidates": self.candidates,
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


class WorkspaceChecker(Checker):
    """The same `make check`, in a fresh container of the workspace image as evaluate_workspace runs it (no
    network, the workspace's limits, user dev), the offline caches mounted read-only at /opt/opsbench-deps."""

    def __init__(self, project: cat.Project, cache: Cache, image: str = WORKSPACE_IMAGE) -> None:
        super().__init__(project, cache, {})
        self.image = image
        conf = paths.containers_conf_dir()
        self.podman_env = {k: str(conf / f) for k, f in (("CONTAINERS_CONF", "containers.conf"),
                                                          ("CONTAINERS_STORAGE_CONF", "storage.conf"))
                           if (conf / f).is_file()}

    def __call__(self, root: Path) -> tuple[int, int, int, bool]:
        where = f"/workspace/{self.project.id}"
        subprocess.run(["chown", "-R", f"{WORKSPACE_UID}:{WORKSPACE_UID}", str(root)], check=True)
        argv = ["podman", "run", "--rm", f"--name=ob-devops-verify-{secrets.token_hex(4)}", "--network=none",
                *WORKSPACE_LIMITS, "--init", "--security-opt=no-new-privileges",
                f"--user={WORKSPACE_UID}:{WORKSPACE_UID}", "--tmpfs=/tmp:rw,nosuid,nodev,size=512m,mode=1777",
                f"--mount=type=bind,source={root.resolve()},destination={where}",
                f"--mount=type=bind,source={self.cache.deps.resolve()},destination={WORKSPACE_DEPS},ro",
                f"--workdir={where}", f"--env=GOCACHE={where}/.gocache", self.image,
                "nice", "-n", "19", "make", "-s", "-f", CONTRACT_FILE, "check", f"DEPS={WORKSPACE_DEPS}"]
        try:
            proc = run_limited(argv, cwd=root, timeout=self.project.limits.build_s + self.project.limits.test_s,
                               env=self.podman_env, project=self.project.id, step="verify")
            rc = proc.returncode
        except StepFailed:
            rc = -1
        finally:
            subprocess.run(["chown", "-R", f"{os.getuid()}:{os.getgid()}", str(root)], check=False)
        passed, failed, found = count_report(root, self.meta["report"])
        return rc, passed, failed, found


def materialise(pristine: Path, edits: list[dict[str, Any]], dst: Path) -> None:
    shutil.copytree(pristine, dst, symlinks=True, ignore=shutil.ignore_patterns("__pycache__", ".venv",
                                                                               ".opsbench-fetch.json"))
    for edit in edits:
        file = dst / edit["path"]
        if edit.get("delete"):
            file.unlink(missing_ok=True)
        elif "content" in edit:
            file.parent.mkdir(parents=True, exist_ok=True)
            file.write_text(edit["content"], encoding="utf-8")
        else:
            file.write_text(mutate.apply_edit(file.read_text(encoding="utf-8"), edit), encoding="utf-8")


def same_tree(a: Path, b: Path) -> bool:
    """Whether two project trees hold the same files with the same bytes (build output and caches aside)."""
    mine, theirs = ([r for r in files_of(t) if r != FETCHED] for t in (a, b))
    if mine != theirs:
        return False
    return all((a / rel).read_bytes() == (b / rel).read_bytes() for rel in mine if not (a / rel).is_symlink())


def _verify_fix(pristine: Path, meta: dict[str, Any], tests: int, fault: list[dict[str, Any]],
               reference: list[dict[str, Any]], check: Callable[[Path], tuple[int, int, int, bool]],
               work: Path, *, visible_must_pass: bool) -> tuple[str, dict[str, Any]]:
    """('' when proven, else why not, the figures) for a `fix` stage: the workspace as given (its own tests green
    when `visible_must_pass`), the untouched state scored as evaluate_workspace does (fails), the reference (passes
    with at least the project's tests)."""
    proof: dict[str, Any] = {}
    workspace = work / "workspace"
    materialise(pristine, fault, workspace)
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
    materialise(workspace, reference, work / "reference-tree")
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


def _verify_tests(pristine: Path, tests: int, bug: list[dict[str, Any]],
                  test_edit: dict[str, Any] | list[dict[str, Any]],
                  check: Callable[[Path], tuple[int, int, int, bool]], work: Path) -> tuple[str, dict[str, Any]]:
    """('' when proven, else why not, the figures) for a `write-tests` stage: the reference test (one edit, or
    several test files), put into the pristine project with the bug and without, as evaluate_workspace does, fails
    there and passes here (with more tests than `tests`, the suite the agent's workspace has); an agent that adds
    no test fails by the evaluator's first rule."""
    proof: dict[str, Any] = {}
    edits = test_edit if isinstance(test_edit, list) else [test_edit]
    agent = work / "agent"
    materialise(pristine, [*bug, *edits], agent)
    fixed_dir, buggy_dir = work / "fixed", work / "buggy"
    # The evaluation takes the agent's new or changed test files only (a file as released is none of them).
    files = sorted(rel for rel in {e["path"] for e in edits}
                   if not (pristine / rel).is_file() or (pristine / rel).read_bytes() != (agent / rel).read_bytes())
    if not files:
        return "the reference adds or changes no test file (the evaluation would find none of the agent's)", proof
    prepare_variant(pristine, agent, files, [], fixed_dir)
    prepare_variant(pristine, agent, files, bug, buggy_dir)
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


def package_name(project: cat.Project) -> str:
    return project.source.coordinates.split("@")[0].split("==")[0]


def draw_order(items: list[Any], seed: str, project: str, family: str) -> list[Any]:
    order = list(items)
    random.Random(f"{seed}/{project}/{family}").shuffle(order)
    return order



class Host(Protocol):
    """What a family's drawer gets from the generator of one project."""

    project: cat.Project
    cache: Cache
    seed: str
    pristine: Path
    tests: int
    bench: Bench
    check: Checker
    screened: dict[tuple[str, int, int, str, str], Suite]
    """The suite's result per mutant screened so far (by `Mutation.key`), whichever family screened it."""
    kept: set[tuple[str, int, int, str, str]]
    """Mutants already kept as an instance (by `Mutation.key`): one family's task per mutant."""
    skip: frozenset[str]
    """Instance ids not to draw (a private split's public ones; see `skipped`)."""

    def screen(self, m: mutate.Mutation, edit: dict[str, Any]) -> Suite: ...

    def verify_dir(self, name: str) -> Path: ...

    def say(self, message: str) -> None: ...


def skipped(host: Host, draw: Draw, *chained: str) -> bool:
    """Whether `draw`'s instance, or one it chains, is among `host.skip` (then `draw.reason` says so): a private
    split leaves the public split's instances out before spending a screening or a proof on them."""
    iid = instance_id(draw.family, draw.project, draw.what)
    hit = next((i for i in (iid, *chained) if i in host.skip), "")
    if hit:
        draw.reason = "in the public split" if hit == iid else f"chains {hit}, in the public split"
    return bool(hit)


def verify_fix(pristine: Path, meta: dict[str, Any], tests: int, fault: list[dict[str, Any]],
               reference: list[dict[str, Any]], check: Callable[[Path], tuple[int, int, int, bool]],
               work: Path, *, visible_must_pass: bool) -> tuple[str, dict[str, Any]]:
    """_verify_fix, with an edit that does not apply (text not found once) a reason, not an error."""
    try:
        return _verify_fix(pristine, meta, tests, fault, reference, check, work, visible_must_pass=visible_must_pass)
    except (OpsBenchError, OSError) as exc:
        return f"an edit does not apply: {exc}", {}


def verify_tests(pristine: Path, tests: int, bug: list[dict[str, Any]],
                 test_edit: dict[str, Any] | list[dict[str, Any]],
                 check: Callable[[Path], tuple[int, int, int, bool]], work: Path) -> tuple[str, dict[str, Any]]:
    """_verify_tests, with an edit that does not apply a reason, not an error."""
    try:
        return _verify_tests(pristine, tests, bug, test_edit, check, work)
    except (OpsBenchError, OSError) as exc:
        return f"an edit does not apply: {exc}", {}
