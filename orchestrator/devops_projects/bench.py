"""A project's test suite run many times over, fast, on the host: the screening step of task generation.

A `Bench` holds one scratch copy of a fetched project, built once, and runs its tests with a mutation applied,
reporting which test functions fail and what they printed. Python tests import the scratch tree directly
(PYTHONPATH before the installed copy, no bytecode written), so a mutant needs no reinstall; Go reuses the host's
build cache, so only the mutated package is recompiled; Java runs the contract's offline `mvn test` (the compiler
plugin recompiles what changed) and reads Surefire's XML reports. Every run is time-limited and killed with all it
started.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from orchestrator.devops_projects import mutate
from orchestrator.devops_projects.catalogue import Project
from orchestrator.devops_projects.fetch import CONTRACT_FILE, FETCHED, Cache, StepFailed, private_home, run_limited
from orchestrator.devops_projects.issue_text import Failure

SKIP_DIRS = {"tests", "test", "testdata", "docs", "doc", "_example", "examples", "example", "cmd", "tools",
             "benchmarks", "__pycache__", ".venv", "build"}
REPORT = "opsbench-screen.xml"


def _failure(case: ET.Element) -> ET.Element | None:
    """A JUnit XML test case's <failure> or <error> (pytest's and Surefire's reports alike); None when it passed or
    was skipped."""
    found = case.find("failure")
    return found if found is not None else case.find("error")


@dataclass
class Suite:
    """One run of the tests: the failing test functions (by `key`: file and function) with what the runner said,
    how many cases passed, and why the run says nothing about behaviour (it did not build, it hung)."""

    failed: dict[str, Failure] = field(default_factory=dict)
    passed: int = 0
    broken: str = ""
    seconds: float = 0.0


def _copy_tree(src: Path, dst: Path) -> None:
    shutil.copytree(src, dst, symlinks=True, ignore=shutil.ignore_patterns("__pycache__", ".venv", "*.pyc",
                                                                          "test-report.*", FETCHED))


class Bench:
    """The project's scratch copy under `work` (built by `prepare`), its sources, and test runs on it."""

    def __init__(self, project: Project, cache: Cache, work: Path) -> None:
        self.project, self.cache = project, cache
        self.root = work / project.id
        self.baseline_s = 0.0
        self._gomutate: Path | None = None
        self._javamutate = ""
        self._mutations: list[mutate.Mutation] | None = None

    # -- set-up ------------------------------------------------------------------------------------------------

    def prepare(self) -> Suite:
        """Copy and build the project; run its tests once (they must all pass: a project whose tests fail before
        any mutation is a `StepFailed` at step `test`)."""
        if self.root.exists():
            shutil.rmtree(self.root)
        self.root.parent.mkdir(parents=True, exist_ok=True)
        _copy_tree(self.cache.tree(self.project), self.root)
        if self.project.language in ("python", "java"):
            if self.project.language == "java":
                self._javamutate = mutate.javamutate_classpath(self.cache.root)
            proc = run_limited(["make", "-s", "-f", CONTRACT_FILE, "build", f"DEPS={self.cache.deps}"],
                               cwd=self.root, timeout=self.project.limits.build_s, env=self.env(),
                               project=self.project.id, step="build")
            if proc.returncode != 0:
                raise StepFailed(self.project.id, "build", f"`make build` exited {proc.returncode}: "
                                                           f"{proc.stdout.strip()[-600:]}")
        elif self.project.language == "go":
            self._gomutate = mutate.gomutate_binary(self.cache.root)
        else:
            raise StepFailed(self.project.id, "generate", f"no mutation screening for {self.project.language} yet")
        started = time.monotonic()
        suite = self.run(timeout=self.project.limits.test_s)
        self.baseline_s = time.monotonic() - started
        if suite.broken or suite.failed or not suite.passed:
            what = suite.broken or f"{len(suite.failed)} test(s) failed: {', '.join(sorted(suite.failed)[:5])}"
            raise StepFailed(self.project.id, "test", f"the tests do not pass before any mutation ({what}): the "
                                                      "project is dropped from generation")
        return suite

    def env(self) -> dict[str, str | None]:
        home = private_home(self.root.parent / "home")
        base: dict[str, str | None] = {"HOME": str(home), "PIP_CONFIG_FILE": os.devnull, "PIP_NO_INDEX": "1",
                                       "PYTHONDONTWRITEBYTECODE": "1", "GOPROXY": "off", "GOFLAGS": "-mod=readonly",
                                       "GOTOOLCHAIN": "local", "GOPATH": str(home / "go"),
                                       "GOCACHE": os.environ.get("GOCACHE") or str(self.cache.root.resolve()
                                                                                   / "host-gocache")}
        return base

    @property
    def javamutate(self) -> str:
        if not self._javamutate:
            self._javamutate = mutate.javamutate_classpath(self.cache.root)
        return self._javamutate

    @property
    def gomutate(self) -> Path:
        if self._gomutate is None:
            self._gomutate = mutate.gomutate_binary(self.cache.root)
        return self._gomutate

    # -- sources and mutations ---------------------------------------------------------------------------------

    def sources(self) -> list[str]:
        """The project's own non-test source files (relative paths, sorted)."""
        out: list[str] = []
        if self.project.language == "java":  # the Maven layout: main code under src/main/java, nothing else
            return sorted(str(p.relative_to(self.root)) for p in (self.root / "src" / "main" / "java").rglob("*.java")
                          if p.name not in ("package-info.java", "module-info.java"))
        suffix = {"python": ".py", "go": ".go"}[self.project.language]
        for path in sorted(self.root.rglob(f"*{suffix}")):
            rel = path.relative_to(self.root)
            if any(part in SKIP_DIRS or part.startswith((".", "test")) or part.endswith(".egg-info")
                   for part in rel.parts[:-1]):  # test support (testdata, testprotos, testutil) is not the library
                continue
            name = rel.name
            if self.project.language == "python":
                base = 1 if rel.parts[0] == "src" else 0
                package = self.root.joinpath(*rel.parts[:base + 1])
                if (len(rel.parts) <= base + 1 or not (package / "__init__.py").is_file()
                        or name.startswith(("test_", "_version", "_build")) or name == "conftest.py"):
                    continue  # only packages' modules: top-level files are set-up code or a one-file test suite
            elif name.endswith("_test.go"):
                continue
            out.append(str(rel))
        return out

    def mutations(self) -> list[mutate.Mutation]:
        """Every candidate mutation of the project's sources (listed once per bench: the tree is pristine between
        runs)."""
        if self._mutations is None:
            files = self.sources()
            if self.project.language == "go":
                self._mutations = mutate.go_mutations(self.gomutate, self.root.resolve(), files)
            elif self.project.language == "java":
                self._mutations = mutate.java_mutations(self.javamutate, self.root.resolve(), files)
            else:
                self._mutations = [m for rel in files
                                   for m in mutate.python_mutations((self.root / rel).read_text(encoding="utf-8"), rel)]
        return list(self._mutations)

    @contextmanager
    def applied(self, edits: list[dict[str, str]]) -> Iterator[None]:
        """The scratch tree with `edits` applied, restored afterwards whatever happens."""
        saved: dict[str, str] = {}
        try:
            for edit in edits:
                file = self.root / edit["path"]
                text = file.read_text(encoding="utf-8")
                saved.setdefault(edit["path"], text)
                file.write_text(mutate.apply_edit(text, edit), encoding="utf-8")
            yield
        finally:
            for rel, text in saved.items():
                (self.root / rel).write_text(text, encoding="utf-8")

    # -- test runs ---------------------------------------------------------------------------------------------

    RETRY_FACTOR = 4
    """A run over its limit while the host is busy is tried once more with this many times the limit before it
    counts as hung: on the shared 2-core machine a load spike made a third of one project's draws "not finish in
    30 s" (5 x a baseline taken in a quiet moment), though the mutants did not hang. On a quiet host the first limit
    is final: a commons-csv mutant that loops forever cost 26 minutes when every hang was retried at 4 x."""

    @staticmethod
    def host_busy() -> bool:
        """The host's 1-minute load average is above its CPU count: a run over its limit may not be a hang."""
        return os.getloadavg()[0] > (os.cpu_count() or 1)

    def run(self, timeout: float | None = None, only: str = "") -> Suite:
        """The tests (Python: only the test file `only` when given) on the tree as it is now; a run over its limit
        on a busy host gets one more try with RETRY_FACTOR times the limit (a mutant that hangs hangs again)."""
        limit = timeout if timeout is not None else max(20.0, 5 * self.baseline_s + 10)
        started = time.monotonic()
        for attempt in (limit, limit * self.RETRY_FACTOR):
            try:
                suite = (self._run_python(attempt, only) if self.project.language == "python"
                         else self._run_java(attempt) if self.project.language == "java" else self._run_go(attempt))
                break
            except StepFailed as exc:
                suite = Suite(broken=f"the tests did not finish in {attempt:.0f} s" if "time limit" in str(exc)
                              else str(exc))
                if "time limit" not in str(exc) or not self.host_busy():
                    break
        suite.seconds = round(time.monotonic() - started, 2)
        return suite

    def _run_python(self, limit: float, only: str = "") -> Suite:
        report = self.root / REPORT
        report.unlink(missing_ok=True)
        src = "src" if (self.root / "src").is_dir() else "."
        proc = run_limited([".venv/bin/python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "--tb=long",
                            f"--junitxml={REPORT}", *([only] if only else [])], cwd=self.root, timeout=limit,
                           env={**self.env(), "PYTHONPATH": src}, project=self.project.id, step="screen")
        if not report.is_file():
            return Suite(broken=f"pytest left no report (exit {proc.returncode}): {proc.stdout.strip()[-400:]}")
        suite = Suite()
        for case in ET.parse(report).getroot().iter("testcase"):
            bad = _failure(case)
            if bad is None:
                suite.passed += case.find("skipped") is None
                continue
            classname, name = case.get("classname", ""), case.get("name", "")
            file, cls = self._python_file(classname)
            if not file:
                suite.broken = f"a test module failed to load ({classname or name})"
                continue
            func = name.split("[", 1)[0]
            key = f"{file}::{cls + '.' if cls else ''}{func}"
            detail = f"{bad.get('message', '')}\n{bad.text or ''}"
            if key not in suite.failed:
                suite.failed[key] = Failure(test=func, file=file, detail=detail)
        return suite

    def _python_file(self, classname: str) -> tuple[str, str]:
        """(test file, class) of a pytest classname `a.b.test_mod.TestClass`."""
        parts = classname.split(".")
        for cut in range(len(parts), 0, -1):
            rel = "/".join(parts[:cut]) + ".py"
            for base in ("", "src/"):
                if (self.root / base / rel).is_file():
                    return base + rel, ".".join(parts[cut:])
        return "", ""

    def _run_java(self, limit: float) -> Suite:
        """The contract's `make check` (offline `mvn test`), its Surefire reports read: a failing test method's key
        is `src/test/java/<class file>::<Class[.Nested]>.<method>`, its detail the statement of the test that
        failed (from the stack trace's frame in the test file) and the exception with its trace."""
        reports = self.root / "target" / "surefire-reports"
        if reports.exists():
            shutil.rmtree(reports)  # a mutant that does not compile must not be read from the last run's reports
        proc = run_limited(["make", "-s", "-f", CONTRACT_FILE, "check", f"DEPS={self.cache.deps}"], cwd=self.root,
                           timeout=limit, env=self.env(), project=self.project.id, step="screen")
        files = sorted(reports.glob("TEST-*.xml")) if reports.is_dir() else []
        if not files:
            tail = "\n".join(line for line in proc.stdout.splitlines() if "ERROR" in line)[-400:] or \
                proc.stdout.strip()[-400:]
            what = "the build fails (does not compile)" if "COMPILATION ERROR" in proc.stdout or \
                "compil" in proc.stdout.lower() else "the tests do not run (no Surefire report)"
            return Suite(broken=f"{what}, exit {proc.returncode}: {tail}")
        suite = Suite()
        for file in files:
            try:
                root = ET.parse(file).getroot()
            except ET.ParseError as exc:
                suite.broken = f"a Surefire report does not parse ({file.name}: {exc})"
                continue
            for case in root.iter("testcase"):
                bad = _failure(case)
                if bad is None:
                    suite.passed += case.find("skipped") is None
                    continue
                classname, name = case.get("classname", ""), case.get("name", "")
                method = re.split(r"[(\[{ ]", name, maxsplit=1)[0]
                trace = bad.text or f"{bad.get('type', '')}: {bad.get('message', '')}"
                # An inherited test runs in the subclass Surefire names but is written (and hidden) in its base.
                classname = _declaring_class(self.root, classname, method, trace)
                outer = classname.split("$", 1)[0]
                rel = f"src/test/java/{outer.replace('.', '/')}.java"
                if not method or not (self.root / rel).is_file():
                    suite.broken = f"a failing test is not a method of a test file ({classname} {name})"
                    continue
                nested = classname.rsplit(".", 1)[-1].replace("$", ".")
                key = f"{rel}::{nested}.{method}"
                if key in suite.failed:
                    continue
                suite.failed[key] = Failure(test=method, file=rel,
                                            detail=_java_statement(self.root / rel, outer, trace) + trace)
        if proc.returncode != 0 and not suite.failed and not suite.broken:
            suite.broken = f"`make check` exited {proc.returncode} with no failing test: {proc.stdout.strip()[-400:]}"
        return suite

    def _run_go(self, limit: float) -> Suite:
        proc = run_limited(["go", "test", "-count=1", "-json", "./..."], cwd=self.root, timeout=limit,
                           env=self.env(), project=self.project.id, step="screen")
        module = _go_module(self.root)
        outputs: dict[tuple[str, str], list[str]] = {}
        failed_tests: dict[tuple[str, str], None] = {}
        failed_pkgs: set[str] = set()
        suite = Suite()
        for line in proc.stdout.splitlines():
            if not line.startswith("{"):
                if line.strip():
                    outputs.setdefault(("", ""), []).append(line)
                continue
            try:
                event = json.loads(line)
            except ValueError:
                continue
            pkg, test, action = event.get("Package", ""), event.get("Test", ""), event.get("Action", "")
            top = test.split("/", 1)[0]
            if action == "output":
                outputs.setdefault((pkg, top), []).append(event.get("Output", ""))
            elif action == "fail" and test:
                failed_tests[(pkg, top)] = None
            elif action == "fail":
                failed_pkgs.add(pkg)
            elif action == "pass" and test and "/" not in test:
                suite.passed += 1
        with_tests = {p for p, _ in failed_tests}
        no_test = failed_pkgs - with_tests
        if no_test or (("", "") in outputs and proc.returncode != 0 and not failed_tests):
            text = "".join(outputs.get((sorted(no_test)[0], ""), [])) if no_test else "\n".join(outputs[("", "")])
            suite.broken = f"the package does not build or its tests do not run: {text.strip()[-400:]}"
            return suite
        for pkg, top in failed_tests:
            rel = pkg[len(module):].lstrip("/") if pkg.startswith(module) else pkg
            key = f"{rel or '.'}::{top}"
            suite.failed[key] = Failure(test=top, file=rel or ".", detail="".join(outputs.get((pkg, top), [])))
        return suite

    # -- hiding tests ------------------------------------------------------------------------------------------

    def hide_edits(self, failed: dict[str, Failure]) -> list[dict[str, str]]:
        """Edits that remove the failing test functions from the project's tests."""
        if self.project.language == "java":
            by_class_file: dict[str, list[str]] = {}
            for key in failed:
                file, qual = key.split("::", 1)
                cls, method = qual.rsplit(".", 1)
                by_class_file.setdefault(file, []).append(f"{cls}#{method}")
            java_edits: list[dict[str, str]] = []
            for file, targets in sorted(by_class_file.items()):
                java_edits += mutate.java_hide_tests(self.javamutate, self.root.resolve(), file, sorted(targets))
            return java_edits
        if self.project.language == "go":
            by_dir: dict[str, list[str]] = {}
            for key, failure in failed.items():
                by_dir.setdefault(key.split("::", 1)[0], []).append(failure.test)
            edits: list[dict[str, str]] = []
            for directory, names in sorted(by_dir.items()):
                edits += mutate.go_hide_tests(self.gomutate, self.root.resolve(), directory, sorted(names))
            return edits
        by_file: dict[str, list[str]] = {}
        for key in failed:
            file, qual = key.split("::", 1)
            by_file.setdefault(file, []).append(qual)
        edits = []
        for file, quals in sorted(by_file.items()):
            text = (self.root / file).read_text(encoding="utf-8")
            for qual in sorted(quals):
                edit = mutate.python_remove_function(text, file, qual)
                edits.append(edit)
                text = mutate.apply_edit(text, edit)
        return edits


