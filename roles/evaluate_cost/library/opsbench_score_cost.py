#!/usr/bin/python
"""Ansible module: score a cost incident's outcome with orchestrator.finops.cost (ITBench App. E.4.2)."""

DOCUMENTATION = r"""
module: opsbench_score_cost
short_description: Proximity of a service's cost and efficiency to the ground truth's optimum
description:
  - Reads the service's hourly CPU and memory cost and CPU and memory efficiency from the run's Prometheus
    (the cost model's recording rules) and calls orchestrator.finops.cost.score_cost; never fails on missing data.
options:
  ground_truth: {description: Path of the scenario's ground-truth YAML file., type: path, required: true}
  result_file: {description: Where to write the scores as JSON., type: path, required: true}
  prometheus: {description: Prometheus base URL of the run., type: str, required: true}
  window: {description: Averaging window (Prometheus duration)., type: str, default: 30s}
"""

import json
from pathlib import Path

import yaml
from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(
        argument_spec={
            "ground_truth": {"type": "path", "required": True},
            "result_file": {"type": "path", "required": True},
            "prometheus": {"type": "str", "required": True},
            "window": {"type": "str", "default": "30s"},
        },
        supports_check_mode=True,
    )
    try:
        from prometheus_api_client import PrometheusConnect

        from orchestrator.finops.cost import observe, score_cost
    except ImportError as exc:
        module.fail_json(msg=f"orchestrator is not importable by {module._name}'s Python: {exc}")
    p = module.params
    ground_truth = yaml.safe_load(Path(p["ground_truth"]).read_text())
    spec = (ground_truth.get("finops") or {}).get("cost") or {}
    observed = {}
    if spec:
        prom = PrometheusConnect(url=p["prometheus"], disable_ssl=True)
        observed = observe(prom.custom_query, spec["service"], window=p["window"])
    scores = score_cost(ground_truth, observed)
    if not module.check_mode:
        Path(p["result_file"]).write_text(json.dumps(scores, indent=2, sort_keys=True))
    module.exit_json(changed=False, scores=scores)


if __name__ == "__main__":
    main()
