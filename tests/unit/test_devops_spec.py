"""The DevOps domain (issue 21) in specs, validation, output schemas and manifests, offline.

Each spec is written under tmp_path (scenario_specs/ holds only scenarios proven live) for the workspace environment
(roles/env_workspace), with its id registered in a tmp registry. Evaluators of fix and write-tests come later; their
outputs are validated against their schemas now.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from fuzzing import cases
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator import paths
from orchestrator.docgen import OUTPUT_SCHEMAS
from orchestrator.errors import Problem
from orchestrator.evaluation.outputs import SCHEMAS, load_output, schema_errors, shared_output_conflicts
from orchestrator.harness.record import not_replayable
from orchestrator.harness.replay import live_only_tasks
from orchestrator.run_vars import build_manifest
from orchestrator.schemacheck import load_schema
from orchestrator.spec import load_scenario
from orchestrator.trials import LIVE_ONLY_KINDS
from orchestrator.validate import validate_paths, validate_scenario_file

CLASSES = ("build-config", "monitoring", "issue-resolving", "test-generation", "pipeline")
GOALS = {
    "diagnose": "One process in the workspace misbehaves. Name it and what is wrong with it.",
    "fix": "The build of stockkeeper fails. Make `mvn -o package` pass without weakening the tests.",
    "write-tests": "Write tests for invoicer's payment terms that fail on the bug described in ISSUE.md.",
}
# The task kinds each class poses in these tests (a pipeline chains two of them).
CLASS_KINDS = {"build-config": ["fix"], "monitoring": ["diagnose"], "issue-resolving": ["fix"],
               "test-generation": ["write-tests"], "pipeline": ["fix", "write-tests"]}

GOOD_FIX = {"schema": "opsbench/fix/v1", "summary": "The compiler plugin pinned a release Debian lacks; pinned 3.10.1.",
            "changed_files": ["stockkeeper/pom.xml"], "commands": ["cd stockkeeper && mvn -o -q package"],
            "notes": "no test changed"}
GOOD_TESTS = {"schema": "opsbench/write-tests/v1", "test_files": ["/workspace/invoicer/tests/test_terms.py"],
              "summary": "Net-30 terms across a month end.", "command": "cd invoicer && python -m pytest tests"}


def devops_spec(sid: str, cls: str, kinds: list[str]) -> dict[str, Any]:
    return {
        "apiVersion": "opsbench/v1", "kind": "Scenario",
        "metadata": {"id": sid, "name": f"DevOps {cls} test scenario", "domain": "DevOps", "class": cls,
                     "description": f"A {cls} scenario written by the unit tests of the DevOps domain.",
                     "complexity": {"level": "Easy", "propagationLength": 1, "resolutionSteps": 2,
                                    "technologies": ["maven"], "value": 1.26}},
        "environment": {"backend": "local", "application": "workspace"},
        "faults": [],
        "checks": {"baseline": [], "manifestation": []},
        "tasks": [{"id": f"{kind}-{i}", "kind": kind, "goal": GOALS[kind]} for i, kind in enumerate(kinds)],
        "budget": {"wallClockSeconds": 900},
        "evaluation": {"evaluators": [{"role": "evaluate_process"}]},
    }


def devops_truth(sid: str, cls: str) -> dict[str, Any]:
    root: dict[str, Any] = ({"id": "workspace", "rootCause": True, "layer": "process", "faultType": "cpu_spin"}
                            if cls == "monitoring" else
                            {"id": "stockkeeper-build", "rootCause": True, "layer": "configuration"})
    return {"apiVersion": "opsbench/v1", "kind": "GroundTruth", "scenario": sid, "entities": [root]}


@pytest.fixture
def write_spec(tmp_path: Path, registry: Callable[[dict[str, Any]], Path]) -> Callable[..., Path]:
    """``write_spec(cls, kinds, change=None)``: a registered DevOps spec and its ground truth; returns the spec."""
    ids: dict[str, Any] = {}

    def write(cls: str, kinds: list[str] | None = None,
              change: Callable[[dict[str, Any]], None] | None = None) -> Path:
        sid = f"devops-{cls}-{len(ids)}"
        folder = tmp_path / "specs" / sid
        folder.mkdir(parents=True)
        spec = devops_spec(sid, cls, kinds or CLASS_KINDS[cls])
        if change:
            change(spec)
        (folder / "scenario.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
        (folder / "ground_truth.yaml").write_text(yaml.safe_dump(devops_truth(sid, cls), sort_keys=False))
        ids[sid] = {"application": "workspace", "faults": []}
        registry(ids)
        return folder / "scenario.yaml"

    return write


def only(problems: list[Problem]) -> Problem:
    assert len(problems) == 1, "expected exactly one problem, got:\n" + "\n".join(map(str, problems))
    return problems[0]


# --- the domain and its classes ------------------------------------------------------------

@pytest.mark.parametrize("cls", CLASSES)
def test_a_devops_spec_of_each_class_validates(write_spec: Callable[..., Path], cls: str) -> None:
    spec = write_spec(cls)
    assert validate_scenario_file(spec) == []
    scn = load_scenario(spec)
    assert (scn.data["metadata"]["domain"], scn.data["metadata"]["class"]) == ("DevOps", cls)


def test_every_devops_class_together_validates(write_spec: Callable[..., Path]) -> None:
    specs = [write_spec(cls) for cls in CLASSES]
    assert validate_paths([specs[0].parent.parent]) == []


@pytest.mark.parametrize("cls", ["process-failure", "Build-Config", "build_config", "monitor"])
def test_a_class_outside_the_devops_classes_is_refused(write_spec: Callable[..., Path], cls: str) -> None:
    spec = write_spec("build-config", change=lambda d: d["metadata"].update({"class": cls}))
    p = only(validate_scenario_file(spec))
    assert (p.file, p.path) == (str(spec), "$.metadata.class")
    assert p.message == f"'{cls}' is not one of {list(CLASSES)}"


def test_the_devops_classes_bind_only_the_devops_domain(spec_copy: Any) -> None:
    """SRE, CISO and FinOps classes stay free: an SRE spec may call its class `monitoring` or anything else."""
    spec_copy.edit(lambda d: d["metadata"].update({"class": "monitoring"}))
    assert validate_scenario_file(spec_copy.spec) == []
    spec_copy.edit(lambda d: d["metadata"].update({"class": "process-failure"}))
    assert validate_scenario_file(spec_copy.spec) == []


def test_the_schema_names_the_devops_domain_and_classes() -> None:
    meta = load_schema("scenario")["properties"]["metadata"]
    assert meta["properties"]["domain"]["enum"] == ["SRE", "CISO", "FinOps", "DevOps"]
    assert tuple(load_schema("scenario")["$defs"]["devopsClass"]["enum"]) == CLASSES
    for cls in CLASSES:
        assert f"`{cls}`" in meta["properties"]["class"]["description"]


def test_monitoring_truth_names_a_process_and_its_anomaly(write_spec: Callable[..., Path]) -> None:
    defs = load_schema("ground_truth")["$defs"]
    assert "process" in defs["layer"]["enum"]
    anomalies = {"memory_leak", "cpu_spin", "fd_leak", "disk_fill", "zombie_storm", "io_hog", "thread_explosion"}
    assert anomalies <= set(defs["faultType"]["enum"])
    assert len(defs["faultType"]["enum"]) == len(set(defs["faultType"]["enum"])), "a fault type listed twice"
    spec = write_spec("monitoring")
    truth = spec.parent / "ground_truth.yaml"
    for anomaly in sorted(anomalies):
        data = yaml.safe_load(truth.read_text())
        data["entities"][0]["faultType"] = anomaly
        truth.write_text(yaml.safe_dump(data))
        assert validate_scenario_file(spec) == [], anomaly
    data["entities"][0]["faultType"] = "cpu_hog"
    truth.write_text(yaml.safe_dump(data))
    p = only(validate_scenario_file(spec))
    assert (p.file, p.path) == (str(truth), "$.entities[0].faultType")
    assert p.message.startswith("'cpu_hog' is not one of ")


# --- task kinds and their output schemas ---------------------------------------------------

def test_every_kind_has_one_output_schema_everywhere() -> None:
    """The scenario schema, the manifest schema, the output loader and the generated docs list the same kinds."""
    spec_kinds = load_schema("scenario")["properties"]["tasks"]["items"]["properties"]["kind"]["enum"]
    manifest_kinds = load_schema("manifest")["properties"]["tasks"]["items"]["properties"]["kind"]["enum"]
    documented = {kind: name for name, kind in OUTPUT_SCHEMAS if kind}
    assert spec_kinds == manifest_kinds == list(SCHEMAS) == list(documented)
    assert documented == SCHEMAS
    assert {"fix", "write-tests"} <= set(spec_kinds)
    assert (SCHEMAS["fix"], SCHEMAS["write-tests"]) == ("fix_output", "tests_output")
    for kind, name in SCHEMAS.items():
        jsonschema.Draft202012Validator.check_schema(load_schema(name))
        assert (paths.SCHEMAS_DIR / f"{name}.schema.json").is_file(), kind


def test_fix_and_write_tests_change_the_world_so_never_replay(write_spec: Callable[..., Path]) -> None:
    assert {"fix", "write-tests"} <= LIVE_ONLY_KINDS
    scn = load_scenario(write_spec("pipeline"))
    assert live_only_tasks(scn) == ["fix-0 (fix)", "write-tests-1 (write-tests)"]
    assert "runs in a DevOps workspace" in (not_replayable(scn) or "")
    # A monitoring scenario poses a diagnose task, which replays elsewhere; the workspace's processes do not freeze.
    assert "runs in a DevOps workspace" in (not_replayable(load_scenario(write_spec("monitoring"))) or "")


def test_fix_output_accepts_a_report() -> None:
    assert schema_errors(GOOD_FIX, "fix") == []
    assert schema_errors({"summary": "restored the missing module line"}, "fix") == []
    desc = load_schema("fix_output")["description"]
    assert "does not trust the report" in desc and "fresh copy" in desc


@pytest.mark.parametrize(("output", "error"), [
    ({"changed_files": ["stockkeeper/pom.xml"]}, "$: 'summary' is a required property"),
    ({"summary": ""}, "summary: '' should be non-empty"),
    ({"summary": "x", "changed_file": ["a"]},
     "$: Additional properties are not allowed ('changed_file' was unexpected)"),
    ({"summary": "x", "schema": "opsbench/diagnosis/v1"}, "schema: 'opsbench/fix/v1' was expected"),
    ({"summary": "x", "changed_files": "pom.xml"}, "changed_files: 'pom.xml' is not of type 'array'"),
    ({"summary": "x", "commands": ["mvn package", ""]}, "commands/1: '' should be non-empty"),
    ({"summary": "x", "notes": 3}, "notes: 3 is not of type 'string'"),
    ({"summary": "x", "changed_files": ["../etc/passwd"]}, "changed_files/0: '../etc/passwd' does not match"),
    ({"summary": "x", "changed_files": ["/etc/passwd"]}, "changed_files/0: '/etc/passwd' does not match"),
    ({"summary": "x", "changed_files": ["a/../../b"]}, "changed_files/0: 'a/../../b' does not match"),
    ({"summary": "x", "changed_files": ["a", "a"]}, "changed_files: ['a', 'a'] has non-unique elements"),
], ids=["no-summary", "empty-summary", "unknown-field", "wrong-version", "files-not-a-list", "empty-command",
        "notes-not-text", "dotdot", "outside-workspace", "dotdot-inside", "duplicate-file"])
def test_fix_output_refuses_a_bad_report(output: dict[str, Any], error: str) -> None:
    errors = schema_errors(output, "fix")
    assert len(errors) == 1 and errors[0].startswith(error), errors


def test_a_refused_path_is_explained_not_just_matched_against_a_regex() -> None:
    (error,) = schema_errors({"summary": "x", "changed_files": ["/etc/passwd"]}, "fix")
    assert "(A workspace path: relative to /workspace" in error


def test_write_tests_output_accepts_a_report() -> None:
    assert schema_errors(GOOD_TESTS, "write-tests") == []
    assert schema_errors({"test_files": ["ratelimit/bucket_test.go"]}, "write-tests") == []


@pytest.mark.parametrize(("output", "error"), [
    ({"summary": "I wrote tests"}, "$: 'test_files' is a required property"),
    ({"test_files": []}, "test_files: [] should be non-empty"),
    ({"test_files": ["t.py"], "tests": ["t.py"]}, "$: Additional properties are not allowed ('tests' was unexpected)"),
    ({"test_files": ["t.py"], "schema": "opsbench/fix/v1"}, "schema: 'opsbench/write-tests/v1' was expected"),
    ({"test_files": ["../t.py"]}, "test_files/0: '../t.py' does not match"),
    ({"test_files": ["t.py"], "command": ""}, "command: '' should be non-empty"),
    ({"test_files": ["t.py"], "command": ["pytest"]}, "command: ['pytest'] is not of type 'string'"),
], ids=["no-files", "empty-files", "unknown-field", "wrong-version", "dotdot", "empty-command", "command-a-list"])
def test_write_tests_output_refuses_a_bad_report(output: dict[str, Any], error: str) -> None:
    errors = schema_errors(output, "write-tests")
    assert len(errors) == 1 and errors[0].startswith(error), errors


@pytest.mark.parametrize(("kind", "good", "bad", "reason"), [
    ("fix", GOOD_FIX, {"summary": "x", "diff": "..."}, "output does not match the fix_output schema at $: "),
    ("write-tests", GOOD_TESTS, {"test_files": []}, "output does not match the tests_output schema at test_files: "),
])
def test_loading_a_submitted_output(tmp_path: Path, kind: str, good: dict[str, Any], bad: dict[str, Any],
                                    reason: str) -> None:
    file = tmp_path / "output.json"
    assert load_output(file, kind).status == "no_submission"
    file.write_text(json.dumps(good))
    assert (load_output(file, kind).status, load_output(file, kind).output) == ("scored", good)
    file.write_text(json.dumps(bad))
    loaded = load_output(file, kind)
    assert loaded.status == "malformed" and loaded.reason.startswith(reason), loaded.reason


# --- manifests -----------------------------------------------------------------------------

def manifest_of(spec: Path, tmp_path: Path) -> dict[str, Any]:
    """The scenario's part of the manifest; valid once handover adds the gateway and the token (roles/agent_access)."""
    manifest = build_manifest(load_scenario(spec), "20261127-000000-abcdef", tmp_path / "run")
    handed_over = {**manifest, "tools": {"url": "http://127.0.0.1:1"}, "token_file": str(tmp_path / "token")}
    jsonschema.Draft202012Validator(load_schema("manifest")).validate(handed_over)
    return manifest


