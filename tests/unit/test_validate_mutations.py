"""`opsbench validate` never raises: every field of real specs and ground truths, set to null or a wrong type.

Deterministic and exhaustive (not random, unlike tests/unit/test_fuzz_specs.py): for one real scenario of each
domain and backend (SRE local loopweb and shop, SRE kubernetes, CISO host and Kubernetes, FinOps data insight,
anomaly ranking and cost incident), every field path of scenario.yaml and of ground_truth.yaml, role arguments
included, is set in turn to null and to two values of the wrong kind (a scalar and a list where a mapping is, a
scalar and a mapping where a list is, a list and a mapping where a scalar is). The validator that `opsbench
validate` runs (``validate_scenario_file``, on a temp copy) must return problems, never raise, and each problem
names the file and a JSON path; at least one names the mutated field or a field that contains it.

A few places hold free-form data by design (FREE_FORM); a mutation there may be accepted, but never raises.
Speed: mutated files are written as JSON (which is YAML) and parsed by libyaml; the role, registry and topology
files, which no mutation touches, are read once. About 20 s of CPU for ~2,800 mutations.
"""

from __future__ import annotations

import copy
import functools
import json
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from orchestrator import argspecs, paths, validate
from orchestrator.validate import validate_scenario_file

BASES = [
    "loopweb-web-down",  # SRE, local, loopweb
    "shop-cart-down-mitigate",  # SRE, local, shop: alerts gate, propagations, mitigations with checks
    "k8s-shop-cart-scaled-to-zero",  # SRE, kubernetes
    "ciso-sticky-bit-compliant",  # CISO, host
    "ciso-k8s-kyverno-privileged-noncompliant",  # CISO, kubernetes (violations)
    "finops-top-applications",  # FinOps data insight (answers, rows)
    "finops-anomaly-ranking",  # FinOps anomalies (rank)
    "finops-cost-autoscaler-misconfigured",  # FinOps cost incident on the live shop
]
FILES = ("scenario.yaml", "ground_truth.yaml")
# (file, path prefix) -> why any value is fine below it.
FREE_FORM = {
    ("ground_truth.yaml", ("finops", "dataset")): "the generator arguments, informative only",
    ("ground_truth.yaml", ("finops", "anomalies", "series")): "the series the prompt names, informative only",
}

Path_ = tuple[Any, ...]


def json_path(parts: Path_) -> str:
    return "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts)


def field_paths(node: Any, prefix: Path_ = ()) -> Iterator[tuple[Path_, Any]]:
    """Every (path, value) below the root, depth first."""
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else []
    for key, child in items:
        yield (*prefix, key), child
        yield from field_paths(child, (*prefix, key))


def wrong_values(value: Any) -> list[tuple[str, Any]]:
    """Null, and two values of another kind than ``value``."""
    if isinstance(value, dict):
        return [("null", None), ("scalar", "x"), ("list", ["x"])]
    if isinstance(value, list):
        return [("null", None), ("scalar", "x"), ("mapping", {"x": 1})]
    return [("null", None), ("list", [value]), ("mapping", {"x": value})]


def mutated(data: Any, path: Path_, value: Any) -> Any:
    """``data`` with the node at ``path`` replaced; only the containers along the path are copied."""
    if not path:
        return value
    out = copy.copy(data)
    out[path[0]] = mutated(data[path[0]], path[1:], value)
    return out


def free_form(file: str, path: Path_, kind: str) -> bool:
    if any(f == file and path[:len(p)] == p and len(path) > len(p) for f, p in FREE_FORM):
        return True
    # A reference row's cell may be null: SQL NULL is a value.
    return file == "ground_truth.yaml" and path[:2] == ("finops", "answers") and len(path) == 6 and kind == "null"


def located(problem_path: str, target: str) -> bool:
    """The problem names the mutated field or one that contains it (not just the document root)."""
    return problem_path != "$" and (problem_path == target or target.startswith((problem_path + ".",
                                                                                 problem_path + "[")))


@pytest.fixture
def fast_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    """libyaml for the (re-read) files under test, and one read of the role, registry and topology files,
    which no mutation touches. Parsing is not what this test is about; the values are."""
    monkeypatch.setattr(yaml, "safe_load", lambda text: yaml.load(text, Loader=yaml.CSafeLoader))
    monkeypatch.setattr(argspecs, "load_argument_specs", functools.cache(argspecs.load_argument_specs))
    monkeypatch.setattr(validate, "load_registry", functools.cache(validate.load_registry))
    monkeypatch.setattr(validate, "load_topology", functools.cache(validate.load_topology))


def dump(data: Any) -> str:
    """As JSON, which is YAML too (and much faster to write than PyYAML's emitter)."""
    return json.dumps(data, ensure_ascii=False)


