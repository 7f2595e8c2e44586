"""The deterministic baseline FinOps agent: reference-style SQL for the insight prompts it understands, and the
standard anomaly detector (orchestrator/finops/detect.py) for anomaly prompts.

It sees only the manifest and the run's tool gateway (REST): every query goes through ``query_sql``. For each
``analyze`` task it recognises the question from keywords of the goal (cost per category, top applications,
allocation ratio, peak-to-average ratio, daily cost variance, discount coverage, anomaly detection or ranking), reads
the dates (YYYY-MM-DD; the end date inclusive), "top N" and the quoted names the goal gives, runs the matching
query and answers under the task's id. A goal it does not understand gets no answer (and fails honestly).

For ``diagnose``/``mitigate`` tasks (cost-alert incidents on the live shop, ITBench Tables 28-29) it follows the
tables' diagnosis steps through the gateway: the CostOverBudget alerts, the autoscaler policy and its last loop
(replicas, CPU utilisation), the budgets. A CPU target below ``SANE_TARGET`` percent is a misconfigured autoscaler:
it puts the target back to ``DEFAULT_TARGET`` and removes the extra replicas the corrected rule does not need.
Otherwise the replicas follow real load and the budget is stale: it sets the budget to the cost of one replica more
than now plus ``BUDGET_HEADROOM`` (an autoscaler at a steady load moves between neighbouring replica counts; a budget
at today's count would fire again at the next scale-up).

Run as ``python -m orchestrator.agents.finops`` with OPSBENCH_MANIFEST set (the default agent of FinOps scenarios).
"""

from __future__ import annotations

import datetime as dt
import json
import re
import sys
from typing import Any

from orchestrator.agents.gateway_client import GatewayClient, ToolError, open_session
from orchestrator.agents.heuristic import alert_list
from orchestrator.finops import insights
from orchestrator.finops.detect import detect, ranked

DATE = re.compile(r"\b(\d{4}-\d{2}-\d{2})\b")
QUOTED = re.compile(r"'([^']+)'")
TOP = re.compile(r"\btop (\d+)\b")
MONTHS = {m.lower(): i for i, m in enumerate(("January", "February", "March", "April", "May", "June", "July",
                                                 "August", "September", "October", "November", "December"), 1)}
MONTH = re.compile(r"\b(" + "|".join(MONTHS) + r") (\d{4})\b")


def classify(goal: str) -> str | None:
    g = goal.lower()
    if "anomal" in g:
        return "anomaly_rank" if ("rank" in g or "importance" in g) else "anomaly_detect"
    for words, kind in ((("allocat",), "allocation_ratio"), (("peak",), "peak_to_average"),
                        (("variance",), "cost_variance"), (("discount",), "discount_coverage"),
                        (("categor",), "cost_by_category"), (("application",), "top_applications")):
        if all(w in g for w in words):
            return kind
    return None