@pytest.mark.parametrize(("cls", "kind", "schema"), [
    ("build-config", "fix", "fix_output"), ("issue-resolving", "fix", "fix_output"),
    ("test-generation", "write-tests", "tests_output"), ("monitoring", "diagnose", "diagnosis_output"),
])
def test_the_manifest_names_the_output_schema_of_the_task(write_spec: Callable[..., Path], tmp_path: Path,
                                                          cls: str, kind: str, schema: str) -> None:
    manifest = manifest_of(write_spec(cls), tmp_path)
    want = str(paths.SCHEMAS_DIR / f"{schema}.schema.json")
    assert [t["kind"] for t in manifest["tasks"]] == [kind]
    assert manifest["output"]["schema"] == want and manifest["output"]["schemas"] == {kind: want}
    assert Path(want).is_file()


def test_a_pipeline_of_two_kinds_validates_and_its_manifest_lists_both(write_spec: Callable[..., Path],
                                                                        tmp_path: Path) -> None:
    spec = write_spec("pipeline")
    assert validate_scenario_file(spec) == []
    manifest = manifest_of(spec, tmp_path)
    assert [(t["id"], t["kind"]) for t in manifest["tasks"]] == [("fix-0", "fix"), ("write-tests-1", "write-tests")]
    assert manifest["tasks"][1]["goal"] == GOALS["write-tests"]
    schemas = manifest["output"]["schemas"]
    assert schemas == {"fix": str(paths.SCHEMAS_DIR / "fix_output.schema.json"),
                       "write-tests": str(paths.SCHEMAS_DIR / "tests_output.schema.json")}
    assert manifest["output"]["schema"] == schemas["fix"]  # the first task's kind
    # One output file answers both tasks: it matches each kind's schema (without a `schema` version field).
    both = {k: v for k, v in {**GOOD_FIX, **GOOD_TESTS}.items() if k != "schema"}
    for kind, file in schemas.items():
        assert list(jsonschema.Draft202012Validator(json.loads(Path(file).read_text())).iter_errors(both)) == []
        assert schema_errors(both, kind) == []
    assert schema_errors({"summary": "fixed", "changed_files": ["a"]}, "write-tests") == [
        "$: 'test_files' is a required property"]


