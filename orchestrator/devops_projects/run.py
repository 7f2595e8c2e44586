"""Fetch, verify, build and test the catalogue's projects one at a time and report each: the library function behind
`opsbench devops projects` and `make devops-projects`.

A project that fails is reported with its step and message and the others go on (one bad pin must not hide eleven
good projects); the caller decides the exit status from `failed`. `--record` keeps the passing projects' times in
measured.json, the file the docs table is generated from.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator import paths
from orchestrator.devops_projects import catalogue as cat
from orchestrator.devops_projects.check import REPORT_KIND, CheckResult, check_in_workspace, check_on_host
from orchestrator.devops_projects.fetch import (
    CONTRACT_FILE,
    Cache,
    StepFailed,
    ensure_contract,
    fetch_project,
    fetch_wheels,
    prime_for,
)

WHERE = ("host", "workspace")


def default_cache() -> Cache:
    return Cache(paths.state_folder(paths.state_dir() / "cache" / "devops-projects"))


@dataclass
class ProjectReport:
    id: str
    language: str
    version: str
    licence: str
    coordinates: str
    fetched: bool = False
    cached: bool = False
    fetch_s: float | None = None
    check: dict[str, Any] | None = None
    error: dict[str, str] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if k != "extra"}
        return {**out, **self.extra}


def contract_meta(project: cat.Project, tests: int = 0) -> dict[str, Any]:
    """The project's entry in the shape of roles/env_workspace/files/projects.yml (check command, report kind,
    protected files, build files): the hook task generation uses to place a fetched project in the workspace and
    score it with evaluate_workspace unchanged."""
    return language_meta(project.language, tests)


def language_meta(language: str, tests: int = 0) -> dict[str, Any]:
    """contract_meta by language: what a generated scenario carries in env_workspace's `upstream` args."""
    protected = {"go": ["**/*_test.go", "*_test.go", "**/testdata/**", "testdata/**"],
                 "java": ["src/test/**"],
                 "python": ["tests/**", "**/tests/**", "test_*.py", "**/test_*.py"]}[language]
    build_files = {"go": ["go.mod"], "java": ["pom.xml"],
                   "python": ["pyproject.toml", "setup.py", "setup.cfg"]}[language]
    return {"language": language, "check": f"make -s -f {CONTRACT_FILE} check",
            "report": REPORT_KIND[language], "tests": tests, "protected": [CONTRACT_FILE, *protected],
            "build_files": build_files}


def pristine_tree(project_id: str, cache: Cache | None = None) -> Path:
    """The fetched, verified tree of a project (the cache's copy, never to be edited in place): the other hook of
    task generation, which copies it into a workspace and mutates the copy."""
    catalogue = cat.load()
    project = catalogue.select([project_id])[0]
    cache = cache or default_cache()
    if not cache.fetched(project):
        raise StepFailed(project.id, "fetch", f"not fetched into {cache.root}: run `opsbench devops projects --fetch "
                                              f"{project.id}`")
    return cache.tree(project)


def run_projects(ids: tuple[str, ...] = (), *, fetch: bool = True, check: str | None = None,
                 cache: Cache | None = None, catalogue: cat.Catalogue | None = None,
                 progress: Callable[[str], None] | None = None,
                 checker: Callable[[cat.Project, Cache], CheckResult] | None = None,
                 fetch_env: dict[str, str] | None = None) -> list[ProjectReport]:
    """Each selected project (all active ones by default): fetched and verified into the cache (or found there
    when `fetch` is false), then, with `check` ("host" or "workspace"), built and tested offline. Sequential on
    purpose: the machine has two cores and the times are the figures."""
    catalogue = catalogue or cat.load()
    cache = cache or default_cache()
    say = progress or (lambda _msg: None)
    checker = checker or (check_in_workspace if check == "workspace" else check_on_host)
    reports: list[ProjectReport] = []
    wheels_error: StepFailed | None = None
    projects = catalogue.select(ids)
    if fetch and any(p.language == "python" for p in projects):
        say("python wheels: fetching the pinned build backends and test runner")
        try:
            fetch_wheels(catalogue.python_wheels, cache, env=fetch_env)
        except StepFailed as exc:
            wheels_error = exc
    for project in projects:
        report = ProjectReport(project.id, project.language, project.source.version, project.licence,
                               project.source.coordinates)
        reports.append(report)
        try:
            if fetch:
                if project.language == "python" and wheels_error:
                    raise StepFailed(project.id, "deps", str(wheels_error))
                say(f"{project.id}: fetching {project.source.coordinates}")
                done = fetch_project(project, cache, env=fetch_env, prime=prime_for(project))
                report.fetched, report.cached = True, bool(done["cached"])
                report.fetch_s = float(str(done["fetch_s"]))
            elif not cache.fetched(project):
                raise StepFailed(project.id, "fetch", f"not fetched into {cache.root}: add --fetch")
            else:
                ensure_contract(project, cache.tree(project))
                report.fetched = report.cached = True
            if check:
                say(f"{project.id}: build and test ({check})")
                report.check = checker(project, cache).as_dict()
        except StepFailed as exc:
            report.error = {"step": exc.step, "message": str(exc)}
            say(f"error: {exc}")
    return reports


def record(reports: list[ProjectReport], where: str, path: Path = cat.MEASURED,
           today: dt.date | None = None) -> list[str]:
    """Keep each passing project's figures under measured.json[id][where] (the others' entries stay as they
    were); returns the ids written."""
    data = cat.load_measured(path)
    written = []
    for report in reports:
        if report.error or not report.check or not report.check.get("tests_passed"):
            continue
        kept = ("build_s", "test_s", "passed", "failed", "toolchain", "load")
        figures: dict[str, Any] = {k: report.check[k] for k in kept if k in report.check}
        if report.fetch_s is not None and not report.cached:
            figures["fetch_s"] = report.fetch_s
        elif "fetch_s" in data.get(report.id, {}).get(where, {}):
            figures["fetch_s"] = data[report.id][where]["fetch_s"]
        figures["date"] = (today or dt.datetime.now(dt.UTC).date()).isoformat()
        data.setdefault(report.id, {})[where] = figures
        written.append(report.id)
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    return written
