"""The heuristic baseline agent's reasoning on the shop topology (alerts in, diagnosis out)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from orchestrator import paths
from orchestrator.agents.gateway_client import ToolError
from orchestrator.agents.heuristic import diagnose, run
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


def test_on_kubernetes_a_lone_alerting_pod_is_named_by_its_deployment() -> None:
    """Pods are replaced by their controller: the crash-looping pod (newer than the topology, or listed as a pod) is
    not a lasting root cause, its service is; on the podman shop the instance stays the answer (test above)."""
    k8s = {"entities": [{"id": "checkout", "kind": "service"}, {"id": "frontend", "kind": "service"},
                        {"id": "checkout-b6fd4d4c-f52bc", "kind": "pod"}],
           "edges": [{"source": "frontend", "target": "checkout", "type": "calls"},
                     {"source": "checkout", "target": "checkout-b6fd4d4c-f52bc", "type": "owns"}]}
    for pod in ("checkout-56cb6bf65f-5lgtt", "checkout-b6fd4d4c-f52bc"):
        out = diagnose([alert("ContainerNotRunning", "checkout", pod), alert("ServiceErrorRateHigh", "frontend")], k8s)
        assert [e["id"] for e in out["entities"] if e["root_cause"]] == ["checkout"], pod


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


class LogsOnly:
    """A gateway that serves alerts, the shop topology and these error log bodies for one service."""

    def __init__(self, alerts: list[dict[str, Any]], service: str, bodies: list[str], logs: bool = True) -> None:
        self.alerts, self.service, self.bodies, self.logs = alerts, service, bodies, logs
        self.asked: list[dict[str, Any]] = []

    def __call__(self, tool: str, **args: Any) -> Any:
        if tool == "get_alerts":
            return {"items": self.alerts}
        if tool == "get_topology":
            return TOPOLOGY
        if tool == "search_logs":
            if not self.logs:
                raise ToolError(tool, "this environment records no logs")
            self.asked.append(args)
            return {"items": [{"body": b} for b in self.bodies] if args.get("service") == self.service else []}
        if tool == "get_cuj_report":  # no browser in these runs: the gateway does not offer its tools
            raise ToolError(tool, "tool 'get_cuj_report' is not available in this run")
        raise AssertionError(tool)


SYMPTOMS = [alert("ServiceErrorRateHigh", "cart"), alert("ServiceLatencyHigh", "cart"),
            alert("ServiceErrorRateHigh", "frontend"), alert("CustomerErrorsHigh", "gateway")]
MANIFEST = {"tasks": [{"kind": "diagnose"}]}


def roots(out: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(e["id"], e["layer"], e["fault_type"]) for e in out["entities"] if e["root_cause"]]


def test_error_logs_naming_a_silent_datastore_move_the_blame_there() -> None:
    bodies = ["GET /cart/{user} -> 503 in 2001.0 ms: redis unavailable at redis:6379: Timeout connecting to server"] * 8
    gateway = LogsOnly(SYMPTOMS, "cart", [*bodies, "GET /cart/{user} -> 500 in 1 ms: internal error"])
    out = run(MANIFEST, gateway)
    assert roots(out) == [("redis-1", "network", "network_partition")]
    assert gateway.asked == [{"service": "cart", "severity": "ERROR", "limit": 200}]
    assert (out["propagations"][0]["source"], out["propagations"][0]["target"]) == ("redis-1", "cart")
    assert {"id": "cart", "root_cause": False} in out["entities"] and "log:cart" in out["evidence"]


def test_bad_credentials_or_a_refusing_callee_keep_the_blame_on_the_caller() -> None:
    wrongpass = ["GET /cart/{user} -> 503: redis unavailable at redis:6379: invalid username-password pair"] * 5
    assert roots(run(MANIFEST, LogsOnly(SYMPTOMS, "cart", wrongpass))) == [
        ("cart", "configuration", "wrong_credentials")]
    refused = ["GET /cart/{user} -> 503: redis unavailable at redis:6380: Error 111. Connection refused."] * 5
    assert roots(run(MANIFEST, LogsOnly(SYMPTOMS, "cart", refused))) == [("cart", "configuration", "wrong_endpoint")]


def test_too_few_mentions_or_no_logs_keep_the_alert_only_answer() -> None:
    few = ["redis unavailable at redis:6379: Timeout"] * 2 + ["cart of u1 is empty"] * 20
    assert roots(run(MANIFEST, LogsOnly(SYMPTOMS, "cart", few))) == [("cart", "application", "slow_response")]
    no_logs = LogsOnly(SYMPTOMS, "cart", ["redis timeout"] * 9, logs=False)
    assert roots(run(MANIFEST, no_logs)) == [("cart", "application", "slow_response")]


def test_a_root_with_a_cause_alert_is_not_second_guessed_by_logs() -> None:
    gateway = LogsOnly(CART_DOWN, "cart", ["redis timeout"] * 9)
    assert roots(run(MANIFEST, gateway)) == [("cart-1", "runtime", "process_down")] and gateway.asked == []


def test_a_starved_callee_is_not_blamed_and_refusals_point_at_the_callers_configuration() -> None:
    # frontend points at a wrong catalog port: catalog only sees its traffic drop, frontend's calls are refused.
    alerts = [alert("ServiceErrorRateHigh", "frontend"), alert("ServiceTrafficDrop", "catalog"),
              alert("CustomerErrorsHigh", "gateway")]
    assert roots(diagnose(alerts, TOPOLOGY)) == [("frontend", "application", "error_response")]
    refused = ["GET / -> 502 in 3 ms: catalog: [Errno 111] Connection refused"] * 6
    assert roots(run(MANIFEST, LogsOnly(alerts, "frontend", refused))) == [
        ("frontend", "configuration", "wrong_endpoint")]
    # Only a traffic drop anywhere: then it is the one lead there is.
    assert roots(diagnose([alert("ServiceTrafficDrop", "catalog")], TOPOLOGY))[0][0] == "catalog"