def window(goal: str) -> tuple[str, str] | None:
    """(start, end exclusive) from two dates (end inclusive in the goal) or from 'Month YYYY'."""
    dates = DATE.findall(goal)
    if len(dates) >= 2:
        end = dt.date.fromisoformat(dates[1]) + dt.timedelta(days=1)
        return dates[0], end.isoformat()
    month = MONTH.search(goal.lower())
    if month:
        first = dt.date(int(month.group(2)), MONTHS[month.group(1)], 1)
        nxt = dt.date(first.year + first.month // 12, first.month % 12 + 1, 1)
        return first.isoformat(), nxt.isoformat()
    return None


def query(tool: GatewayClient, sql: str) -> list[dict[str, Any]]:
    """All rows of one query, following the gateway's pages."""
    rows: list[dict[str, Any]] = []
    page: str | None = None
    while True:
        args: dict[str, Any] = {"sql": sql, "limit": 1000}
        if page:
            args["page"] = page
        result = tool("query_sql", **args)
        rows += [dict(zip(result["columns"], r, strict=True)) for r in result["rows"]]
        page = tool.next_page
        if not page:
            return rows


def answer_insight(tool: GatewayClient, kind: str, goal: str) -> list[dict[str, Any]]:
    params: dict[str, Any] = {}
    span = window(goal)
    if kind != "discount_coverage":
        if span is None:
            raise ValueError("no time window in the goal")
        params.update(start=span[0], end=span[1])
    if kind == "cost_by_category":
        params["categories"] = QUOTED.findall(goal)
    if kind in ("top_applications", "peak_to_average", "cost_variance", "discount_coverage"):
        top = TOP.search(goal.lower())
        params["top"] = int(top.group(1)) if top else 5
    return query(tool, insights.resolve(kind, **params))


def answer_anomalies(tool: GatewayClient, kind: str, goal: str) -> list[dict[str, Any]]:
    names = QUOTED.findall(goal)
    if len(names) < 2:
        raise ValueError("the goal names no service and pricing unit in quotes")
    service, unit = names[0], names[1]
    span = window(goal)
    rows = query(tool, insights.series_sql(service, unit))
    series = [(r["day"], float(r["cost"])) for r in rows]
    last = (dt.date.fromisoformat(span[1]) - dt.timedelta(days=1)).isoformat() if span else None
    events = detect(series, (span[0], last) if span and last else None)
    if kind == "anomaly_rank":
        return [{"entity": service, "metric": "BilledCost", "kind": "spike" if e["days"] <= 2 else "level_shift",
                 "start": e["start"], "end": e["end"], "days": e["days"], "cost": e["cost"],
                 "importance": e["importance"]} for e in ranked(events)]
    days = []
    for e in events:
        for i in range(e.days):
            day = (e.start + dt.timedelta(days=i)).isoformat()
            days.append({"entity": service, "metric": "BilledCost", "start": day, "end": day})
    return days


SANE_TARGET = 25
"""Below this CPU target (percent of the request) the baseline calls an autoscaler rule misconfigured."""
DEFAULT_TARGET = 60
BUDGET_HEADROOM = 0.1


def _metric(tool: GatewayClient, promql: str) -> float | None:
    result = tool("query_metrics", query=promql)
    series = result.get("items") if isinstance(result, dict) else result
    try:
        return float(series[0]["value"][1]) if series else None
    except (KeyError, IndexError, TypeError, ValueError):
        return None


def cost_incident(tool: GatewayClient, kinds: set[str]) -> dict[str, Any]:
    """Diagnose (and, for a mitigate task, mitigate) the cost alerts."""
    from orchestrator.finops.cost import recommend

    alerts = alert_list(tool("get_alerts", limit=200))
    over = sorted({str((a.get("labels") or {}).get("service")) for a in alerts
                   if a.get("alertname") == "CostOverBudget"})
    if not over:
        out: dict[str, Any] = {"incident": False, "entities": [], "explanation": "no CostOverBudget alert"}
        if "mitigate" in kinds:
            out.update(actions=[], plan="no cost alert: nothing to do")
        return out
    status = tool("get_autoscaler_policy")
    policy, last = status["policy"]["services"], (status.get("last_loop") or {}).get("services") or {}
    budgets = tool("get_budgets")["budgets_hourly_usd"]
    entities: list[dict[str, Any]] = []
    propagations: list[dict[str, str]] = []
    actions: list[dict[str, Any]] = []
    notes: list[str] = []
    evidence = ["alert:CostOverBudget", "metric:opsbench:service_cost_hourly_usd"]
    for service in over:
        rule, seen = policy.get(service), last.get(service) or {}
        cost_now = _metric(tool, f'sum(opsbench:service_cost_hourly_usd{{service="{service}"}})')
        util = seen.get("cpu_utilisation_percent")
        replicas = int(seen.get("replicas") or 0)
        notes.append(f"{service}: cost {cost_now} USD/h vs budget {budgets.get(service)}, {replicas} replicas at "
                     f"{util}% CPU of requests, autoscaler target {rule and rule['target_cpu_percent']}%")
        if rule is not None and float(rule["target_cpu_percent"]) < SANE_TARGET:
            entities += [{"id": "autoscaler", "root_cause": True, "layer": "configuration",
                          "fault_type": "scaling_misconfiguration"}, {"id": service}]
            propagations += [
                {"source": "autoscaler", "target": service,
                 "condition": f"scale-up target of {rule['target_cpu_percent']}% CPU, far below normal utilisation",
                 "effect": f"{service} scaled to {replicas} replicas at low utilisation"},
                {"source": service, "target": "budgets", "condition": "more replicas than the load needs",
                 "effect": "hourly cost above budget (CostOverBudget)"}]
            if "mitigate" in kinds:
                fixed = tool("set_autoscaler_policy", service=service, target_cpu_percent=DEFAULT_TARGET)
                actions.append({"action": "set_autoscaler_policy", "target": "autoscaler",
                                "params": {"service": service, "target_cpu_percent": DEFAULT_TARGET},
                                "result": json.dumps(fixed)[:300]})
                fixed_rule = {**rule, "target_cpu_percent": DEFAULT_TARGET}
                want = recommend(replicas, None if util is None else util / 100, fixed_rule)
                if want < replicas:
                    scaled = tool("scale", service=service, replicas=want)
                    actions.append({"action": "scale", "target": service, "params": {"replicas": want},
                                    "result": json.dumps(scaled)[:300]})
        else:
            entities += [{"id": "budgets", "root_cause": True, "layer": "configuration", "fault_type": "stale_budget"},
                         {"id": service}]
            propagations += [
                {"source": "gateway", "target": service, "condition": "a sustained increase of the users' requests",
                 "effect": f"the autoscaler legitimately scaled {service} to {replicas} replicas at {util}% CPU"},
                {"source": service, "target": "budgets", "condition": "the budget was set for the old load",
                 "effect": "hourly cost above the stale budget (CostOverBudget)"}]
            if "mitigate" in kinds and cost_now:
                per_replica = cost_now / replicas if replicas else cost_now
                new = round(per_replica * (max(replicas, 1) + 1) * (1 + BUDGET_HEADROOM), 6)
                updated = tool("set_budget", service=service, hourly_usd=new)
                actions.append({"action": "set_budget", "target": "budgets",
                                "params": {"service": service, "hourly_usd": new}, "result": json.dumps(updated)[:300]})
    out = {"incident": True, "entities": entities, "propagations": propagations, "alerts_explained": ["CostOverBudget"],
           "evidence": evidence, "explanation": "; ".join(notes)}
    if "mitigate" in kinds:
        out.update(actions=actions, plan="autoscaler rule fixed and extra replicas removed" if any(
            a["action"] == "set_autoscaler_policy" for a in actions) else "budget updated to the new stable load")
    return out


def main() -> int:
    session = open_session()
    manifest = session.manifest
    tool = GatewayClient(session.url, session.token)
    kinds = {t["kind"] for t in manifest["tasks"]}
    if kinds & {"diagnose", "mitigate"}:
        incident = cost_incident(tool, kinds)
        session.write(incident)
        print(incident["explanation"])
        return 0
    output: dict[str, Any] = {"schema": "opsbench/finops/v1", "answers": {}}
    notes = []
    for task in manifest["tasks"]:
        if task["kind"] != "analyze":
            continue
        kind = classify(task["goal"])
        try:
            if kind is None:
                notes.append(f"{task['id']}: question not understood")
            elif kind.startswith("anomaly"):
                output["anomalies"] = answer_anomalies(tool, kind, task["goal"])
                notes.append(f"{task['id']}: {len(output['anomalies'])} anomalies ({kind})")
            else:
                output["answers"][task["id"]] = answer_insight(tool, kind, task["goal"])
                notes.append(f"{task['id']}: {kind}")
        except (ToolError, ValueError, KeyError) as exc:
            notes.append(f"{task['id']}: {kind} failed: {exc}")
    output["explanation"] = "; ".join(notes)
    session.write(output)
    print(output["explanation"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
