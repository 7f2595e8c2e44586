"""The deterministic baseline FinOps agent: reference-style SQL for the insight prompts it understands, and the
standard anomaly detector (orchestrator/finops/detect.py) for anomaly prompts.

It sees only the manifest and the run's tool gateway (REST): every query goes through ``query_sql``. For each
``analyze`` task it recognises the question from keywords of the goal (cost per category, top applications,
allocation ratio, peak-to-average ratio, daily cost variance, discount coverage, anomaly detection or ranking), reads
the dates (YYYY-MM-DD; the end date inclusive), "top N" and the quoted names the goal gives, runs the matching
query and answers under the task's id. A goal it does not understand gets no answer (and fails honestly).

Run as ``python -m orchestrator.agents.finops`` with OPSBENCH_MANIFEST set (the default agent of FinOps scenarios).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

from orchestrator.agents.heuristic import GatewayClient, ToolError
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


def main() -> int:
    manifest = json.loads(Path(os.environ["OPSBENCH_MANIFEST"]).read_text())
    token = Path(manifest["token_file"]).read_text().strip()
    tool = GatewayClient(manifest["tools"]["url"], token)
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
    Path(os.environ.get("OPSBENCH_OUTPUT", manifest["output"]["path"])).write_text(json.dumps(output, indent=2))
    print(output["explanation"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
