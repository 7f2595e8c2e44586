#!/usr/bin/python
"""Ansible module: score a FinOps output with orchestrator.evaluation.finops."""

DOCUMENTATION = r"""
module: opsbench_score_finops
short_description: Score an agent's FinOps output (answers, anomalies) against ground truth
description:
  - Calls orchestrator.evaluation.finops.score_finops; never fails on a bad or missing output,
    which is scored as malformed or no_submission.
options:
  output: {description: Path of the agent's output file., type: path, required: true}
  ground_truth: {description: Path of the scenario's ground-truth YAML file., type: path, required: true}
  result_file: {description: Where to write the scores as JSON., type: path, required: true}
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
        },
        supports_check_mode=True,
    )
    try:
        from orchestrator.evaluation.finops import score_finops
    except ImportError as exc:
        module.fail_json(msg=f"orchestrator is not importable by {module._name}'s Python: {exc}")
    p = module.params
    ground_truth = yaml.safe_load(Path(p["ground_truth"]).read_text())
    scores = score_finops(Path(p["output"]), ground_truth)
    if not module.check_mode:
        Path(p["result_file"]).write_text(json.dumps(scores, indent=2, sort_keys=True))
    module.exit_json(changed=False, scores=scores)


if __name__ == "__main__":
    main()
