#!/usr/bin/python
"""Ansible module: check the mitigation's state and score it with orchestrator.evaluation."""

DOCUMENTATION = r"""
module: opsbench_score_mitigation
short_description: Score an agent's SRE mitigation by the environment's state
description:
  - Runs the ground truth's mitigation state checks against Prometheus, then calls
    orchestrator.evaluation.score_mitigation; never fails on a bad or missing report.
options:
  output: {description: Path of the agent's output file., type: path, required: true}
  ground_truth: {description: Path of the scenario's ground-truth YAML file., type: path, required: true}
  result_file: {description: Where to write the scores as JSON., type: path, required: true}
  prometheus: {description: Prometheus base URL of the run., type: str, required: true}
  alerts: {description: Result of the quiet-with-hold alert wait (check_alerts wait)., type: dict, required: true}
  timeline: {description: Step name to started_at/ended_at Unix times., type: dict, default: {}}
  check_timeout: {description: Seconds each state check may take to hold., type: float, default: 20}
"""

import json
from pathlib import Path

import yaml
from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(
        argument_spec={
            "output": {"type": "path", "required": True},
            "ground_truth": {"type": "path", "required": True},
            "result_file": {"type": "path", "required": True},
            "prometheus": {"type": "str", "required": True},
            "alerts": {"type": "dict", "required": True},
            "timeline": {"type": "dict", "default": {}},
            "check_timeout": {"type": "float", "default": 20},
        },
        supports_check_mode=True,
    )
    try:
        from prometheus_api_client import PrometheusConnect

        from orchestrator.evaluation.mitigation import run_state_checks, score_mitigation
    except ImportError as exc:
        module.fail_json(msg=f"orchestrator is not importable by {module._name}'s Python: {exc}")
    p = module.params
    ground_truth = yaml.safe_load(Path(p["ground_truth"]).read_text())
    prom = PrometheusConnect(url=p["prometheus"], disable_ssl=True)
    state = run_state_checks(prom.custom_query, ground_truth, timeout=p["check_timeout"])
    scores = score_mitigation(Path(p["output"]), p["alerts"], state, p["timeline"])
    if not module.check_mode:
        Path(p["result_file"]).write_text(json.dumps({**scores, "state_checks": state}, indent=2, sort_keys=True))
    module.exit_json(changed=False, scores=scores)


if __name__ == "__main__":
    main()