def test_every_field_null_or_wrong_type_is_reported_never_raised(tmp_path: Path, fast_reads: None) -> None:
    counts: Counter[str] = Counter()
    failures: list[str] = []
    for base in BASES:
        scenario = tmp_path / base
        scenario.mkdir()
        for name in FILES:
            (scenario / name).write_text((paths.SPECS_DIR / base / name).read_text())
        spec = scenario / "scenario.yaml"
        assert validate_scenario_file(spec) == [], f"{base} must be valid before it is mutated"
        for name in FILES:
            file = scenario / name
            original = file.read_text()
            data = yaml.safe_load(original)
            for path, value in list(field_paths(data)):
                target = json_path(path)
                for kind, wrong in wrong_values(value):
                    file.write_text(dump(mutated(data, path, wrong)))
                    case = f"{base}/{name} {target} = {kind}"
                    counts["mutations"] += 1
                    try:
                        problems = validate_scenario_file(spec)
                    except Exception as exc:  # the property under test: report, never raise
                        failures.append(f"{case}: raised {type(exc).__name__}: {exc}")
                        continue
                    bad = [p for p in problems if p.file not in (str(spec), str(scenario / "ground_truth.yaml"))
                           or not p.path.startswith("$") or not p.message.strip()]
                    if bad:
                        failures.append(f"{case}: unlocated problem(s) {bad}")
                    if free_form(name, path, kind):
                        counts["free-form"] += 1
                        continue
                    if not any(p.file == str(file) and located(p.path, target) for p in problems):
                        failures.append(f"{case}: no problem at {target} in {name}: {problems}")
                    else:
                        counts["rejected"] += 1
            file.write_text(original)
    print(f"validate mutations: {dict(counts)}")
    assert not failures, f"{len(failures)} of {counts['mutations']} mutations:\n" + "\n".join(failures[:40])
    assert counts["mutations"] >= 2500, counts  # the walk reached every field of the 8 scenarios
    assert counts["free-form"] < counts["mutations"] // 20, counts


@pytest.mark.parametrize(("edit", "where", "message"), [
    # Values the schema cannot judge: YAML types JSON does not have, and a recursive alias.
    (lambda t: t + "timeouts: {1: {job: 3}}\n", "$.timeouts", "key 1 is a YAML int"),
    (lambda t: t.replace("  application: loopweb\n", "  application: loopweb\n  args: {when: 2024-01-01}\n"),
     "$.environment.args.when", "a YAML date is not a JSON value"),
    (lambda t: t + "timeouts: &t {deploy: *t}\n", "$.timeouts.deploy", "recursive YAML alias"),
    # Past what Eq. 6 can compute (math.cbrt overflows on a huge int), and a NaN that compares false to anything.
    (lambda t: t.replace("propagationLength: 2", "propagationLength: 1" + "0" * 400),
     "$.metadata.complexity.propagationLength", "is greater than the maximum"),
    (lambda t: t.replace("value: 1.59", "value: .nan"), "$.metadata.complexity.value", "is nan but Eq. 6 gives"),
])
def test_yaml_beyond_json_is_reported(tmp_path: Path, edit: Any, where: str, message: str) -> None:
    scenario = tmp_path / "loopweb-web-down"
    for name in FILES:
        scenario.mkdir(exist_ok=True)
        (scenario / name).write_text((paths.SPECS_DIR / "loopweb-web-down" / name).read_text())
    spec = scenario / "scenario.yaml"
    text = spec.read_text()
    spec.write_text(edit(text))
    assert spec.read_text() != text, "the edit must change the spec"
    problems = validate_scenario_file(spec)
    assert any(p.file == str(spec) and p.path == where and message in p.message for p in problems), problems


def test_cli_reports_a_null_list_located_without_traceback(tmp_path: Path) -> None:
    """The crash of issue 22: `firing: null` in the alerts gate raised a TypeError in `opsbench validate`."""
    scenario = tmp_path / "specs" / "shop-cart-down-mitigate"
    scenario.mkdir(parents=True)
    for name in FILES:
        (scenario / name).write_text((paths.SPECS_DIR / "shop-cart-down-mitigate" / name).read_text())
    data = yaml.safe_load((scenario / "scenario.yaml").read_text())
    gate = next(i for i, c in enumerate(data["checks"]["manifestation"]) if c["role"] == "check_alerts")
    data["checks"]["manifestation"][gate]["args"]["firing"] = None
    technologies = data["metadata"]["complexity"]["technologies"]
    data["metadata"]["complexity"]["technologies"] = None
    (scenario / "scenario.yaml").write_text(yaml.safe_dump(data, sort_keys=False))

    proc = subprocess.run([sys.executable, "-m", "orchestrator.cli", "validate", str(tmp_path / "specs"), "--json"],
                          capture_output=True, text=True, timeout=120, cwd=paths.PROJECT_ROOT, check=False)
    assert proc.returncode == 1, proc
    assert "Traceback" not in proc.stderr, proc.stderr
    problems = json.loads(proc.stdout)["problems"]
    assert {(p["file"], p["path"]) for p in problems} == {
        (str(scenario / "scenario.yaml"), "$.metadata.complexity.technologies")}, problems
    # The schema problem hides the semantic ones; with the schema satisfied, the null argument is reported.
    data["metadata"]["complexity"]["technologies"] = technologies
    (scenario / "scenario.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    proc = subprocess.run([sys.executable, "-m", "orchestrator.cli", "validate", str(scenario), "--json"],
                          capture_output=True, text=True, timeout=120, cwd=paths.PROJECT_ROOT, check=False)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc
    problems = json.loads(proc.stdout)["problems"]
    assert [(p["path"], p["message"]) for p in problems] == [
        (f"$.checks.manifestation[{gate}].args",
         "argument 'firing' is null: give a value, or leave it out to use the role's default")], problems
