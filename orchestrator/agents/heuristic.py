"""The deterministic heuristic SRE agent: alerts -> topology walk -> most downstream alerting entity.

It sees only what any agent sees: the manifest and the run's tool gateway (REST). Steps:

1. read the firing alerts and the topology;
2. the candidate root causes are the alerting services none of whose callees alert (the fault
   is where the errors start, not where they are seen); among several, the ones with a
   *cause* alert (down, not running, restarting, saturation, datastore) beat those with only
   *symptom* alerts (errors, latency, traffic), and with no cause alert the most downstream
   symptom wins;
3. layer and fault type follow from the root's alerts (a fixed table), the propagation chain
   walks the ``calls`` edges back up through alerting callers;
4. for a ``mitigate`` task it restarts the root-cause instances (the standard first response),
   or rolls their service back to its deployed image and configuration when the fault type
   says the deployment changed (crash loop, OOM, bad image, wrong binary, throttling, config).

Run as ``python -m orchestrator.agents.heuristic`` with OPSBENCH_MANIFEST set (the default
agent of ``opsbench run`` and ``make scenario``); ``--mcp`` takes the tools over MCP instead of
REST. Where the environment has no alerting, it falls back to the probe agent's endpoint checks.
It is a baseline, not a contender: it proves scenarios solvable and gives the leaderboard a floor.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable
from typing import Any

from orchestrator.agents.browser import explain as browser_explain
from orchestrator.agents.gateway_client import Call, GatewayClient, ToolError, open_session

# Alerts that point at the entity where a fault sits (causes) vs. at its effects (symptoms).
CAUSES = {"ServiceDown", "ContainerNotRunning", "ContainerRestarted", "ServiceCpuSaturated", "ServiceMemoryHigh",
          "RedisDown", "RedisMemoryNearLimit", "PostgresDown", "PostgresConnectionsNearLimit"}
# Root-cause alert -> (layer, fault type); the first match in this order wins.
DIAGNOSES = [
    ("ContainerRestarted", ("runtime", "crash_loop")),
    ("ContainerNotRunning", ("runtime", "process_down")),
    ("ServiceDown", ("runtime", "process_down")),
    ("RedisDown", ("runtime", "process_down")),
    ("PostgresDown", ("runtime", "process_down")),
    ("RedisMemoryNearLimit", ("datastore", "datastore_oom")),
    ("PostgresConnectionsNearLimit", ("datastore", "connection_exhaustion")),
    ("ServiceMemoryHigh", ("application", "memory_leak")),
    ("ServiceCpuSaturated", ("application", "cpu_saturation")),
    ("ServiceLatencyHigh", ("application", "slow_response")),
    ("ServiceErrorRateHigh", ("application", "error_response")),
]
NOT_APPLICATION = ("loadgen",)
EDGE = {"gateway", "gateway-1"}
"""The edge: a root there (CustomerErrorsHigh only) is where users see errors, not where they start."""
STARVED = {"ServiceTrafficDrop"}
SCHEMA_IDS = {"diagnose": "opsbench/diagnosis/v1", "mitigate": "opsbench/mitigation/v1"}
# Fault types a restart does not cure but redeploying as deployed (rollback) does.
REDEPLOY = {"crash_loop", "oom_kill", "bad_image", "wrong_binary", "cpu_throttle", "wrong_endpoint",
            "wrong_credentials"}


def alert_list(result: Any) -> list[dict[str, Any]]:
    alerts = result.get("alerts", result.get("items", [])) if isinstance(result, dict) else result
    return [a for a in alerts or [] if isinstance(a, dict)]


def _first(names: Iterable[str]) -> tuple[str, str]:
    present = set(names)
    for alert, diagnosis in DIAGNOSES:
        if alert in present:
            return diagnosis
    return ("application", "error_response")


def diagnose(alerts: list[dict[str, Any]], topology: dict[str, Any]) -> dict[str, Any]:
    """The diagnosis output for these alerts on this topology (pure: unit-testable)."""
    by_service: dict[str, set[str]] = {}
    instances: dict[str, set[str]] = {}
    for alert in alerts:
        labels = alert.get("labels", alert)
        service, name = labels.get("service"), labels.get("alertname")
        if not service or not name or service.startswith(NOT_APPLICATION):
            continue
        by_service.setdefault(service, set()).add(name)
        if labels.get("instance_id"):
            instances.setdefault(service, set()).add(labels["instance_id"])
    if not by_service:
        return {"schema": "opsbench/diagnosis/v1", "incident": False, "entities": [],
                "explanation": "no alert is firing: no incident"}
    calls = [(e["source"], e["target"]) for e in topology.get("edges", []) if e.get("type") == "calls"]
    # A service whose only alert is a traffic drop is starved by its callers, not failing: it is no candidate
    # (unless nothing else alerts), so the errors upstream of it are not blamed on it.
    candidates = {s for s, names in by_service.items() if names - STARVED} or set(by_service)
    callees = {s: {t for a, t in calls if a == s} for s in by_service}
    downstream = [s for s in sorted(candidates) if not callees[s] & candidates]
    with_cause = [s for s in downstream if by_service[s] & CAUSES]
    if with_cause:
        roots = sorted(with_cause)
    else:
        # Only symptoms: the alerting service furthest from the entry point (most callers above it).
        def depth(s: str) -> int:
            seen, frontier = {s}, {s}
            while frontier:
                frontier = {a for a, t in calls if t in frontier and a not in seen}
                seen |= frontier
            return len(seen)
        roots = [max(sorted(downstream or candidates), key=depth)]
    entities: list[dict[str, Any]] = []
    propagations: list[dict[str, Any]] = []
    # A pod is replaced by its controller on every rollout or restart (the crash-looping one is often newer than the
    # topology): its owner is what lasts, so a lone alerting instance is named only where instances are durable.
    kinds = {e.get("id"): e.get("kind") for e in topology.get("entities", [])}
    pods = "pod" in kinds.values()
    for root in roots:
        layer, fault_type = _first(by_service[root])
        ids = sorted(instances.get(root, set()))
        durable = len(ids) == 1 and kinds.get(ids[0]) != "pod" and not (pods and ids[0] not in kinds)
        entity = ids[0] if durable else root
        entities.append({"id": entity, "root_cause": True, "layer": layer, "fault_type": fault_type})
        seen, frontier = {root}, [root]
        while frontier:
            target = frontier.pop(0)
            for caller in sorted(a for a, t in calls if t == target and a in by_service and a not in seen):
                seen.add(caller)
                frontier.append(caller)
                entities.append({"id": caller, "root_cause": False})
                propagations.append({"source": entity if target == root else target, "target": caller,
                                     "condition": f"{target} alerts: {', '.join(sorted(by_service[target]))}",
                                     "effect": f"{caller} alerts: {', '.join(sorted(by_service[caller]))}"})
    names = sorted({a.get("labels", a).get("alertname", "") for a in alerts} - {""})
    return {
        "schema": "opsbench/diagnosis/v1", "incident": True, "entities": entities, "propagations": propagations,
        "alerts_explained": names, "evidence": [f"alert:{n}" for n in names],
        "explanation": "root cause: the most downstream alerting entities "
                       + ", ".join(e["id"] for e in entities if e["root_cause"]),
    }


# What a root's error logs say about the callee they name -> (blame the callee?, layer, fault type). First match
# wins. A callee that refuses or cannot be resolved while it raises no alert of its own points at the caller's
# configuration; one that times out, refuses access, runs out of connections or answers 5xx is where it starts.
LOG_HINTS: list[tuple[tuple[str, ...], bool, str, str]] = [
    (("password", "wrongpass", "noauth", "authentication"), False, "configuration", "wrong_credentials"),
    (("name or service not known", "name resolution", "nodename", "connection refused"), False,
     "configuration", "wrong_endpoint"),
    (("permission denied", "privilege", "not permitted"), True, "configuration", "revoked_access"),
    (("too many clients", "connection slots", "pool exhausted", "too many connections"), True,
     "datastore", "connection_exhaustion"),
    (("out of memory", "oom command", "maxmemory"), True, "datastore", "datastore_oom"),
    (("timed out", "timeout"), True, "network", "network_partition"),
    (("returned 5",), True, "network", "http_abort"),
]
MIN_MENTIONS = 3


def follow_logs(call: Call, output: dict[str, Any], alerts: list[dict[str, Any]],
                topology: dict[str, Any]) -> None:
    """Refine roots that only have symptom alerts from their error logs: the callee most of the errors name is
    where the fault starts (or, for refusals and bad credentials, the root's own configuration). In place."""
    by_service = _alerts_by_service(alerts)
    owner = {e["target"]: e["source"] for e in topology.get("edges", []) if e.get("type") == "owns"}
    calls = [(e["source"], e["target"]) for e in topology.get("edges", []) if e.get("type") == "calls"]
    for ent in [e for e in output.get("entities", []) if e.get("root_cause")]:
        service = owner.get(ent["id"], ent["id"])
        if by_service.get(service, set()) & CAUSES:
            continue
        failing = {s for s, names in by_service.items() if names - STARVED}
        callees = sorted({t for s, t in calls if s == service} - failing)
        if not callees:
            continue
        try:
            found = call("search_logs", service=service, severity="ERROR", limit=200)
        except ToolError:
            return  # no logs in this run (masked or not recorded): keep the alert-only answer
        bodies = [str(r.get("body", "")).lower() for r in (found or {}).get("items", []) if isinstance(r, dict)]
        named = {c: [b for b in bodies if re.search(rf"\b{re.escape(c)}\b", b)] for c in callees}
        callee = max(callees, key=lambda c: (len(named[c]), c))
        said = named[callee]
        if len(said) < max(MIN_MENTIONS, len(bodies) // 5):
            continue
        text = " ".join(said)
        blame, layer, fault_type = next(((b, la, ft) for words, b, la, ft in LOG_HINTS
                                         if any(w in text for w in words)), (True, "application", "error_response"))
        if not blame:
            ent.update(layer=layer, fault_type=fault_type)
            continue
        instances = sorted(t for t, o in owner.items() if o == callee)
        culprit = instances[0] if len(instances) == 1 else callee
        old = ent["id"]
        ent.update(id=culprit, layer=layer, fault_type=fault_type)
        output["entities"].append({"id": old, "root_cause": False})
        output.setdefault("propagations", []).insert(0, {
            "source": culprit, "target": old, "condition": f"{callee}: {said[0][:200]}",
            "effect": f"{service} errors naming {callee}: {len(said)} of {len(bodies)}"})
        output["explanation"] = (output.get("explanation", "") + f"; {service}'s error logs name {callee} "
                                 f"({len(said)} of {len(bodies)} records): {culprit} is where it starts")
        output.setdefault("evidence", []).append(f"log:{service}")


def _alerts_by_service(alerts: list[dict[str, Any]]) -> dict[str, set[str]]:
    by_service: dict[str, set[str]] = {}
    for alert in alerts:
        labels = alert.get("labels", alert)
        service, name = labels.get("service"), labels.get("alertname")
        if service and name and not service.startswith(NOT_APPLICATION):
            by_service.setdefault(service, set()).add(name)
    return by_service


def mitigate(call: Call, diagnosis: dict[str, Any], topology: dict[str, Any]) -> dict[str, Any]:
    """Restart every root-cause entity (its instance, or every instance of its service); roll back the
    service instead when the fault type says its deployment was changed."""
    owner = {e["target"]: e["source"] for e in topology.get("edges", []) if e.get("type") == "owns"}
    actions = []
    for ent in diagnosis["entities"]:
        if not ent.get("root_cause"):
            continue
        target = ent["id"]
        service = owner.get(target, target)
        if ent.get("fault_type") in REDEPLOY:  # a bad change to the deployment: undo it
            action, args = "rollback", {"service": service}
        else:
            action = "restart"
            args = {"service": service, "instance": target} if target in owner else {"service": target}
        try:
            result = call(action, **args)
            actions.append({"action": action, "target": target, "result": json.dumps(result)[:500]})
        except ToolError as exc:
            actions.append({"action": action, "target": target, "result": f"refused: {exc}"})
    return {"actions": actions, "plan": "restart the root-cause entities; if alerts persist, roll back their "
                                        "last change and restore their configuration"}


def run(manifest: dict[str, Any], call: Call) -> dict[str, Any]:
    kinds = {t["kind"] for t in manifest.get("tasks", [])}
    try:
        alerts = alert_list(call("get_alerts", limit=200))
    except ToolError:
        # An environment without alerting (loopweb): probe the application's endpoints instead.
        from orchestrator.agents.probe import diagnose as probe
        return probe(manifest)
    for _ in range(20):  # a storm bigger than one page: follow the pages
        page = getattr(call, "next_page", None)
        if not page:
            break
        alerts += alert_list(call("get_alerts", limit=200, page=page))
    topology = call("get_topology")
    topology = topology if isinstance(topology, dict) else {}
    output = diagnose(alerts, topology)
    if output.get("incident"):
        follow_logs(call, output, alerts, topology)
    # The browser's view, where the run has one (get_cuj_report refused otherwise: nothing changes).
    backend_roots = [str(e["id"]) for e in output.get("entities", []) if e.get("root_cause") and e["id"] not in EDGE]
    seen = browser_explain(call, backend_roots)
    if seen is not None and backend_roots:
        output["evidence"] = list(dict.fromkeys([*output.get("evidence", []), *seen["evidence"]]))
        output["explanation"] = f"{output.get('explanation', '')}; in the browser: {seen['explanation']}"
        for found in seen["entities"]:  # a second cause the backend's alerts do not show
            output["entities"] = [e for e in output["entities"] if e["id"] != found["id"]] + [found]
    elif seen is not None and seen["entities"]:
        seen["alerts_explained"] = output.get("alerts_explained", [])
        seen["evidence"] = list(dict.fromkeys([*seen["evidence"], *output.get("evidence", [])]))
        output = {"schema": output.get("schema"), **seen}
    if "mitigate" in kinds and output.get("incident"):
        output.update(mitigate(call, output, topology))
    elif "mitigate" in kinds:
        output.update({"actions": [], "plan": "no incident: nothing to do"})
    # One file answers every task; `schema` names one output version, so it is only set for one kind.
    output.pop("schema", None)
    if len(kinds) == 1:
        output["schema"] = SCHEMA_IDS.get(next(iter(kinds)), "")
        if not output["schema"]:
            output.pop("schema")
    return output


def main() -> int:
    session = open_session()
    if "--mcp" in sys.argv[1:]:  # the same agent, with its tools taken over MCP instead of REST
        from orchestrator.agents.mcp_client import MCPGatewayClient
        with MCPGatewayClient(session.mcp_url or "", session.token) as mcp:
            output = run(session.manifest, mcp)
    else:
        output = run(session.manifest, GatewayClient(session.url, session.token))
    session.write(output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
