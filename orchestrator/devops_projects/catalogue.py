"""The catalogue of upstream projects (projects.yaml, checked against devops_projects.schema.json) and their measured
times (measured.json), read into frozen dataclasses so the fetch and check steps never touch raw YAML.

One reader for both files, so the CLI, the docs generator and the tests see the same projects, the same
way; a problem in either file is one `SpecInvalid` naming the file and the JSON path.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema

from orchestrator.errors import FileUnreadable, OpsBenchError, Problem, SpecInvalid
from orchestrator.schemacheck import json_path, load_schema
from orchestrator.yamlfile import read_yaml

HERE = Path(__file__).resolve().parent
CATALOGUE = HERE / "projects.yaml"
MEASURED = HERE / "measured.json"
# Defaults of a project's `limits` (seconds): generous for the 2-core machine, tight enough to stop a hung build.
DEFAULT_LIMITS = {"fetch_s": 300, "build_s": 600, "test_s": 900}


@dataclass(frozen=True)
class Artifact:
    """One file a registry serves for a project and the sha256 it must have (`role` names it in messages)."""

    role: str
    sha256: str


@dataclass(frozen=True)
class Source:
    """Where a project comes from. `coordinates` is the registry's own name for it (module@version, G:A:V,
    name==version); `artifacts` the files fetched, each with its pinned sha256; `h1` the go.sum hash (Go only)."""

    registry: str
    coordinates: str
    version: str
    artifacts: tuple[Artifact, ...]
    h1: str = ""
    raw: dict[str, Any] = field(default_factory=dict, compare=False, hash=False, repr=False)


@dataclass(frozen=True)
class Limits:
    fetch_s: int
    build_s: int
    test_s: int


@dataclass(frozen=True)
class Project:
    id: str
    language: str
    summary: str
    licence: str
    homepage: str
    source: Source
    limits: Limits
    dropped: str = ""

    @property
    def active(self) -> bool:
        return not self.dropped


@dataclass(frozen=True)
class Wheel:
    name: str
    version: str
    sha256: str


@dataclass(frozen=True)
class Catalogue:
    projects: tuple[Project, ...]
    python_wheels: tuple[Wheel, ...]
    path: Path

    def select(self, ids: list[str] | tuple[str, ...] = (), *, include_dropped: bool = False) -> list[Project]:
        """The projects named by `ids` (all active ones when empty); an unknown id is an error listing the known
        ones. A dropped project is taken only when named or with `include_dropped`."""
        by_id = {p.id: p for p in self.projects}
        unknown = [i for i in ids if i not in by_id]
        if unknown:
            raise OpsBenchError(f"unknown project(s) {', '.join(unknown)} in {self.path}; the projects are "
                                f"{', '.join(sorted(by_id))}")
        if ids:
            return [by_id[i] for i in ids]
        return [p for p in self.projects if include_dropped or p.active]


def _source(raw: dict[str, Any]) -> Source:
    registry = raw["registry"]
    if registry == "go-proxy":
        return Source(registry, f"{raw['module']}@{raw['version']}", raw["version"],
                      (Artifact("zip", raw["sha256"]),), h1=raw["h1"], raw=raw)
    if registry == "maven-central":
        sums = raw["sha256"]
        return Source(registry, f"{raw['group']}:{raw['artifact']}:{raw['version']}", raw["version"],
                      tuple(Artifact(role, sums[role]) for role in ("sources", "test-sources", "pom")), raw=raw)
    return Source(registry, f"{raw['name']}=={raw['version']}", raw["version"], (Artifact("sdist", raw["sha256"]),),
                  raw=raw)


def parse(data: Any, path: Path) -> Catalogue:
    """A checked `Catalogue` from the parsed YAML `data` of `path`: every schema problem (by JSON path) and every
    duplicate id in one `SpecInvalid`."""
    validator = jsonschema.Draft202012Validator(load_schema("devops_projects"))
    problems = [Problem(str(path), json_path(e.absolute_path), e.message)
                for e in sorted(validator.iter_errors(data), key=lambda e: list(map(str, e.absolute_path)))]
    if not problems:
        seen: set[str] = set()
        for i, item in enumerate(data["projects"]):
            if item["id"] in seen:
                problems.append(Problem(str(path), f"$.projects[{i}].id", f"duplicate project id {item['id']}"))
            seen.add(item["id"])
            if not item["id"].startswith(item["language"] + "-"):
                problems.append(Problem(str(path), f"$.projects[{i}].id",
                                        f"{item['id']} must start with its language ({item['language']}-)"))
            expected = {"go": "go-proxy", "java": "maven-central", "python": "pypi"}[item["language"]]
            if item["source"]["registry"] != expected:
                problems.append(Problem(str(path), f"$.projects[{i}].source.registry",
                                        f"a {item['language']} project comes from {expected}"))
    if problems:
        raise SpecInvalid(problems, intro=f"the DevOps project catalogue {path} is invalid")
    projects = tuple(
        Project(id=item["id"], language=item["language"], summary=item["summary"], licence=item["licence"],
                homepage=item.get("homepage", ""), source=_source(item["source"]),
                limits=Limits(**{**DEFAULT_LIMITS, **item.get("limits", {})}), dropped=item.get("dropped", ""))
        for item in data["projects"])
    wheels = tuple(Wheel(w["name"], w["version"], w["sha256"]) for w in data["python_wheels"])
    return Catalogue(projects, wheels, path)


def load(path: Path = CATALOGUE) -> Catalogue:
    return parse(read_yaml(path), path)


def load_measured(path: Path = MEASURED) -> dict[str, dict[str, Any]]:
    """measured.json: project id -> {where ("host" | "workspace") -> that place's last recorded result}; {} when
    the file does not exist yet."""
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise FileUnreadable(Problem(str(path), "$", f"not readable JSON: {exc}")) from exc
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise FileUnreadable(Problem(str(path), "$", "must map each project id to its results by place"))
    return data
