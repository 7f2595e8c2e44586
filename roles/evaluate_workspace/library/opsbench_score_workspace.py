#!/usr/bin/python
"""Ansible module: score DevOps fix and write-tests tasks with orchestrator.evaluation.workspace."""

DOCUMENTATION = r"""
module: opsbench_score_workspace
short_description: Build and test fresh copies of the agent's workspace projects and score each stage
description:
  - Calls orchestrator.evaluation.workspace.score_workspace; never fails on what the agent did (that is a score).
options:
  output: {description: Path of the agent's collected output file (informational)., type: path, required: true}
  ground_truth: {description: Path of the scenario's ground-truth YAML file (its workspace stages)., type: path, required: true}
  environment_file: {description: The run's environment.json (its workspace section)., type: path, required: true}
  work_dir: {description: Where the scratch copies are built (removed afterwards)., type: path, required: true}
  result_file: {description: Where to write the scores as JSON., type: path, required: true}
  image: {description: The workspace image the checks run in., type: str, required: true}
  check_timeout: {description: Seconds one make check may run., type: int, default: 300}
  keep_work: {description: Keep the scratch copies (debugging)., type: bool, default: false}
  project_root: {description: The checkout whose orchestrator package scores (first on sys.path)., type: path, required: true}
"""

import json
import shutil
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
            "image": {"type": "str", "required": True},
            "check_timeout": {"type": "int", "default": 300},
            "keep_work": {"type": "bool", "default": False},
            "project_root": {"type": "path", "required": True},
        },
        supports_check_mode=False,
    )
    # The checkout that runs this role scores, also when another checkout is installed in the venv.
    sys.path.insert(0, module.params["project_root"])
    try:
        from orchestrator.evaluation.workspace import score_workspace, write_result
    except ImportError as exc:
        module.fail_json(msg=f"orchestrator is not importable by {module._name}'s Python: {exc}")
    p = module.params
    env = json.loads(Path(p["environment_file"]).read_text())
    ground_truth = yaml.safe_load(Path(p["ground_truth"]).read_text())
    work = Path(p["work_dir"])
    shutil.rmtree(work, ignore_errors=True)  # a second evaluation of the same run starts clean
    work.mkdir(parents=True, mode=0o755)
    try:
        scores = score_workspace(Path(p["output"]), ground_truth, env, work, image=p["image"],
                                 timeout=p["check_timeout"])
    except (OSError, ValueError, KeyError) as exc:
        module.fail_json(msg=f"scoring the workspace failed: {exc}")
    finally:
        if not p["keep_work"]:
            shutil.rmtree(work, ignore_errors=True)
    write_result(scores, Path(p["result_file"]))
    module.exit_json(changed=False, scores=scores)


if __name__ == "__main__":
    main()
