"""DevOps fix and write-tests tasks, scored by building and testing, never by reading the agent's report.

Each stage of the ground truth's ``workspace.stages`` names a task, its kind and a project of the workspace:

* ``fix``: the agent's tree of the project is copied (without its history and build output) into a scratch
  directory, the protected files (the Makefile's gate and the tests, `projects.yml`) are put back from the pristine
  project, the hidden tests of an issue are added, and ``make check`` runs in a fresh container of the workspace
  image with no network. It passes when it exits 0 and its test report counts no failure and at least the
  project's tests plus the hidden ones as passed (a build that skips the tests does not pass). A pipeline's build
  stage names the tests of its later issue stage as ``withheld_tests`` (the edits that hid them, applied again)
  and their count: it is scored against its own cause, and an agent that repaired the build and not yet the issue
  passes it.
* ``write-tests``: the agent's new or changed test files go into the pristine project with the bug applied and
  into the pristine project; they pass when the first fails with test failures and the second passes with more
  tests than the pristine suite.

The agent's output file (the fix or tests report) is read and its status recorded, but it decides nothing.
"""

from __future__ import annotations

import difflib
import fnmatch
import functools
import json
import re
import secrets
import shutil
import subprocess
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml

from orchestrator import paths
from orchestrator.evaluation.outputs import load_output

PROJECTS_FILE = paths.ROLES_DIR / "env_workspace" / "files" / "projects.yml"
SOURCE_DIR = paths.ROLES_DIR / "env_workspace" / "files" / "projects"
IMAGE = "localhost/opsbench-workspace:current"
# Never copied from the agent's tree: history, build output, caches, reports (a report must come from this run).
SKIPPED = (".git", "target", ".venv", "bin", "__pycache__", ".pytest_cache", ".ruff_cache", ".mypy_cache",
           "*.egg-info", "test-report.*", ".opsbench-fetch.json")
"""(.opsbench-fetch.json: the fetch record of an upstream project's pristine tree, never in a workspace.)"""
OUTPUT_TAIL = 4000


@dataclass
class CheckRun:
    """One `make check` in a fresh container."""

    rc: int | None
    passed: int
    failed: int
    timed_out: bool
    seconds: float
    tail: str
    report: bool

    @property
    def ok(self) -> bool:
        return self.rc == 0 and self.failed == 0


def load_projects(file: Path = PROJECTS_FILE) -> dict[str, dict[str, Any]]:
    data = yaml.safe_load(file.read_text())
    if not isinstance(data, dict):
        raise ValueError(f"{file}: must map each project to how it is checked")
    return data


