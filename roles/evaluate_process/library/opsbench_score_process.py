#!/usr/bin/python
"""Ansible module: process metrics of a run with orchestrator.evaluation.process."""

DOCUMENTATION = r"""
module: opsbench_score_process
short_description: Process metrics of a run from its trajectory
options:
  trajectory: {description: Path of the run's trajectory JSONL., type: path, required: true}
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
            "trajectory": {"type": "path", "required": True},
            "output": {"type": "path", "required": True},
            "ground_truth": {"type": "path", "required": True},
            "result_file": {"type": "path", "required": True},
        },
        supports_check_mode=True,
    )
    try:
        from orchestrator.evaluation.process import score_process
    except ImportError as exc:
        module.fail_json(msg=f"orchestrator is not importable by {module._name}'s Python: {exc}")
    p = module.params
    ground_truth = yaml.safe_load(Path(p["ground_truth"]).read_text())
    reported = Path(p["trajectory"]).with_name("agent-trajectory.jsonl")
    model_calls = Path(p["trajectory"]).with_name("model-calls.jsonl")  # a preset's calls, counted by the proxy
    scores = score_process(Path(p["trajectory"]), Path(p["output"]), ground_truth, reported, model_calls)
    if not module.check_mode:
        # The evaluation directory is made here, not by a task of its own (each module call costs a trial 0.2-0.4 s).
        Path(p["result_file"]).parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        Path(p["result_file"]).write_text(json.dumps(scores, indent=2, sort_keys=True))
    module.exit_json(changed=False, scores=scores)


if __name__ == "__main__":
    main()