def test_a_pipeline_may_repeat_a_kind(write_spec: Callable[..., Path], tmp_path: Path) -> None:
    spec = write_spec("pipeline", ["fix", "write-tests", "fix"])
    assert validate_scenario_file(spec) == []
    assert list(manifest_of(spec, tmp_path)["output"]["schemas"]) == ["fix", "write-tests"]


@pytest.mark.parametrize(("kinds", "closed", "other", "field"), [
    (["diagnose", "fix"], "fix", "diagnose", "'entities'"),
    (["write-tests", "mitigate"], "write-tests", "mitigate", "'actions'"),
])
def test_kinds_one_output_file_cannot_answer_are_refused(write_spec: Callable[..., Path], kinds: list[str],
                                                         closed: str, other: str, field: str) -> None:
    goals = {"mitigate": "Stop the misbehaving process without losing the build cache."}
    spec = write_spec("pipeline", change=lambda d: d.update(tasks=[
        {"id": f"t{i}", "kind": k, "goal": GOALS.get(k) or goals[k]} for i, k in enumerate(kinds)]))
    p = only(validate_scenario_file(spec))
    assert (p.file, p.path) == (str(spec), "$.tasks")
    assert p.message == (f"a {closed} task and a {other} task cannot share one output file: the {SCHEMAS[closed]} "
                         f"schema refuses {field}, which the {SCHEMAS[other]} schema requires")


