#!/usr/bin/python
"""Ansible module: score a diagnosis with orchestrator.evaluation (runs on the controller's Python)."""

DOCUMENTATION = r"""
module: opsbench_score_diagnosis
short_description: Score an agent's SRE diagnosis against ground truth
description:
  - Calls orchestrator.evaluation.score_diagnosis; never fails on a bad or missing output,
    which is scored as malformed or no_submission.
options:
  output:
    description: Path of the agent's output file.
    type: path
    required: true
  ground_truth:
    description: Path of the scenario's ground-truth YAML file.
    type: path
    required: true
  result_file:
    description: Where to write the scores as JSON.
    type: path
    required: true
  environment:
    description: The run's environment.json; its topology makes NTAM (ntam_fl, ntam_fpc) computable.
    type: path
  scenario:
    description: >-
      The scenario spec (default scenario.yaml beside the ground truth); the targets of its distractors
      (faults marked distractor) are reported as blamed_distractors when the output names them as a root cause.
    type: path
"""

import json
from pathlib import Path

import yaml
from ansible.module_utils.basic import AnsibleModule


def spec_distractors(spec_file):
    """The targets of the spec's distractors (none when there is no spec beside the ground truth)."""
    if not spec_file.is_file():
        return []
    spec = yaml.safe_load(spec_file.read_text())
    faults = (spec or {}).get("faults") or []
    if not any(isinstance(f, dict) and f.get("distractor") for f in faults):
        return []
    from orchestrator.generation.instances import distractor_targets
    return distractor_targets([{"args": {}, **f} for f in faults])


def main():
    module = AnsibleModule(
        argument_spec={
            "output": {"type": "path", "required": True},
            "ground_truth": {"type": "path", "required": True},
            "result_file": {"type": "path", "required": True},
            "environment": {"type": "path"},
            "scenario": {"type": "path"},
        },
        supports_check_mode=True,
    )
    try:
        from orchestrator.evaluation import score_diagnosis
    except ImportError as exc:
        module.fail_json(msg=f"orchestrator is not importable by {module._name}'s Python: {exc}")
    ground_truth = yaml.safe_load(Path(module.params["ground_truth"]).read_text())
    topology = None
    env_file = module.params["environment"]
    if env_file and Path(env_file).is_file():
        topology = json.loads(Path(env_file).read_text()).get("topology")
    spec_file = Path(module.params["scenario"] or Path(module.params["ground_truth"]).parent / "scenario.yaml")
    try:
        distractors = spec_distractors(spec_file)
    except Exception as exc:  # a spec that validated cannot fail here; say so rather than score without it
        module.fail_json(msg=f"cannot read the distractors of {spec_file}: {exc}")
    scores = score_diagnosis(Path(module.params["output"]), ground_truth, topology, distractors=distractors)
    if not module.check_mode:
        # The evaluation directory is made here, not by a task of its own (each module call costs a trial 0.2-0.4 s).
        Path(module.params["result_file"]).parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        Path(module.params["result_file"]).write_text(json.dumps(scores, indent=2, sort_keys=True))
    module.exit_json(changed=False, scores=scores)


if __name__ == "__main__":
    main()
