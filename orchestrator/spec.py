"""Loading scenario specs and their ground truth from YAML.

A scenario lives in its own directory under ``scenario_specs/``: ``scenario.yaml`` and,
beside it, the ground-truth file the spec names (``ground_truth.yaml`` by default).
"""

from __future__ import annotations

import copy
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator import paths
from orchestrator.errors import Problem, SpecInvalid
from orchestrator.schemacheck import schema_problems
from orchestrator.yamlfile import read_yaml

SPEC_FILENAME = "scenario.yaml"


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

    @property
    def noise(self) -> list[dict[str, Any]]:
        """Background noise kept running while the agent works (`noise`): empty when the scenario has none."""
        return [{"args": {}, **n} for n in self.data.get("noise", [])]

    @property
    def reference(self) -> list[dict[str, Any]]:
        """The reference solution's roles (verify-scenarios): empty when the scenario has none."""
        return [{"args": {}, **r} for r in self.data.get("reference", [])]

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
    data = read_yaml(path)
    if not isinstance(data, dict):
        raise SpecInvalid([Problem(str(path), "$", "a scenario spec must be a YAML mapping")])
    problems = schema_problems(path, data, "scenario")
    if problems:
        raise SpecInvalid(problems)
    return Scenario(path=path, data=data)