def test_every_kind_pair_of_the_devops_classes_can_share_a_file() -> None:
    assert shared_output_conflicts(["fix", "write-tests"]) == []
    assert shared_output_conflicts(["diagnose", "mitigate"]) == []  # the SRE pair, unchanged
    assert shared_output_conflicts(["fix", "fix"]) == []


def test_the_pipeline_companion_fields_match_their_own_schemas() -> None:
    """fix names write-tests' fields and write-tests names fix's, each with the same type as in its own schema."""
    fix, tests = load_schema("fix_output")["properties"], load_schema("tests_output")["properties"]

    def shape(node: dict[str, Any]) -> dict[str, Any]:
        drop = {"description", "minItems"}  # write-tests needs one test file; a fix report naming none is fine
        return {k: (shape(v) if isinstance(v, dict) else v) for k, v in node.items() if k not in drop}

    for name in ("test_files", "command"):
        assert shape(fix[name]) == shape(tests[name]), name
    for name in ("changed_files", "commands", "notes", "summary"):
        assert shape(tests[name]) == shape(fix[name]), name


# --- whatever an agent writes --------------------------------------------------------------

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12)
FIELDS = sorted({*load_schema("fix_output")["properties"], *load_schema("tests_output")["properties"], "diff"})
SHAPED = st.dictionaries(st.sampled_from(FIELDS), JSON | st.lists(st.sampled_from(["a/b.py", "../x", "/etc/x", ""])),
                         max_size=6)


@settings(max_examples=cases("OPSBENCH_FUZZ_DEVOPS_OUTPUTS", 300), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(output=SHAPED | JSON, raw=st.booleans())
def test_any_output_loads_as_scored_or_malformed_with_a_located_reason(tmp_path: Path, output: Any,
                                                                       raw: bool) -> None:
    file = tmp_path / "output.json"
    file.write_text(str(output) if raw else json.dumps(output))
    for kind in ("fix", "write-tests"):
        loaded = load_output(file, kind)
        assert loaded.status in {"scored", "malformed"}
        if loaded.status == "scored":
            assert isinstance(loaded.output, dict) and schema_errors(loaded.output, kind) == []
        else:
            assert loaded.reason.startswith(("output is not JSON: ", f"output does not match the {SCHEMAS[kind]} "
                                                                      "schema at ")), loaded.reason
