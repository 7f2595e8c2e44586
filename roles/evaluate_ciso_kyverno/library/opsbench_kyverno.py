#!/usr/bin/python
"""Ansible module: prepare or score a CISO Kyverno submission with orchestrator.evaluation.ciso_kyverno."""

DOCUMENTATION = r"""
module: opsbench_kyverno
short_description: Check an agent's Kyverno policy (prepare) or score it from PolicyReports (score)
description:
  - Never fails on a bad submission (that is a score).
options:
  action: {description: prepare or score., type: str, required: true, choices: [prepare, score]}
  output: {description: Path of the agent's output file., type: path, required: true}
  run_id: {description: The run id (label of the applied policy)., type: str, required: true}
  work_dir: {description: Where the policy as applied is written., type: path, required: true}
  project_root: {description: The checkout whose orchestrator package scores (first on sys.path)., type: path, required: true}
  ground_truth: {description: Path of the ground truth (score)., type: path}
  result_file: {description: Where to write the scores (score)., type: path}
  applied: {description: Whether the cluster accepted the policy (score)., type: bool, default: false}
  apply_error: {description: The cluster's message when it refused it (score)., type: str, default: ""}
  reports: {description: PolicyReports read from the cluster (score)., type: list, elements: dict, default: []}
  namespaces: {description: Namespaces whose reports count (score)., type: list, elements: str, default: []}
  since: {description: Only report results written at or after this epoch second count (score; 0 - all)., type: int, default: 0}
  timeline: {description: Step name to started_at/ended_at Unix times., type: dict, default: {}}
"""

import json
import sys
from pathlib import Path

import yaml
from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(argument_spec={
        "action": {"type": "str", "required": True, "choices": ["prepare", "score"]},
        "output": {"type": "path", "required": True},
        "run_id": {"type": "str", "required": True},
        "work_dir": {"type": "path", "required": True},
        "project_root": {"type": "path", "required": True},
        "ground_truth": {"type": "path"},
        "result_file": {"type": "path"},
        "applied": {"type": "bool", "default": False},
        "apply_error": {"type": "str", "default": ""},
        "reports": {"type": "list", "elements": "dict", "default": []},
        "namespaces": {"type": "list", "elements": "str", "default": []},
        "since": {"type": "int", "default": 0},
        "timeline": {"type": "dict", "default": {}},
    }, supports_check_mode=False)
    p = module.params
    sys.path.insert(0, p["project_root"])
    try:
        from orchestrator.evaluation import ciso_kyverno as kv
    except ImportError as exc:
        module.fail_json(msg=f"orchestrator is not importable by {module._name}'s Python: {exc}")
    out = Path(p["output"])
    status, text, problems = kv.read_output(out.read_text() if out.is_file() else None)
    doc, policy_problems = kv.check_policy(text) if status == "scored" else (None, [])
    work = Path(p["work_dir"])
    work.mkdir(parents=True, exist_ok=True)
    if p["action"] == "prepare":
        applied = kv.audit_mode(doc, p["run_id"]) if doc is not None and not policy_problems else None
        if text:
            (work / "policy.submitted.yaml").write_text(text)
        if applied is not None:
            (work / "policy.yaml").write_text(yaml.safe_dump(applied, sort_keys=False))
        module.exit_json(changed=False, policy=applied, status=status, problems=problems + policy_problems,
                         name=(applied or {}).get("metadata", {}).get("name", ""),
                         kind=(applied or {}).get("kind", ""), api_version=(applied or {}).get("apiVersion", ""))
    ground_truth = yaml.safe_load(Path(p["ground_truth"]).read_text())
    name = ((doc or {}).get("metadata") or {}).get("name", "")
    scores = kv.score(status=status, policy_problems=problems + policy_problems, applied=p["applied"],
                      apply_error=p["apply_error"], reports=p["reports"], policy_name=name,
                      namespaces=p["namespaces"], ground_truth=ground_truth, timeline=p["timeline"],
                      since=p["since"])
    (work / "reports.json").write_text(json.dumps(p["reports"], indent=1))
    Path(p["result_file"]).write_text(json.dumps(scores, indent=2, sort_keys=True) + "\n")
    module.exit_json(changed=False, scores=scores)


if __name__ == "__main__":
    main()
