"""Loading scenario specs and their ground truth from YAML.

A scenario lives in its own directory under ``scenario_specs/``: ``scenario.yaml`` and,
beside it, the ground-truth file the spec names (``ground_truth.yaml`` by default).
"""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from orchestrator import paths
from orchestrator.errors import OpsBenchError, Problem, SpecInvalid

SPEC_FILENAME = "scenario.yaml"


@cache
def load_schema(name: str) -> dict[str, Any]:
    schema: dict[str, Any] = json.loads((paths.SCHEMAS_DIR / f"{name}.schema.json").read_text())
    return schema


def read_yaml(path: Path) -> Any:
    """Parse one YAML file; a syntax error becomes a SpecInvalid naming file and line."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise SpecInvalid([Problem(str(path), "$", f"cannot read file: {exc.strerror}")]) from exc
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "$"
        problem = getattr(exc, "problem", None) or str(exc)
        raise SpecInvalid([Problem(str(path), where, f"malformed YAML: {problem}")]) from exc


def environment_role(application: str, backend: str = "local") -> str:
    """The role that deploys ``application`` on ``backend``: env_<app>; on Kubernetes env_k8s_<app> when the
    application also has a local role (the shop), else env_<app> (applications that exist only on a cluster)."""
    if backend == "kubernetes" and (paths.ROLES_DIR / f"env_k8s_{application}").is_dir():
        return f"env_k8s_{application}"
    return f"env_{application}"


@dataclass(frozen=True)
class Scenario:
    """A loaded spec. ``data`` is the YAML as written; accessors apply the schema defaults."""

    path: Path
    data: dict[str, Any]

    @property
    def id(self) -> str:
        return str(self.data["metadata"]["id"])

    @property
    def version(self) -> int:
        return int(self.data["metadata"].get("version", 1))

    @property
    def ground_truth_path(self) -> Path:
        return self.path.parent / str(self.data.get("groundTruth", "ground_truth.yaml"))

    @property
    def environment(self) -> dict[str, Any]:
        env: dict[str, Any] = copy.deepcopy(self.data["environment"])
        env.setdefault("args", {})
        env.setdefault("reuse", True)
        obs = env.setdefault("observability", {})
        for family in ("metrics", "traces", "logs"):
            obs.setdefault(family, True)
        return env

    @property
    def backend(self) -> str:
        return str(self.data["environment"].get("backend", "local"))

    @property
    def environment_role(self) -> str:
        return environment_role(self.data["environment"]["application"], self.backend)

    @property
    def faults(self) -> list[dict[str, Any]]:
        return [{"args": {}, **f} for f in self.data["faults"]]

    def checks(self, phase: str) -> list[dict[str, Any]]:
        checks = self.data["checks"]
        items = checks.get(phase) if phase != "recovery" else checks.get("recovery", checks["baseline"])
        return [{"args": {}, "timeout": 60, **c} for c in items or []]

    @property
    def evaluators(self) -> list[dict[str, Any]]:
        return [{"params": {}, **e} for e in self.data["evaluation"]["evaluators"]]

    @property
    def digest(self) -> str:
        """Content hash of spec + ground truth: identifies exactly what a run used."""
        h = hashlib.sha256(self.path.read_bytes())
        if self.ground_truth_path.is_file():
            h.update(self.ground_truth_path.read_bytes())
        return h.hexdigest()[:16]


def spec_files(roots: list[Path] | None = None) -> list[Path]:
    """Every scenario.yaml under the given files/dirs (default: scenario_specs/)."""
    found: list[Path] = []
    for root in roots or [paths.SPECS_DIR]:
        if root.is_dir():
            found.extend(sorted(root.rglob(SPEC_FILENAME)))
        else:
            found.append(root)
    return found


def load_scenario(path: Path) -> Scenario:
    """A spec that matches the schema, so every accessor of :class:`Scenario` can trust its types (the
    semantic checks are `opsbench validate`'s, see :func:`find_scenario`); else SpecInvalid, located."""
    from orchestrator.validate import schema_problems

    data = read_yaml(path)
    if not isinstance(data, dict):
        raise SpecInvalid([Problem(str(path), "$", "a scenario spec must be a YAML mapping")])
    problems = schema_problems(path, data, "scenario")
    if problems:
        raise SpecInvalid(problems)
    return Scenario(path=path, data=data)


def find_scenario(name: str) -> Scenario:
    """Resolve a scenario by id (or by a path to its spec or directory) and validate it."""
    from orchestrator.validate import validate_scenario_file

    candidate = Path(name)
    if candidate.is_dir():
        candidate = candidate / SPEC_FILENAME
    if not candidate.is_file():
        candidate = paths.SPECS_DIR / name / SPEC_FILENAME
    if not candidate.is_file():
        known = ", ".join(s.parent.name for s in spec_files()) or "none"
        raise OpsBenchError(f"no scenario named '{name}' (known: {known}); try `opsbench list`")
    problems = validate_scenario_file(candidate)
    if problems:
        raise SpecInvalid(problems)
    return load_scenario(candidate)
