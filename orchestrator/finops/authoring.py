"""Writes the FinOps scenarios' ground truth from their definitions: ``python -m orchestrator.finops.authoring``.

Each definition names the question (a kind of orchestrator/finops/insights.py with its parameters, or an anomaly
series and window); the ground truth gets the resolved reference query and the rows it returns on the scenario's
dataset, or the planted anomalies of the series in the window with their importance. The specs themselves are
written by hand; this only (re)writes ``ground_truth.yaml`` (tests/unit/test_finops_scenarios.py checks that what
is committed is what the reference queries and the generator give).
"""

from __future__ import annotations

import sys
from typing import Any

import yaml

from orchestrator import paths
from orchestrator.spec import load_scenario

from .truth import anomaly_items, answer, dataset_spec, with_dataset

SEPT = {"start": "2024-09-01", "end": "2024-10-01"}

# scenario id -> (task id, question kind, parameters) or (task id, "anomalies", mode, service, unit, window)
DEFINITIONS: dict[str, tuple[Any, ...]] = {
    "finops-cost-by-category": ("cost_by_category", "cost_by_category",
                                {"categories": ["Compute", "Storage"], **SEPT}),
    "finops-top-applications": ("top_applications", "top_applications", {"top": 3, **SEPT}),
    "finops-allocation-ratio": ("allocation_ratio", "allocation_ratio", SEPT),
    "finops-peak-to-average": ("peak_to_average", "peak_to_average", {"top": 5, **SEPT}),
    "finops-cost-variance": ("cost_variance", "cost_variance", {"top": 5, "start": "2024-09-01",
                                                                "end": "2024-09-09"}),
    "finops-discount-coverage": ("discount_coverage", "discount_coverage", {"top": 5}),
    "finops-anomaly-detection": ("anomalies", "anomalies", "detect", "Amazon Elastic Compute Cloud", "Hours",
                                 ("2024-09-01", "2024-09-30")),
    "finops-anomaly-ranking": ("anomalies", "anomalies", "rank", "Virtual Machines", "Hours",
                               ("2024-09-01", "2024-09-30")),
}

HEADER = "# yaml-language-server: $schema=../../orchestrator/schemas/ground_truth.schema.json\n"


def build(scenario_id: str) -> dict[str, Any]:
    scn = load_scenario(paths.SPECS_DIR / scenario_id / "scenario.yaml")
    spec = dataset_spec(scn.environment["args"])
    con, summary, tmp = with_dataset(spec)
    try:
        d = DEFINITIONS[scenario_id]
        finops: dict[str, Any] = {"dataset": {k: v for k, v in summary["spec"].items()}}
        if d[1] == "anomalies":
            task_id, _, mode, service, unit, (start, end) = d
            from .insights import series_sql
            finops["anomalies"] = {
                "id": task_id, "mode": mode,
                "series": {"service": service, "pricingUnit": unit, "query": series_sql(service, unit)},
                "window": {"start": start, "end": end},
                "items": anomaly_items(con, summary["anomalies"], service, unit, start, end)}
        else:
            task_id, kind, params = d
            finops["answers"] = [answer(con, kind, task_id, **params)]
    finally:
        con.close()
        tmp.cleanup()
    return {"apiVersion": "opsbench/v1", "kind": "GroundTruth", "scenario": scenario_id, "incident": False,
            "entities": [], "finops": finops,
            "trajectory": {"mandatoryTools": ["query_sql"], "acceptableTools": ["describe_billing_schema"]}}


def main(argv: list[str]) -> int:
    for sid in argv or list(DEFINITIONS):
        gt = build(sid)
        target = paths.SPECS_DIR / sid / "ground_truth.yaml"
        target.write_text(HEADER + yaml.safe_dump(gt, sort_keys=False, width=110, allow_unicode=True))
        print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