def _go_module(root: Path) -> str:
    match = re.search(r"^module\s+(\S+)", (root / "go.mod").read_text(), re.M)
    return match.group(1) if match else ""


def _declaring_class(root: Path, classname: str, method: str, trace: str) -> str:
    """The test class that declares the failing `method`: the owner of the stack trace's frame running that method
    when it is a class of the project's test sources (`src/test/java`), else `classname`, the class Surefire
    reports. A test method inherited from a base class (commons-cli's `AbstractParserTestCase`) is reported under
    the subclass that ran it, whose file does not declare it; a frame names the class that does."""
    if not method:
        return classname
    for frame in re.finditer(rf"at (?:[\w.@-]*/)*([\w$.]+)\.{re.escape(method)}\(", trace):
        owner = frame.group(1)
        if (root / "src" / "test" / "java" / f"{owner.split('$', 1)[0].replace('.', '/')}.java").is_file():
            return owner
    return classname


def _java_statement(test_file: Path, outer: str, trace: str) -> str:
    """The statement of the test that failed, as `> line` lines (what pytest shows with `>`): the first frame of the
    stack trace in the test class's file, read up to the statement's `;` (at most five lines); '' when none."""
    frame = re.search(rf"at {re.escape(outer)}(?:\$[\w$]+)?\.[\w$<>]+\({re.escape(test_file.name)}:(\d+)\)", trace)
    if not frame:
        return ""
    lines = test_file.read_text(encoding="utf-8", errors="replace").split("\n")
    first = int(frame.group(1)) - 1
    out: list[str] = []
    for line in lines[first:first + 5]:
        out.append(line.strip())
        if line.rstrip().endswith((";", "{", "}")):
            break
    return "".join(f"> {line}\n" for line in out if line)
