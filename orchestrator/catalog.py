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
from orchestrator.validate import validate_scenario_file


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
    problems = validate_scenario_file(candidate)
    if problems:
        raise SpecInvalid(problems)
    return load_scenario(candidate)


def domain_scenarios(domain: str) -> list[Scenario]:
    """Every scenario of ``domain`` (SRE, CISO, FinOps, DevOps), each validated."""
    return [find_scenario(str(f)) for f in spec_files()
            if load_scenario(f).data.get("metadata", {}).get("domain") == domain]


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
