"""Property-based fuzzing of scenario specs (issue 11, item 3): at least 1,000 generated specs.

Each case is a real spec (SRE loopweb and shop, CISO, FinOps) with one to four random mutations (a key deleted, a
value replaced by arbitrary JSON-like data, an unknown key added, a list emptied or duplicated), written as YAML
into a copy of the scenario's directory, or raw text that is rarely YAML at all. The property:

- `validate_scenario_file` never raises: every defect comes back as a `Problem` naming the file, a location
  (`$`-path or `line L, column C`) and a non-empty message;
- a spec it accepts can be turned into everything a run needs (the steps' extra vars and the agent's manifest)
  without raising, and that is JSON-serialisable (it is written to run.json).

The number of cases actually run is counted and asserted, so a lowered `max_examples` cannot pass unnoticed.
"""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from fuzzing import cases
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator import paths
from orchestrator.argspecs import resolve_role_vars
from orchestrator.errors import Problem
from orchestrator.run_vars import scenario_vars
from orchestrator.spec import Scenario
from orchestrator.validate import validate_scenario_file

BASES = ["loopweb-web-down", "shop-cart-down", "shop-multi-redis-down-ads-latency", "ciso-sticky-bit-compliant",
         "finops-anomaly-ranking"]
CASES = cases("OPSBENCH_FUZZ_CASES", 1000)
COUNT: dict[str, int] = {"cases": 0, "accepted": 0, "problems": 0}

json_scalars = (st.none() | st.booleans() | st.integers(-2**40, 2**40) | st.floats(allow_nan=False)
                | st.text(max_size=30))
json_values = st.recursive(json_scalars, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=12), inner, max_size=4), max_leaves=12)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a node of the tree (the root excluded)."""
    out: list[tuple[Any, ...]] = []
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else []
    for key, child in items:
        out.append((*prefix, key))
        out += _paths(child, (*prefix, key))
    return out


def _parent(tree: Any, path: tuple[Any, ...]) -> Any:
    for key in path[:-1]:
        tree = tree[key]
    return tree


@st.composite
def mutated_specs(draw: st.DrawFn) -> tuple[str, str]:
    """(base scenario, spec text): a real spec with random mutations, or raw text."""
    base = draw(st.sampled_from(BASES))
    if draw(st.integers(0, 9)) == 0:
        return base, draw(st.text(max_size=200))
    data = copy.deepcopy(SPECS[base])
    for _ in range(draw(st.integers(1, 4))):
        targets = _paths(data)
        if not targets:
            break
        path = draw(st.sampled_from(targets))
        parent, key = _parent(data, path), path[-1]
        action = draw(st.sampled_from(["delete", "replace", "add", "empty", "duplicate", "retype"]))
        if action == "delete":
            del parent[key]
        elif action == "replace":
            parent[key] = draw(json_values)
        elif action == "add" and isinstance(parent[key], dict):
            parent[key][draw(st.text(min_size=1, max_size=12))] = draw(json_values)
        elif action == "empty" and isinstance(parent[key], list | dict):
            parent[key] = type(parent[key])()
        elif action == "duplicate" and isinstance(parent[key], list) and parent[key]:
            parent[key].append(copy.deepcopy(parent[key][0]))
        elif action == "retype":
            value = parent[key]
            parent[key] = str(value) if not isinstance(value, str) else (int(value) if value.isdigit() else [value])
    return base, yaml.safe_dump(data, sort_keys=False, allow_unicode=True)


SPECS: dict[str, dict[str, Any]] = {
    name: yaml.safe_load((paths.SPECS_DIR / name / "scenario.yaml").read_text()) for name in BASES}


@pytest.fixture(scope="module")
def spec_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("fuzz-specs")
    out = {}
    for name in BASES:
        shutil.copytree(paths.SPECS_DIR / name, root / name)
        out[name] = root / name / "scenario.yaml"
    return out


def _check_problem(problem: Any, spec: Path) -> None:
    assert isinstance(problem, Problem), problem
    assert problem.file in (str(spec), str(spec.parent / "ground_truth.yaml")) or problem.file.endswith(
        ("REGISTRY.yaml", "argument_specs.yml", "topology.yml")), problem
    assert problem.path.startswith(("$", "line ")), problem
    assert problem.message.strip(), problem


@settings(max_examples=CASES, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large])
@given(case=mutated_specs())
def test_any_spec_is_rejected_precisely_or_runnable(spec_dirs: dict[str, Path], tmp_path: Path,
                                                    case: tuple[str, str]) -> None:
    base, text = case
    spec = spec_dirs[base]
    spec.write_text(text)
    COUNT["cases"] += 1
    problems = validate_scenario_file(spec)
    assert isinstance(problems, list)
    for problem in problems:
        _check_problem(problem, spec)
    if problems:
        COUNT["problems"] += 1
        return
    COUNT["accepted"] += 1
    scn = Scenario(path=spec, data=yaml.safe_load(text))
    run_dir = tmp_path / "run"
    built = {"environment": resolve_role_vars(scn.environment_role, "deploy", scn.environment["args"]),
             **scenario_vars(scn, "r-fuzz", run_dir), "digest": scn.digest}
    json.dumps(built)


def test_fuzz_ran_every_case() -> None:
    """Runs after the property (file order): every generated case reached the validator."""
    if COUNT["cases"] == 0:
        pytest.skip("the property test was not selected in this session (e.g. -k), nothing to count")
    assert COUNT["cases"] >= CASES, COUNT
    # Both outcomes were exercised: mutated specs that are still valid, and rejected ones.
    assert COUNT["accepted"] > 0 and COUNT["problems"] > 0, COUNT
    print(f"spec fuzz: {COUNT}")
