"""`opsbench validate`: each broken spec is rejected naming the file, the JSON path and the problem.

Every case starts from a copy of a real scenario (which validates cleanly, see
``test_unmodified_copy_is_valid``) and breaks exactly one thing.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from click.testing import CliRunner

from orchestrator import paths
from orchestrator.cli import main
from orchestrator.errors import Problem
from orchestrator.spec import spec_files
from orchestrator.validate import validate_paths, validate_scenario_file

SID = "loopweb-web-down"
TOPOLOGY = paths.ROLES_DIR / "env_loopweb" / "files" / "topology.yml"


def only(problems: list[Problem]) -> Problem:
    """The single problem reported; fails (listing them all) if there are zero or several."""
    assert len(problems) == 1, "expected exactly one problem, got:\n" + "\n".join(map(str, problems))
    return problems[0]


def registered(**entry: Any) -> dict[str, Any]:
    return {SID: {"application": "loopweb", "faults": ["fault_loopweb_stop"], **entry}}


# --- the baseline: real specs are valid ---------------------------------------------------

def test_all_real_specs_validate_cleanly():
    assert len(spec_files()) >= 2
    assert validate_paths() == []


def test_unmodified_copy_is_valid(spec_copy):
    assert validate_paths([spec_copy.root]) == []


def test_cli_accepts_real_specs():
    result = CliRunner().invoke(main, ["validate"])
    assert result.exit_code == 0, result.output
    assert "0 problem(s)" in result.stdout


def test_empty_directory_is_a_problem(tmp_path):
    p = only(validate_paths([tmp_path]))
    assert p.file == str(tmp_path)
    assert "no scenario_specs/*/scenario.yaml found" in p.message


# --- YAML syntax ---------------------------------------------------------------------------

def _indent_line(file, startswith: str) -> int:
    """Indent the first line starting with ``startswith`` by one space; return its 1-based number."""
    lines = file.read_text().splitlines()
    idx = next(i for i, line in enumerate(lines) if line.startswith(startswith))
    lines[idx] = " " + lines[idx]
    file.write_text("\n".join(lines) + "\n")
    return idx + 1


def test_malformed_yaml_names_line_and_column(spec_copy):
    line = _indent_line(spec_copy.spec, "  name: ")  # "   name:" under "  id:" -> bad mapping
    p = only(validate_scenario_file(spec_copy.spec))
    assert p.file == str(spec_copy.spec)
    assert p.path == f"line {line}, column 8"
    assert p.message == "malformed YAML: mapping values are not allowed here"


def test_malformed_ground_truth_yaml_names_its_file_and_line(spec_copy):
    line = _indent_line(spec_copy.ground_truth, "kind: ")
    p = only(validate_scenario_file(spec_copy.spec))
    assert p.file == str(spec_copy.ground_truth)
    assert p.path.startswith(f"line {line}, column ")
    assert p.message.startswith("malformed YAML: ")


def test_spec_that_is_not_a_mapping(spec_copy):
    spec_copy.spec.write_text("- just\n- a list\n")
    p = only(validate_scenario_file(spec_copy.spec))
    assert (p.file, p.path) == (str(spec_copy.spec), "$")
    assert "is not of type 'object'" in p.message


# --- JSON Schema ---------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("change", "path", "fragment"),
    [
        (lambda d: d.update(bogus=1), "$", "'bogus' was unexpected"),
        (lambda d: d["environment"].update(bogus=1), "$.environment", "'bogus' was unexpected"),
        (lambda d: d["metadata"]["complexity"].update(colour="red"), "$.metadata.complexity",
         "'colour' was unexpected"),
        (lambda d: d["faults"][0].update(when="now"), "$.faults[0]", "'when' was unexpected"),
        (lambda d: d["budget"].update(wallClockSeconds="ten"), "$.budget.wallClockSeconds",
         "'ten' is not of type 'integer'"),
        (lambda d: d["metadata"].update(domain="Sales"), "$.metadata.domain",
         "'Sales' is not one of ['SRE', 'CISO', 'FinOps', 'DevOps']"),
        (lambda d: d["checks"]["baseline"][0].update(role="http_check"),
         "$.checks.baseline[0].role", "does not match"),
        (lambda d: d.pop("budget"), "$", "'budget' is a required property"),
    ],
    ids=["unknown-top-level", "unknown-nested", "unknown-deep", "unknown-in-list", "wrong-type",
         "wrong-enum", "bad-role-name", "missing-required"],
)
def test_schema_violations(spec_copy, change, path, fragment):
    spec_copy.edit(change)
    p = only(validate_scenario_file(spec_copy.spec))
    assert (p.file, p.path) == (str(spec_copy.spec), path)
    assert fragment in p.message


# --- role arguments (Ansible's argument-spec validator) ------------------------------------

def test_fault_role_that_does_not_exist(spec_copy, registry):
    registry(registered(faults=["fault_nope"]))  # keep the registry check out of the way
    spec_copy.edit(lambda d: d["faults"][0].update(role="fault_nope"))
    p = only(validate_scenario_file(spec_copy.spec))
    assert (p.file, p.path) == (str(spec_copy.spec), "$.faults[0].args")
    assert p.message.startswith("role 'fault_nope' does not exist")


def test_fault_arg_the_role_does_not_accept(spec_copy):
    spec_copy.edit(lambda d: d["faults"][0].update(args={"program": "web", "signal": "KILL"}))
    p = only(validate_scenario_file(spec_copy.spec))  # once, though inject and remove both check it
    assert (p.file, p.path) == (str(spec_copy.spec), "$.faults[0].args")
    assert "signal" in p.message
    assert "Supported parameters include: program" in p.message
    assert "fault_loopweb_stop_" not in p.message


def test_fault_arg_outside_its_choices(spec_copy):
    spec_copy.edit(lambda d: d["faults"][0]["args"].update(program="db"))
    p = only(validate_scenario_file(spec_copy.spec))
    assert (p.file, p.path) == (str(spec_copy.spec), "$.faults[0].args")
    assert p.message == "value of program must be one of: gateway, web, got: db"


def test_fault_arg_of_wrong_type(spec_copy, registry):
    registry(registered(faults=["fault_loopweb_upstream"]))
    spec_copy.edit(lambda d: d.update(faults=[
        {"name": "upstream", "role": "fault_loopweb_upstream", "args": {"port_offset": "nine"}}]))
    p = only(validate_scenario_file(spec_copy.spec))
    assert p.path == "$.faults[0].args"
    assert "'port_offset' is of type str" in p.message
    assert "fault_loopweb_upstream_" not in p.message


def test_check_missing_a_required_arg(spec_copy):
    spec_copy.edit(lambda d: d["checks"]["manifestation"][1]["args"].pop("endpoint"))
    p = only(validate_scenario_file(spec_copy.spec))
    assert (p.file, p.path) == (str(spec_copy.spec), "$.checks.manifestation[1].args")
    assert p.message == "missing required arguments: endpoint"


def test_recovery_checks_are_validated_too(spec_copy):
    spec_copy.edit(lambda d: d["checks"].update(
        recovery=[{"name": "up", "role": "check_http", "args": {"path": "/"}}]))
    p = only(validate_scenario_file(spec_copy.spec))
    assert p.path == "$.checks.recovery[0].args"
    assert p.message == "missing required arguments: endpoint"


def test_environment_args_are_checked_against_deploy(spec_copy):
    spec_copy.edit(lambda d: d["environment"].update(args={"start_timeout": 5, "colour": "red"}))
    p = only(validate_scenario_file(spec_copy.spec))
    assert p.path == "$.environment.args"
    assert "colour" in p.message
    assert "env_loopweb_" not in p.message


def test_evaluator_params_are_checked(spec_copy):
    spec_copy.edit(lambda d: d["evaluation"]["evaluators"][0].update(params={"strict": True}))
    p = only(validate_scenario_file(spec_copy.spec))
    assert p.path == "$.evaluation.evaluators[0].params"
    assert "strict" in p.message


# --- complexity (ITBench Eq. 6) ------------------------------------------------------------

def test_complexity_value_disagreeing_with_eq6(spec_copy):
    spec_copy.edit(lambda d: d["metadata"]["complexity"].update(value=1.7))
    p = only(validate_scenario_file(spec_copy.spec))
    assert (p.file, p.path) == (str(spec_copy.spec), "$.metadata.complexity.value")
    assert p.message == "is 1.7 but Eq. 6 gives 1.59 for these inputs"


def test_complexity_level_disagreeing_with_value(spec_copy):
    spec_copy.edit(lambda d: d["metadata"]["complexity"].update(level="Medium"))
    p = only(validate_scenario_file(spec_copy.spec))
    assert p.path == "$.metadata.complexity.level"
    assert p.message == "is Medium but value 1.59 is Easy"


def test_complexity_inputs_changed_without_value_and_level(spec_copy):
    spec_copy.edit(lambda d: d["metadata"]["complexity"].update(propagationLength=8))  # 16^(1/3)
    problems = validate_scenario_file(spec_copy.spec)
    assert [(p.path, p.message) for p in problems] == [
        ("$.metadata.complexity.value", "is 1.59 but Eq. 6 gives 2.52 for these inputs"),
        ("$.metadata.complexity.level", "is Easy but value 2.52 is Medium"),
    ]


# --- uniqueness ----------------------------------------------------------------------------

def test_duplicate_fault_names(spec_copy, registry):
    registry(registered(faults=["fault_loopweb_stop", "fault_loopweb_stop"]))
    spec_copy.edit(lambda d: d["faults"].append(
        {"name": "stop-web", "role": "fault_loopweb_stop", "args": {"program": "gateway"}}))
    p = only(validate_scenario_file(spec_copy.spec))
    assert (p.file, p.path) == (str(spec_copy.spec), "$.faults")
    assert p.message == "duplicate name 'stop-web'"


def test_duplicate_check_names(spec_copy):
    spec_copy.edit(lambda d: d["checks"]["manifestation"][1].update(name="web-refuses"))
    p = only(validate_scenario_file(spec_copy.spec))
    assert p.path == "$.checks.manifestation"
    assert p.message == "duplicate name 'web-refuses'"


def test_duplicate_id_across_two_spec_files(make_copy):
    first = make_copy(as_dir="a")
    second = make_copy(as_dir="b")
    p = only(validate_paths([first.root]))
    assert (p.file, p.path) == (str(second.spec), "$.metadata.id")
    assert p.message == f"duplicate id '{SID}' (also in {first.spec})"


# --- the id registry -----------------------------------------------------------------------

def test_id_not_in_registry(spec_copy, registry):
    file = registry({"something-else": {"application": "loopweb", "faults": []}})
    p = only(validate_scenario_file(spec_copy.spec))
    assert (p.file, p.path) == (str(spec_copy.spec), "$.metadata.id")
    assert p.message.startswith(f"id '{SID}' is not registered; add it to {file.name}")


def test_id_reused_with_other_fault_roles_against_real_registry(spec_copy):
    assert paths.ID_REGISTRY == paths.SPECS_DIR / "REGISTRY.yaml"
    spec_copy.edit(lambda d: d.update(faults=[
        {"name": "upstream", "role": "fault_loopweb_upstream", "args": {"port_offset": 9}}]))
    p = only(validate_scenario_file(spec_copy.spec))
    assert (p.file, p.path) == (str(spec_copy.spec), "$.faults")
    assert p.message == (f"id '{SID}' is registered with fault roles ['fault_loopweb_stop']; "
                         "a new meaning needs a new id")


def test_id_registered_for_another_application(spec_copy, registry):
    registry(registered(application="shopfront"))
    p = only(validate_scenario_file(spec_copy.spec))
    assert p.path == "$.environment.application"
    assert "registered for application 'shopfront'" in p.message


def test_retired_id(spec_copy, registry):
    registry(registered(retired=True))
    p = only(validate_scenario_file(spec_copy.spec))
    assert (p.file, p.path) == (str(spec_copy.spec), "$.metadata.id")
    assert p.message == f"id '{SID}' is retired and may not be reused"


# --- ground truth --------------------------------------------------------------------------

def test_missing_ground_truth_file(spec_copy):
    spec_copy.ground_truth.unlink()
    p = only(validate_scenario_file(spec_copy.spec))
    assert (p.file, p.path) == (str(spec_copy.spec), "$.groundTruth")
    assert p.message == f"ground-truth file {spec_copy.ground_truth} does not exist"


def test_ground_truth_path_from_spec_is_honoured(spec_copy):
    spec_copy.edit(lambda d: d.update(groundTruth="truth/elsewhere.yaml"))
    p = only(validate_scenario_file(spec_copy.spec))
    assert p.path == "$.groundTruth"
    assert str(spec_copy.dir / "truth" / "elsewhere.yaml") in p.message


def test_ground_truth_for_another_scenario(spec_copy):
    spec_copy.edit(lambda g: g.update(scenario="loopweb-gateway-bad-upstream"), which="gt")
    p = only(validate_scenario_file(spec_copy.spec))
    assert (p.file, p.path) == (str(spec_copy.ground_truth), "$.scenario")
    assert p.message == f"is 'loopweb-gateway-bad-upstream' but the spec's id is '{SID}'"


def test_ground_truth_schema_violation(spec_copy):
    spec_copy.edit(lambda g: g["entities"][0].update(blame=True), which="gt")
    p = only(validate_scenario_file(spec_copy.spec))
    assert (p.file, p.path) == (str(spec_copy.ground_truth), "$.entities[0]")
    assert "'blame' was unexpected" in p.message


def test_ground_truth_entity_not_in_topology(spec_copy):
    assert "database" not in TOPOLOGY.read_text()
    spec_copy.edit(lambda g: g["entities"][1].update(id="database"), which="gt")
    p = only(validate_scenario_file(spec_copy.spec))
    assert (p.file, p.path) == (str(spec_copy.ground_truth), "$.entities[1].id")
    assert p.message.startswith("entity 'database' is not in the topology of 'env_loopweb'")
    assert "gateway-config" in p.message  # lists what is known


def test_propagation_target_not_in_topology(spec_copy):
    spec_copy.edit(lambda g: g["propagations"][0].update(target="cdn"), which="gt")
    p = only(validate_scenario_file(spec_copy.spec))
    assert (p.file, p.path) == (str(spec_copy.ground_truth), "$.propagations[0].target")
    assert p.message.startswith("entity 'cdn' is not in the topology")


def test_fault_entity_not_in_topology(spec_copy):
    spec_copy.edit(lambda g: g["faults"][0].update(entity="web-db"), which="gt")
    p = only(validate_scenario_file(spec_copy.spec))
    assert p.path == "$.faults[0].entity"
    assert "'web-db'" in p.message


def test_incident_without_a_root_cause(spec_copy):
    spec_copy.edit(lambda g: g["entities"][0].update(rootCause=False), which="gt")
    p = only(validate_scenario_file(spec_copy.spec))
    assert (p.file, p.path) == (str(spec_copy.ground_truth), "$.entities")
    assert "rootCause: true" in p.message


def test_healthy_control_needs_no_root_cause(spec_copy):
    spec_copy.edit(lambda g: g.update(incident=False, entities=[{"id": "web"}], propagations=[],
                                      faults=[]), which="gt")
    assert validate_scenario_file(spec_copy.spec) == []


# --- the command line ----------------------------------------------------------------------

def test_cli_rejects_a_broken_spec(spec_copy):
    spec_copy.edit(lambda d: d["faults"][0]["args"].update(program="db"))
    result = CliRunner().invoke(main, ["validate", str(spec_copy.root)])
    assert result.exit_code == 1
    assert (f"{spec_copy.spec}: $.faults[0].args: value of program must be one of: gateway, web, "
            "got: db") in result.stderr
    assert "1 spec(s) checked, 1 problem(s)" in result.stdout


def test_cli_json_output(spec_copy):
    spec_copy.edit(lambda d: d["metadata"].update(domain="Sales"))
    result = CliRunner().invoke(main, ["validate", "--json", str(spec_copy.spec)])
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert report["specs"] == 1
    assert [(p["file"], p["path"]) for p in report["problems"]] == [
        (str(spec_copy.spec), "$.metadata.domain")]


# --- manifestation gate against the ground truth's alerts --------------------------------

def test_gate_alert_missing_from_ground_truth(tmp_path):
    from tests.unit.conftest import copy_scenario

    shop = copy_scenario(tmp_path / "specs", name="shop-cart-down")
    shop.edit(lambda d: d["checks"]["manifestation"][0]["args"]["firing"].append(
        {"alertname": "RedisDown", "service": "redis"}))
    p = only(validate_scenario_file(shop.spec))
    assert (p.file, p.path) == (str(shop.spec), "$.checks.manifestation[0].args.firing[2]")
    assert p.message.startswith("alert 'RedisDown' is not among the ground truth's alerts (")
    assert "ServiceDown" in p.message and p.message.endswith("in ground_truth.yaml")

