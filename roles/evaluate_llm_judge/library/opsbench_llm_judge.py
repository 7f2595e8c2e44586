#!/usr/bin/python
"""Ansible module: ask the optional LLM judge (orchestrator.evaluation.judge) on the controller's Python."""

DOCUMENTATION = r"""
module: opsbench_llm_judge
short_description: Grade the free text of an agent's output with an LLM judge
description:
  - Calls orchestrator.evaluation.judge for each field (condition, plan) and writes one flat
    result. Never fails: a judge that is off gives status skipped, a failing endpoint or an
    unusable answer gives status judge_error.
  - The API key is read here from the environment variable named by api_key_env (or from
    api_key_file); it is deliberately not an option, so it never lands in ansible-runner's
    artifacts or events.
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
    description: Where to write the result as JSON.
    type: path
    required: true
  url:
    description: Base URL of the Chat Completions endpoint; empty to configure the judge from OPSBENCH_JUDGE_*.
    type: str
    default: ""
  model:
    description: Model name; empty to use OPSBENCH_JUDGE_MODEL.
    type: str
    default: ""
  api_key_env:
    description: Name of the environment variable holding the API key (used when url is set).
    type: str
    default: OPSBENCH_JUDGE_API_KEY
  api_key_file:
    description: Path of a file holding the API key, read when the variable is unset (used when url is set).
    type: str
    default: ""
  fields:
    description: Fields to judge.
    type: list
    elements: str
    default: [condition, plan]
  timeout:
    description: Seconds per socket operation of a request.
    type: int
    default: 30
  prompt_version:
    description: Prompt version suffix (v1 gives condition-v1 and plan-v1).
    type: str
    default: v1
  json_mode:
    description: Send response_format json_object.
    type: bool
    default: false
"""

import dataclasses
import json
import os
from pathlib import Path

from ansible.module_utils.basic import AnsibleModule


def _config(params, judge):
    """The judge's config: the role's url/model/key settings, else OPSBENCH_JUDGE_* (None: off)."""
    url, model = params["url"].strip(), params["model"].strip()
    if url:
        config = judge.JudgeConfig(
            base_url=url, model=model or os.environ.get("OPSBENCH_JUDGE_MODEL", "").strip(),
            api_key_env=params["api_key_env"].strip() or judge.DEFAULT_API_KEY_ENV,
            api_key_file=params["api_key_file"].strip() or None)
    else:
        config = judge.judge_config_from_env()
        if config is None:
            return None
        if model:
            config = dataclasses.replace(config, model=model)
    return dataclasses.replace(config, timeout=float(params["timeout"]),
                               prompt_version=params["prompt_version"], json_mode=params["json_mode"])


def _error(reason):
    return {"status": "judge_error", "reason": reason}


def main():
    module = AnsibleModule(
        argument_spec={
            "output": {"type": "path", "required": True},
            "ground_truth": {"type": "path", "required": True},
            "result_file": {"type": "path", "required": True},
            "url": {"type": "str", "default": ""},
            "model": {"type": "str", "default": ""},
            "api_key_env": {"type": "str", "default": "OPSBENCH_JUDGE_API_KEY"},
            "api_key_file": {"type": "str", "default": ""},
            "fields": {"type": "list", "elements": "str", "default": ["condition", "plan"],
                       "choices": ["condition", "plan"]},
            "timeout": {"type": "int", "default": 30},
            "prompt_version": {"type": "str", "default": "v1"},
            "json_mode": {"type": "bool", "default": False},
        },
        supports_check_mode=True,
    )
    p = module.params
    try:
        from orchestrator.evaluation import judge
    except ImportError as exc:  # an optional evaluator reports, it does not fail the run
        scores = _error(f"orchestrator is not importable by {module._name}'s Python: {exc}")
    else:
        try:
            config = _config(p, judge)
        except ValueError as exc:
            scores = _error(f"judge misconfigured: {exc}")
        else:
            if module.check_mode:
                scores = {"status": "skipped", "reason": "check mode: the judge is not called"}
            else:
                output = None
                out_file = Path(p["output"])
                if out_file.is_file():
                    try:
                        output = json.loads(out_file.read_text())
                    except (ValueError, UnicodeDecodeError):
                        output = None  # malformed: evaluate_diagnosis scores it; the judge skips it
                try:
                    import yaml

                    ground_truth = yaml.safe_load(Path(p["ground_truth"]).read_text()) or {}
                    scores = judge.judge_fields(output, ground_truth, config, p["fields"])
                except Exception as exc:  # never fail the run over the optional judge
                    scores = _error(f"{type(exc).__name__}: {exc}")
    if not module.check_mode:
        Path(p["result_file"]).write_text(json.dumps(scores, indent=2, sort_keys=True))
    module.exit_json(changed=False, scores=scores)


if __name__ == "__main__":
    main()
