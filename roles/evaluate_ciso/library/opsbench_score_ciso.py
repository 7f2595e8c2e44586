#!/usr/bin/python
"""Ansible module: score a CISO assessment with orchestrator.evaluation.ciso."""

DOCUMENTATION = r"""
module: opsbench_score_ciso
short_description: Score an agent's CISO fetcher and checker on the run's target host
description:
  - Calls orchestrator.evaluation.ciso.assess; never fails on a bad submission (that is a score).
options:
  output: {description: Path of the agent's output file., type: path, required: true}
  ground_truth: {description: Path of the scenario's ground-truth YAML file., type: path, required: true}
  environment_file: {description: The run's environment.json (target inventory; container or files to guard)., type: path, required: true}
  work_dir: {description: Where the artifacts, evidence and fetcher log are written., type: path, required: true}
  result_file: {description: Where to write the scores as JSON., type: path, required: true}
  timeline: {description: Step name to started_at/ended_at Unix times., type: dict, default: {}}
  fetcher_timeout: {description: Seconds the fetcher may run., type: float, default: 60}
  policy_timeout: {description: Seconds one policy evaluation may take., type: float, default: 10}
  project_root: {description: The checkout whose orchestrator package scores (first on sys.path)., type: path, required: true}
"""

import json
import sys
from pathlib import Path

import yaml
from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(
        argument_spec={
            "output": {"type": "path", "required": True},
            "ground_truth": {"type": "path", "required": True},
            "environment_file": {"type": "path", "required": True},
            "work_dir": {"type": "path", "required": True},
            "result_file": {"type": "path", "required": True},
            "timeline": {"type": "dict", "default": {}},
            "fetcher_timeout": {"type": "float", "default": 60},
            "policy_timeout": {"type": "float", "default": 10},
            "project_root": {"type": "path", "required": True},
        },
        supports_check_mode=False,
    )
    # The checkout that runs this role scores, also when another checkout is installed in the venv.
    sys.path.insert(0, module.params["project_root"])
    try:
        from orchestrator.evaluation.ciso import assess, guard_for
    except ImportError as exc:
        module.fail_json(msg=f"orchestrator is not importable by {module._name}'s Python: {exc}")
    p = module.params
    env = json.loads(Path(p["environment_file"]).read_text())
    ground_truth = yaml.safe_load(Path(p["ground_truth"]).read_text())
    try:
        guard = guard_for(env.get("control") or {}, Path(p["work_dir"]))
        scores = assess(Path(p["output"]), ground_truth, Path(env["targets"]["inventory"]),
                        guard, Path(p["work_dir"]), p["timeline"],
                        fetcher_timeout=p["fetcher_timeout"], policy_timeout=p["policy_timeout"])
    except RuntimeError as exc:
        module.fail_json(msg=str(exc))
    Path(p["result_file"]).write_text(json.dumps(scores, indent=2, sort_keys=True) + "\n")
    module.exit_json(changed=False, scores=scores)


if __name__ == "__main__":
    main()
