"""The heuristic baseline agent's reasoning on the shop topology (alerts in, diagnosis out)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from orchestrator import paths
from orchestrator.agents.heuristic import ToolError, diagnose, run
from orchestrator.evaluation import score_diagnosis

TOPOLOGY = yaml.safe_load((paths.ROLES_DIR / "env_shop" / "files" / "topology.yml").read_text())


def alert(name: str, service: str, instance: str | None = None) -> dict[str, Any]:
    labels = {"alertname": name, "service": service, **({"instance_id": instance} if instance else {})}
    return {"labels": labels}


CART_DOWN = [alert("ServiceDown", "cart", "cart-1"), alert("ContainerNotRunning", "cart", "cart-1"),
             alert("ServiceErrorRateHigh", "frontend"), alert("CustomerErrorsHigh", "gateway")]


def test_blames_the_most_downstream_alerting_instance_with_layer_and_type() -> None:
    out = diagnose(CART_DOWN, TOPOLOGY)
    (root,) = [e for e in out["entities"] if e["root_cause"]]
    assert root == {"id": "cart-1", "root_cause": True, "layer": "runtime", "fault_type": "process_down"}
    assert [(p["source"], p["target"]) for p in out["propagations"]] == [("cart-1", "frontend"),
                                                                         ("frontend", "gateway")]
    assert "alert:ServiceDown" in out["evidence"]


def test_a_cause_alert_beats_a_more_downstream_symptom() -> None:
    # ads is CPU-saturated; its latency shows in frontend; catalog only has a latency blip.
    out = diagnose([alert("ServiceCpuSaturated", "ads", "ads-1"), alert("ServiceLatencyHigh", "frontend"),
                    alert("ServiceLatencyHigh", "catalog")], TOPOLOGY)
    assert [e["id"] for e in out["entities"] if e["root_cause"]] == ["ads-1"]


def test_no_alert_means_no_incident() -> None:
    out = diagnose([alert("ServiceErrorRateHigh", "loadgen")], TOPOLOGY)  # the load generator is not the shop
    assert out["incident"] is False and out["entities"] == []


def test_scores_as_correct_on_the_scenario_ground_truth(tmp_path: Path) -> None:
    gt = yaml.safe_load((paths.SPECS_DIR / "shop-cart-down" / "ground_truth.yaml").read_text())
    file = tmp_path / "out.json"
    file.write_text(json.dumps(diagnose(CART_DOWN, TOPOLOGY)))
    scores = score_diagnosis(file, gt, TOPOLOGY)
    assert (scores["status"], scores["fl_pass"], scores["a_at_1"]) == ("scored", 1.0, 1.0)


def test_mitigation_restarts_the_root_cause_and_reports_refusals() -> None:
    calls: list[tuple[str, dict[str, Any]]] = []

    def call(tool: str, **args: Any) -> Any:
        calls.append((tool, args))
        if tool == "get_alerts":
            return CART_DOWN
        if tool == "get_topology":
            return TOPOLOGY
        raise ToolError(tool, "denied: not in scope")

    out = run({"tasks": [{"kind": "diagnose"}, {"kind": "mitigate"}]}, call)
    assert ("restart", {"service": "cart", "instance": "cart-1"}) in calls
    assert out["actions"] == [{"action": "restart", "target": "cart-1",
                               "result": "refused: restart: denied: not in scope"}]


def test_a_mitigate_only_output_matches_the_mitigation_schema() -> None:
    from orchestrator.evaluation.outputs import schema_errors

    def call(tool: str, **args: Any) -> Any:
        return {"get_alerts": CART_DOWN, "get_topology": TOPOLOGY}.get(tool, {"restarted": ["cart-1"]})

    out = run({"tasks": [{"kind": "mitigate"}]}, call)
    assert out["schema"] == "opsbench/mitigation/v1" and schema_errors(out, "mitigate") == []
    both = run({"tasks": [{"kind": "diagnose"}, {"kind": "mitigate"}]}, call)
    assert "schema" not in both and schema_errors(both, "diagnose") == schema_errors(both, "mitigate") == []
