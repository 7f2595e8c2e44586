"""The scenario catalog: find a scenario by id or path (validated before use) and list what there is.

Kept apart from `spec` (what a loaded spec is) because finding a scenario validates it, and the validator reads
specs: `spec` -> `validate` -> `spec` would be a cycle.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from orchestrator import paths
from orchestrator.errors import OpsBenchError, SpecInvalid
from orchestrator.spec import SPEC_FILENAME, Scenario, load_scenario, spec_files
from orchestrator.validate import checked_scenario, loaded_problems


def find_scenario(name: str) -> Scenario:
    """Resolve a scenario by id (or by a path to its spec or directory) and validate it."""
    candidate = Path(name)
    if candidate.is_dir():
        candidate = candidate / SPEC_FILENAME
    if not candidate.is_file():
        candidate = paths.SPECS_DIR / name / SPEC_FILENAME
    if not candidate.is_file():
        known = ", ".join(s.parent.name for s in spec_files()) or "none"
        raise OpsBenchError(f"no scenario named '{name}' (known: {known}); try `opsbench list`")
    return valid_scenario(candidate)


def valid_scenario(path: Path) -> Scenario:
    """The spec at `path`, read and checked once; SpecInvalid with every problem when it has any."""
    scn, problems = checked_scenario(path)
    if scn is None:
        raise SpecInvalid(problems)
    return scn


def checked(scn: Scenario) -> Scenario:
    """`scn` (read and schema-checked by `load_scenario`) once its semantic checks passed; else SpecInvalid."""
    problems = loaded_problems(scn)
    if problems:
        raise SpecInvalid(problems)
    return scn


def domain_scenarios(domain: str) -> list[Scenario]:
    """Every scenario of ``domain`` (SRE, CISO, FinOps, DevOps), each read once and validated."""
    return [checked(s) for s in map(load_scenario, spec_files()) if s.data["metadata"]["domain"] == domain]


def scenario_rows() -> list[dict[str, Any]]:
    """One row per scenario spec: id, domain, class, complexity level, name (what `opsbench list` prints)."""
    rows = []
    for file in spec_files():
        meta = load_scenario(file).data.get("metadata", {})
        rows.append({"id": meta.get("id"), "domain": meta.get("domain"), "class": meta.get("class"),
                     "complexity": meta.get("complexity", {}).get("level"), "name": meta.get("name")})
    return rows


def render_scenario_rows(rows: list[dict[str, Any]]) -> str:
    """The rows of `scenario_rows` as the table `opsbench list` prints."""
    lines = [f"{'ID':<36} {'DOMAIN':<7} {'LEVEL':<7} {'CLASS':<22} NAME"]
    for r in rows:
        lines.append(f"{r['id']:<36} {r['domain']:<7} {r['complexity']:<7} {r['class']:<22} {r['name']}")
    return "\n".join(lines)


def template_ids() -> list[str]:
    """The ids of every template: a spec with a `vary` section (docs/generation.md), sorted."""
    return sorted(scn.id for scn in map(load_scenario, spec_files()) if "vary" in scn.data)
