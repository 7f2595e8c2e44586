"""CUJBench outcome metrics (A@1, CM/LM/TM, PCE, PCW, evidence recall) on diagnosis outputs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from orchestrator.evaluation import score_diagnosis
from orchestrator.evaluation.cuj import canonical, cuj_metrics, evidence_recall
from orchestrator.evaluation.ntam import ground_truth_names

GT: dict[str, Any] = {
    "apiVersion": "opsbench/v1", "kind": "GroundTruth", "scenario": "x",
    "alerts": [{"name": "ServiceDown"}, {"name": "ServiceErrorRateHigh"}],
    "evidence": ["alert:ServiceDown", "log:frontend", "metric:container_running"],
    "entities": [
        {"id": "cart-1", "aliases": ["cart"], "rootCause": True, "layer": "runtime", "faultType": "process_down"},
        {"id": "frontend"},
    ],
}
NAMES = ground_truth_names(GT)


def out(component: str = "cart", layer: str = "runtime", ftype: str = "process_down", **extra: Any) -> dict[str, Any]:
    return {"entities": [{"id": component, "root_cause": True, "layer": layer, "fault_type": ftype}], **extra}


def test_a_fully_right_diagnosis_scores_one_everywhere() -> None:
    m = cuj_metrics(out(evidence=["alert:ServiceDown", "log:frontend:0042", "metric:container_running"]), GT, NAMES)
    assert m == {"a_at_1": 1.0, "component_match": 1.0, "layer_match": 1.0, "type_match": 1.0,
                 "pce": 1.0, "pcw": 1.0, "evidence_recall": 1.0}


@pytest.mark.parametrize(("kwargs", "a1", "pce", "pcw"), [
    ({"layer": "network"}, 1.0, 2 / 3, 0.8),             # layer is not part of A@1
    ({"ftype": "crash_loop"}, 0.0, 2 / 3, 0.7),
    ({"component": "frontend"}, 0.0, 2 / 3, 0.5),
    ({"component": "frontend", "ftype": "oom_kill"}, 0.0, 1 / 3, 0.2),
])
def test_partial_credit_follows_the_cujbench_weights(kwargs: dict[str, str], a1: float, pce: float, pcw: float) -> None:
    m = cuj_metrics(out(**kwargs), GT, NAMES)
    assert m["a_at_1"] == a1
    assert m["pce"] == pytest.approx(pce)
    assert m["pcw"] == pytest.approx(pcw)


def test_fields_are_canonicalised() -> None:
    assert canonical(" Process-Down ") == canonical("process_down") == "process_down"
    assert cuj_metrics(out(component="CART", layer="Runtime", ftype="Process Down"), GT, NAMES)["a_at_1"] == 1.0


def test_custom_weights() -> None:
    assert cuj_metrics(out(layer="network"), GT, NAMES, (0.4, 0.4, 0.2))["pcw"] == pytest.approx(0.6)


def test_evidence_recall_matches_ids_and_their_extensions_only() -> None:
    truth = ["alert:ServiceDown", "log:frontend"]
    assert evidence_recall(["alert:servicedown"], truth) == 0.5
    assert evidence_recall(["log:frontend:17", "log:frontend-2"], truth) == 0.5  # frontend-2 is not frontend
    assert evidence_recall([], truth) == 0.0
    assert evidence_recall(["alert:X"], []) is None


def test_metrics_are_none_where_the_ground_truth_lacks_the_field() -> None:
    bare = {**GT, "evidence": [], "entities": [{"id": "cart-1", "aliases": ["cart"], "rootCause": True}]}
    m = cuj_metrics(out(), bare, ground_truth_names(bare))
    assert m["component_match"] == 1.0
    assert m["a_at_1"] is m["layer_match"] is m["type_match"] is m["pce"] is m["pcw"] is m["evidence_recall"] is None


def test_every_true_root_cause_must_be_named_with_its_type() -> None:
    two = {**GT, "entities": [*GT["entities"], {"id": "redis", "rootCause": True, "layer": "datastore",
                                                 "faultType": "datastore_oom"}]}
    one = cuj_metrics(out(), two, ground_truth_names(two))
    assert one["component_match"] == 0.0 and one["type_match"] == 0.0
    both = {"entities": [*out()["entities"], {"id": "redis", "root_cause": True, "layer": "datastore",
                                              "fault_type": "datastore_oom"}]}
    assert cuj_metrics(both, two, ground_truth_names(two))["a_at_1"] == 1.0


def test_score_diagnosis_reports_them_for_scored_outputs_only(tmp_path: Path) -> None:
    file = tmp_path / "o.json"
    file.write_text(json.dumps(out(alerts_explained=["ServiceDown"], evidence=["alert:ServiceDown"])))
    scored = score_diagnosis(file, GT)
    assert scored["a_at_1"] == 1.0 and scored["evidence_recall"] == pytest.approx(1 / 3)
    assert scored["alerts_explained_recall"] == 0.5
    missing = score_diagnosis(tmp_path / "none.json", GT)
    assert missing["status"] == "no_submission" and "a_at_1" not in missing


def test_every_shop_root_cause_has_a_layer_and_type() -> None:
    """The scenario set carries the fields CUJBench scoring needs (an authoring convention)."""
    import yaml

    from orchestrator import paths
    for gt_file in sorted(paths.SPECS_DIR.glob("*/ground_truth.yaml")):
        gt = yaml.safe_load(gt_file.read_text())
        for ent in gt["entities"]:
            if ent.get("rootCause"):
                assert "layer" in ent and "faultType" in ent, (gt_file.parent.name, ent["id"])