def glob_regex(pattern: str) -> re.Pattern[str]:
    """A path glob as a regex: `**/` any directories (or none), `**` anything, `*` and `?` within one name."""
    out, i = "", 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif pattern.startswith("**", i):
            out, i = out + ".*", i + 2
        elif pattern[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif pattern[i] == "?":
            out, i = out + "[^/]", i + 1
        else:
            out, i = out + re.escape(pattern[i]), i + 1
    return re.compile(out + r"\Z")


def matches(rel: str, globs: Iterable[str]) -> bool:
    return any(glob_regex(g).match(rel) for g in globs)


def files_of(root: Path) -> list[str]:
    """Every file (or symlink) under root, relative, minus what is never copied."""
    found = []
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if any(fnmatch.fnmatch(part, pat) for part in rel.parts for pat in SKIPPED):
            continue
        if path.is_symlink() or path.is_file():
            found.append(rel.as_posix())
    return found


def copy_files(src: Path, dst: Path, rels: Iterable[str]) -> None:
    for rel in rels:
        target = dst / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.is_symlink() or target.exists():
            target.unlink()
        source = src / rel
        if source.is_symlink():
            target.symlink_to(source.readlink())  # resolved inside the container, where nothing of the host is
        else:
            shutil.copyfile(source, target)


def apply_edits(root: Path, edits: Iterable[dict[str, Any]]) -> None:
    """The ground truth's edits (hidden tests, a bug) on a scratch copy; a defect of the scenario raises."""
    for edit in edits:
        path = root / edit["path"]
        if "old" in edit:
            text = path.read_text()
            if text.count(edit["old"]) != 1:
                raise ValueError(f"{edit['path']}: the bug's text occurs {text.count(edit['old'])} times, not once")
            path.write_text(text.replace(edit["old"], edit["new"], 1))
        elif "content" in edit:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(edit["content"])
        elif path.exists():
            path.unlink()


def protected_tests(meta: dict[str, Any]) -> list[str]:
    """The protected globs that hold tests (all but the Makefile and other single files at the top)."""
    return [g for g in meta["protected"] if "*" in g]


def prepare_fix(agent: Path, pristine: Path, meta: dict[str, Any], hidden: list[dict[str, Any]], dst: Path) -> None:
    """The agent's tree with the protected files exactly as in the pristine project, plus the hidden tests."""
    mine = [r for r in files_of(agent) if not matches(r, meta["protected"])]
    copy_files(agent, dst, mine)
    copy_files(pristine, dst, [r for r in files_of(pristine) if matches(r, meta["protected"])])
    apply_edits(dst, hidden)


def agent_tests(agent: Path, pristine: Path, meta: dict[str, Any]) -> list[str]:
    """Test files the agent added or changed (under the protected test globs)."""
    out = []
    for rel in files_of(agent):
        if not matches(rel, protected_tests(meta)) or (agent / rel).is_symlink():
            continue
        theirs = pristine / rel
        if not theirs.is_file() or theirs.read_bytes() != (agent / rel).read_bytes():
            out.append(rel)
    return out


def tree_diff(agent: Path, pristine: Path, max_bytes: int = 200_000) -> tuple[list[str], str]:
    """What differs between the agent's project and the pristine one (files, then a unified diff of the text files,
    cut at `max_bytes`): the record of the agent's work, whatever its report says."""
    mine, theirs = set(files_of(agent)), set(files_of(pristine))
    changed: list[str] = []
    chunks: list[str] = []
    for rel in sorted(mine | theirs):
        a, b = pristine / rel, agent / rel
        old = a.read_bytes() if rel in theirs and not a.is_symlink() else b""
        new = b.read_bytes() if rel in mine and not b.is_symlink() else b""
        if rel in mine and rel in theirs and old == new and a.is_symlink() == b.is_symlink():
            continue
        changed.append(rel)
        try:
            chunks += difflib.unified_diff(old.decode().splitlines(keepends=True),
                                           new.decode().splitlines(keepends=True),
                                           f"a/{rel}" if rel in theirs else "/dev/null",
                                           f"b/{rel}" if rel in mine else "/dev/null")
        except UnicodeDecodeError:
            chunks.append(f"Binary files a/{rel} and b/{rel} differ\n")
    return changed, "".join(chunks)[:max_bytes]


def prepare_variant(pristine: Path, agent: Path, tests: list[str], bug: list[dict[str, Any]], dst: Path) -> None:
    copy_files(pristine, dst, files_of(pristine))
    apply_edits(dst, bug)
    copy_files(agent, dst, tests)


def count_report(root: Path, kind: str) -> tuple[int, int, bool]:
    """(passed, failed, report found) from the test report `make check` left in root."""
    if kind == "gotest":
        report = root / "test-report.txt"
        if not report.is_file():
            return 0, 0, False
        text = report.read_text(errors="replace")
        return (len(re.findall(r"^\s*--- PASS: ", text, re.M)), len(re.findall(r"^\s*--- FAIL: ", text, re.M)), True)
    files = (sorted((root / "target" / "surefire-reports").glob("TEST-*.xml")) if kind == "surefire"
             else [root / "test-report.xml"])
    passed = failed = 0
    found = False
    for file in files:
        try:
            tree = ET.parse(file)  # written by the run in our scratch copy; expat refuses entity expansion bombs
        except (OSError, ET.ParseError):
            continue
        found = True
        suites = [tree.getroot()] if tree.getroot().tag == "testsuite" else tree.getroot().iter("testsuite")
        for suite in suites:
            n = int(suite.get("tests", 0))
            bad = int(suite.get("failures", 0)) + int(suite.get("errors", 0))
            failed += bad
            passed += n - bad - int(suite.get("skipped", 0))
    return passed, failed, found


def run_check(scratch: Path, project: str, meta: dict[str, Any], image: str = IMAGE, timeout: float = 300,
              uid: int = 1000, runner: Callable[..., subprocess.CompletedProcess[str]] = subprocess.run,
              deps: tuple[str, str] | None = None) -> CheckRun:
    """`make check` (the project's `check` command) in a fresh, networkless, limited container of the image;
    `deps` (host folder, container path) mounts an upstream project's offline registry caches read-only."""
    import time
    subprocess.run(["chown", "-R", f"{uid}:{uid}", str(scratch)], check=True)
    name = f"ob-eval-{secrets.token_hex(4)}"
    mounts = [f"--mount=type=bind,source={deps[0]},destination={deps[1]},ro"] if deps else []
    argv = ["podman", "run", "--rm", f"--name={name}", "--network=none", "--memory=2g", "--memory-swap=2g",
            "--cpus=1.5", "--pids-limit=512", "--init", "--security-opt=no-new-privileges", f"--user={uid}:{uid}",
            "--tmpfs=/tmp:rw,nosuid,nodev,size=512m,mode=1777",
            f"--mount=type=bind,source={scratch},destination=/workspace/{project}", *mounts,
            f"--workdir=/workspace/{project}", image,
            "timeout", "-s", "KILL", str(int(timeout)), "sh", "-c", meta["check"]]
    started = time.monotonic()
    timed_out = False
    try:
        proc = runner(argv, capture_output=True, text=True, timeout=timeout + 60)
        rc: int | None = proc.returncode
        output = proc.stdout + proc.stderr
        timed_out = proc.returncode == 137 and time.monotonic() - started >= timeout
    except subprocess.TimeoutExpired as exc:
        subprocess.run(["podman", "rm", "-f", "-t", "0", name], capture_output=True, check=False)
        rc, timed_out = None, True
        output = (exc.stdout or b"").decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
    passed, failed, found = count_report(scratch, meta["report"])
    return CheckRun(rc, passed, failed, timed_out, round(time.monotonic() - started, 1), output[-OUTPUT_TAIL:], found)


def _fix_stage(stage: dict[str, Any], agent: Path, pristine: Path, meta: dict[str, Any], work: Path,
               check: Callable[[Path], CheckRun]) -> dict[str, Any]:
    scratch = work / f"{stage['task']}-fix"
    # A pipeline's first stage is scored against its own cause only: the tests that catch a later stage's bug,
    # which the workspace hid and the pristine copy put back, are hidden again (`withheld_tests`).
    prepare_fix(agent, pristine, meta, [*stage.get("hidden_tests", []), *stage.get("withheld_tests", [])], scratch)
    run = check(scratch)
    expected = (int(meta["tests"]) + int(stage.get("hidden_test_count", 0))
                - int(stage.get("withheld_test_count", 0)))
    if run.timed_out:
        reason = "make check did not finish in time"
    elif run.rc != 0:
        reason = f"make check failed (exit {run.rc})"
    elif run.failed:
        reason = f"{run.failed} test(s) failed"
    elif run.passed < expected:
        reason = f"only {run.passed} test(s) passed, expected at least {expected} (tests skipped or removed?)"
    else:
        reason = ""
    return {"passed": not reason, "reason": reason or f"make check passed ({run.passed} tests)",
            "expected_tests": expected, "check": asdict(run)}


def _tests_stage(stage: dict[str, Any], agent: Path, pristine: Path, meta: dict[str, Any], work: Path,
                 check: Callable[[Path], CheckRun]) -> dict[str, Any]:
    tests = agent_tests(agent, pristine, meta)
    if not tests:
        return {"passed": False, "reason": "no new or changed test file", "agent_tests": []}
    buggy_dir, fixed_dir = work / f"{stage['task']}-buggy", work / f"{stage['task']}-fixed"
    prepare_variant(pristine, agent, tests, stage["bug"], buggy_dir)
    prepare_variant(pristine, agent, tests, [], fixed_dir)
    fixed = check(fixed_dir)
    buggy = check(buggy_dir) if fixed.ok else None
    if not fixed.ok:
        reason = (f"the tests do not pass on the fixed version (exit {fixed.rc}, {fixed.failed} failed"
                  f"{', timed out' if fixed.timed_out else ''})")
    elif fixed.passed <= int(meta["tests"]):
        reason = f"no test added: {fixed.passed} passed on the fixed version, the project has {meta['tests']}"
    elif buggy is not None and (buggy.rc == 0 or buggy.failed == 0):
        reason = ("the tests pass on the buggy version: they do not catch the bug" if buggy.rc == 0 else
                  f"on the buggy version make check failed (exit {buggy.rc}) without a failing test")
    else:
        reason = ""
    return {"passed": not reason, "reason": reason or f"fails on the buggy version ({buggy.failed if buggy else 0} "
            "failed), passes on the fixed one", "agent_tests": tests,
            "fixed": asdict(fixed), "buggy": asdict(buggy) if buggy else None}


def _bound(check: Callable[[Path, str, dict[str, Any]], CheckRun], project: str,
           meta: dict[str, Any]) -> Callable[[Path], CheckRun]:
    return lambda scratch: check(scratch, project, meta)


def upstream_projects(ws: dict[str, Any]) -> dict[str, tuple[dict[str, Any], Path]]:
    """The upstream projects environment.json's `workspace` publishes (roles/env_workspace `upstream`): per id, how
    it is checked (the shape of projects.yml) and its pristine tree on the host."""
    entries = ws.get("upstream") or []
    if not entries:
        return {}
    src = ws.get("upstream_src")
    if not isinstance(entries, list) or not src:
        raise ValueError("environment.json workspace.upstream: must be a list of projects, with upstream_src set")
    out = {}
    for i, entry in enumerate(entries):
        missing = [k for k in ("id", "check", "report", "tests", "protected") if k not in (entry or {})]
        if missing:
            raise ValueError(f"environment.json workspace.upstream[{i}]: missing {', '.join(missing)}")
        out[str(entry["id"])] = (dict(entry), Path(str(src)) / str(entry["id"]))
    return out


def score_workspace(output_file: Path | None, ground_truth: dict[str, Any], environment: dict[str, Any],
                    work: Path, image: str = IMAGE, timeout: float = 300, source: Path = SOURCE_DIR,
                    projects: dict[str, dict[str, Any]] | None = None,
                    check: Callable[[Path, str, dict[str, Any]], CheckRun] | None = None) -> dict[str, Any]:
    """Score every stage; `workspace_pass` is 1 when all pass. `check` replaces the container run (tests). A stage
    on an upstream project (environment.json `workspace.upstream`) uses its published check and pristine tree, and
    its checks mount the offline caches (`workspace.deps` at `workspace.deps_mount`)."""
    projects = projects if projects is not None else load_projects()
    stages = ground_truth.get("workspace", {}).get("stages", [])
    ws = environment.get("workspace") or {}
    upstream = upstream_projects(ws)
    deps = (str(ws["deps"]), str(ws["deps_mount"])) if upstream and ws.get("deps") and ws.get("deps_mount") else None
    kinds = list(dict.fromkeys(s["kind"] for s in stages))
    report = load_output(output_file, kinds[0]) if kinds else None
    results = []
    for stage in stages:
        project = stage["project"]
        if project in upstream:
            meta, pristine = upstream[project]
            mount = deps
        elif project in projects:
            meta, pristine, mount = projects[project], source / project, None
        else:
            raise ValueError(f"ground truth stage {stage['task']}: project {project} is neither a written project "
                             f"({', '.join(projects)}) nor an upstream one the environment deployed "
                             f"({', '.join(upstream) or 'none'})")
        agent = Path(ws.get("tree", "")) / project
        run_check_here = _bound(check, project, meta) if check else functools.partial(
            run_check, project=project, meta=meta, image=image, timeout=timeout, uid=int(ws.get("uid", 1000)),
            deps=mount)
        base = {"task": stage["task"], "kind": stage["kind"], "project": project}
        if not agent.is_dir():
            results.append({**base, "passed": False, "reason": f"the workspace has no project {project}"})
            continue
        scorer = _fix_stage if stage["kind"] == "fix" else _tests_stage
        changed, diff = tree_diff(agent, pristine)
        if diff:
            # Beside the scores (the scratch copies under `work` are removed): evaluation/<name>-<task>.diff.
            (work.parent / f"{work.name.removesuffix('-work')}-{stage['task']}.diff").write_text(diff)
        results.append({**base, **scorer(stage, agent, pristine, meta, work, run_check_here),
                        "changed_vs_pristine": changed})
    passed = sum(1 for r in results if r["passed"])
    return {
        "status": "scored",
        "workspace_pass": int(bool(results) and passed == len(results)),
        "stages_passed": passed,
        "stages_total": len(results),
        "stage_pass_rate": round(passed / len(results), 3) if results else 0.0,
        "stages": results,
        "report": report.status if report else None,
        "report_reason": report.reason if report else "",
    }


def write_result(scores: dict[str, Any], file: Path) -> None:
    file.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
    file.write_text(json.dumps(scores, indent=2, sort_keys=True))
