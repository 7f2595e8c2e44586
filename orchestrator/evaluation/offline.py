"""Scoring one agent diagnosis offline, from files: the library behind ``opsbench score``.

Deterministic (same files, same score); the process metrics and the LLM judge are added only when asked for.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from orchestrator.errors import OpsBenchError, SpecInvalid
from orchestrator.evaluation.diagnosis import score_diagnosis
from orchestrator.role_topology import load_topology
from orchestrator.schemacheck import schema_problems
from orchestrator.yamlfile import read_yaml


def topology_for(gt_path: Path, topo_path: Path | None) -> dict[str, Any]:
    """The topology to score against: ``topo_path`` (a topology.yml or a run's environment.json), else the one of
    the environment of the scenario beside the ground truth."""
    topology: Any = None
    if topo_path is not None:
        try:
            loaded = read_yaml(topo_path)  # JSON is YAML: a run's environment.json reads the same way
        except SpecInvalid as exc:
            raise OpsBenchError(f"--topology: {exc.problems[0]}") from exc
        topology = loaded.get("topology", loaded) if isinstance(loaded, dict) else None
        if not isinstance(topology, dict) or "entities" not in topology:
            raise OpsBenchError(f"--topology: {topo_path} has no 'entities' (give a topology.yml or a run's "
                                "environment.json)")
    else:
        spec_file = gt_path.parent / "scenario.yaml"
        if spec_file.is_file():
            env = read_yaml(spec_file)["environment"]
            topology = load_topology(env["application"], env.get("backend", "local"))
    if not isinstance(topology, dict) or "entities" not in topology:
        raise OpsBenchError(f"no topology for {gt_path}: pass --topology (a topology.yml or a run's environment.json)")
    return topology


def score_files(gt_path: Path, output_path: Path, topo_path: Path | None = None, traj_path: Path | None = None,
                judge: bool = False) -> dict[str, Any]:
    """Every metric of the diagnosis in ``output_path`` against the ground truth in ``gt_path``; with a trajectory
    also the process metrics (under ``process``), with ``judge`` the LLM judge's verdict (under ``judge``)."""
    truth = read_yaml(gt_path)
    problems = schema_problems(gt_path, truth, "ground_truth")
    if problems:
        raise OpsBenchError("invalid ground truth: " + "; ".join(map(str, problems)))
    topology = topology_for(gt_path, topo_path)
    result = score_diagnosis(output_path, truth, topology)
    if unknown := unknown_fields(output_path):
        result["warnings"] = unknown
    if traj_path is not None:
        from orchestrator.evaluation.process import score_process
        result["process"] = score_process(traj_path, output_path, truth)
    if judge:
        from orchestrator.evaluation import judge as llm_judge
        try:
            config = llm_judge.judge_config_from_env()
        except ValueError as exc:
            raise OpsBenchError(f"LLM judge misconfigured: {exc}") from exc
        if config is None:
            raise OpsBenchError("--judge needs OPSBENCH_JUDGE_URL and OPSBENCH_JUDGE_MODEL (see docs/llm-judge.md)")
        try:
            output = json.loads(output_path.read_text())
        except (OSError, ValueError):
            output = None
        result["judge"] = llm_judge.judge_diagnosis(output, truth, config)
    return result


def unknown_fields(output_path: Path) -> list[str]:
    """Fields of the diagnosis in `output_path` that its schema does not define, so they scored nothing: one line
    each (`rootCause` where `root_cause` was meant). Empty when the file is absent or no JSON object."""
    from orchestrator import paths

    try:
        output = json.loads(output_path.read_text())
    except (OSError, ValueError, RecursionError):
        return []
    if not isinstance(output, dict):
        return []
    schema = json.loads((paths.SCHEMAS_DIR / "diagnosis_output.schema.json").read_text())
    known = schema["properties"]
    found = [f"unknown field '{k}' (not scored; the diagnosis output's fields are {', '.join(known)})"
             for k in output if k not in known]
    for key, prop in known.items():
        item_fields = prop.get("items", {}).get("properties") if prop.get("type") == "array" else None
        if item_fields and isinstance(output.get(key), list):
            for i, item in enumerate(output[key]):
                found += [f"unknown field '{key}[{i}].{k}' (not scored; an item's fields are {', '.join(item_fields)})"
                          for k in (item if isinstance(item, dict) else {}) if k not in item_fields]
    return found


def render_scores(result: dict[str, Any]) -> str:
    """One ``metric: value`` line per metric (``group.metric`` for nested ones), sorted."""
    lines = []
    for key in sorted(result):
        if isinstance(result[key], dict):
            for sub in sorted(result[key]):
                lines.append(f"{key}.{sub}: {result[key][sub]}")
        else:
            lines.append(f"{key}: {result[key]}")
    return "\n".join(lines)
