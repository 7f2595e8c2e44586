"""Fault-localisation scoring of a diagnosis output against ground truth."""

from __future__ import annotations

import json

import pytest
import yaml

from orchestrator import paths
from orchestrator.evaluation import score_diagnosis

GT = {
    "apiVersion": "opsbench/v1",
    "kind": "GroundTruth",
    "scenario": "loopweb-web-down",
    "incident": True,
    "entities": [
        {"id": "web", "aliases": ["catalog", "Web Service"], "rootCause": True},
        {"id": "gateway", "aliases": ["nginx"]},
    ],
}
HEALTHY = {"apiVersion": "opsbench/v1", "kind": "GroundTruth", "scenario": "loopweb-healthy",
           "incident": False, "entities": [{"id": "web"}, {"id": "gateway"}]}


@pytest.fixture
def submit(tmp_path):
    def write(output) -> object:
        file = tmp_path / "diagnosis.json"
        file.write_text(output if isinstance(output, str) else json.dumps(output))
        return file
    return write


def test_exact_root_cause_passes(submit):
    result = score_diagnosis(submit({"entities": [{"id": "web", "root_cause": True}]}), GT)
    assert result["status"] == "scored"
    assert (result["fl_pass"], result["fl_precision"], result["fl_recall"]) == (1.0, 1.0, 1.0)
    assert result["predicted"] == ["web"]


@pytest.mark.parametrize("name", ["catalog", "CATALOG", "web service", "WEB", "Web Service"])
def test_aliases_match_case_insensitively(submit, name):
    result = score_diagnosis(submit({"entities": [{"id": name, "root_cause": True}]}), GT)
    assert result["fl_pass"] == 1.0
    assert result["predicted"] == ["web"]


def test_wrong_entity_scores_zero(submit):
    result = score_diagnosis(submit({"entities": [{"id": "nginx", "root_cause": True}]}), GT)
    assert result["status"] == "scored"
    assert (result["fl_pass"], result["fl_precision"], result["fl_recall"]) == (0.0, 0.0, 0.0)
    assert result["predicted"] == ["gateway"]


def test_entity_outside_ground_truth_scores_zero(submit):
    result = score_diagnosis(submit({"entities": [{"id": "database", "root_cause": True}]}), GT)
    assert (result["status"], result["fl_pass"]) == ("scored", 0.0)
    assert result["predicted"] == ["database"]


def test_entities_not_marked_root_cause_do_not_count(submit):
    only_symptoms = {"entities": [{"id": "web"}, {"id": "gateway", "root_cause": False}]}
    result = score_diagnosis(submit(only_symptoms), GT)
    assert (result["status"], result["fl_pass"], result["fl_recall"]) == ("scored", 0.0, 0.0)


def test_extra_non_root_entities_do_not_affect_the_score(submit):
    output = {"entities": [{"id": "gateway"}, {"id": "web", "root_cause": True}, {"id": "database"}],
              "propagations": [{"source": "web", "target": "gateway"}]}
    result = score_diagnosis(submit(output), GT)
    assert (result["fl_pass"], result["fl_precision"], result["fl_recall"]) == (1.0, 1.0, 1.0)


def test_precision_and_recall_with_an_extra_root_cause(submit):
    output = {"entities": [{"id": "web", "root_cause": True}, {"id": "nginx", "root_cause": True}]}
    result = score_diagnosis(submit(output), GT)
    assert result["fl_pass"] == 0.0
    assert result["fl_precision"] == pytest.approx(0.5)
    assert result["fl_recall"] == 1.0


def test_recall_with_two_true_root_causes(submit):
    gt = {**GT, "entities": [{"id": "web", "rootCause": True}, {"id": "gateway", "rootCause": True}]}
    result = score_diagnosis(submit({"entities": [{"id": "web", "root_cause": True}]}), gt)
    assert result["fl_pass"] == 0.0
    assert (result["fl_precision"], result["fl_recall"]) == (1.0, pytest.approx(0.5))


def test_missing_output_is_no_submission(tmp_path):
    for output in (tmp_path / "absent.json", None, tmp_path):  # absent, none, a directory
        result = score_diagnosis(output, GT)
        assert result["status"] == "no_submission"
        assert (result["fl_pass"], result["fl_precision"], result["fl_recall"]) == (0.0, 0.0, 0.0)


@pytest.mark.parametrize("text", ['{"entities": [', "", "web is the root cause"])
def test_invalid_json_is_malformed(submit, text):
    result = score_diagnosis(submit(text), GT)
    assert result["status"] == "malformed"
    assert result["fl_pass"] == 0.0
    assert result["reason"].startswith("output is not JSON")


def test_non_utf8_output_is_malformed(tmp_path):
    file = tmp_path / "diagnosis.json"
    file.write_bytes(b"\xff\xfe{")
    assert score_diagnosis(file, GT)["status"] == "malformed"


@pytest.mark.parametrize(
    ("output", "where"),
    [
        ({"root_cause": "web"}, "$"),  # entities missing
        ([{"id": "web", "root_cause": True}], "$"),  # not an object
        ({"entities": [{"name": "web", "root_cause": True}]}, "entities/0"),
        ({"entities": [{"id": "web", "root_cause": "yes"}]}, "entities/0/root_cause"),
        ({"entities": [{"id": ""}]}, "entities/0/id"),
        ({"incident": "no", "entities": []}, "incident"),
    ],
)
def test_output_not_matching_the_schema_is_malformed(submit, output, where):
    result = score_diagnosis(submit(output), GT)
    assert result["status"] == "malformed"
    assert result["fl_pass"] == 0.0
    assert f"does not match the diagnosis_output schema at {where}:" in result["reason"]


def test_healthy_control_passes_when_output_says_no_incident(submit):
    result = score_diagnosis(submit({"incident": False, "entities": []}), HEALTHY)
    assert (result["status"], result["fl_pass"]) == ("scored", 1.0)


def test_healthy_control_fails_when_output_blames_something(submit):
    result = score_diagnosis(submit({"entities": [{"id": "web", "root_cause": True}]}), HEALTHY)
    assert (result["status"], result["fl_pass"], result["fl_precision"]) == ("scored", 0.0, 0.0)


def test_saying_no_incident_during_an_incident_fails(submit):
    result = score_diagnosis(submit({"incident": False, "entities": []}), GT)
    assert (result["status"], result["fl_pass"], result["fl_recall"]) == ("scored", 0.0, 0.0)


def test_real_ground_truth_files_score_their_own_root_cause(submit):
    for gt_file in sorted(paths.SPECS_DIR.glob("*/ground_truth.yaml")):
        gt = yaml.safe_load(gt_file.read_text())
        roots = [e["id"] for e in gt["entities"] if e.get("rootCause")]
        output = {"entities": [{"id": r, "root_cause": True} for r in roots]}
        assert score_diagnosis(submit(output), gt)["fl_pass"] == 1.0, gt_file


def test_healthy_control_fails_when_output_asserts_an_incident_without_culprit(submit):
    result = score_diagnosis(submit({"incident": True, "entities": []}), HEALTHY)
    assert (result["status"], result["fl_pass"]) == ("scored", 0.0)


def test_healthy_control_fails_when_output_says_no_incident_but_blames_something(submit):
    result = score_diagnosis(submit({"incident": False, "entities": [{"id": "web", "root_cause": True}]}),
                             HEALTHY)
    assert result["fl_pass"] == 0.0
