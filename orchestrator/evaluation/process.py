"""Process metrics of one run from its trajectory (CUJBench §III-B, process metrics).

The trajectory is JSONL, one record per tool call (``orchestrator/schemas/
trajectory_record.schema.json``). With the ground truth's reference ``trajectory``
(mandatory tools M, acceptable tools A):

* ``submitted``: 1 when the agent's output was there at the end of its budget (a late output
  is set aside by the lifecycle), else 0 — averaged over runs this is CUJBench's SR;
* ``calls``: tool invocations; ``tool_coverage`` TC = |M and tools called| / |M|;
* ``extra_calls`` EC = calls to tools outside M + A + {submit};
* ``invalid_actions``: calls the gateway refused (status ``invalid`` or ``denied``);
* ``input_tokens``/``output_tokens``: the agent's own count, reported per model call in its
  trajectory records, or as a total in the output's ``usage``, or both (then the larger: both
  report the same spend, so adding them would count it twice); None when it reports none.
* a preset's model calls, as the recording model proxy counted them (``model-calls.jsonl``, one record per call;
  ``orchestrator/modelproxy``): ``model_calls`` (turns), ``input_tokens``/``output_tokens`` (these replace the
  agent's own count: the proxy saw every call), ``cached_tokens``, ``cost_usd`` (None when a call's model had no
  price) and ``model_seconds`` (time spent waiting on the model). None without that file. Calls the proxy refused
  because the run's model budget was spent (``budget.tokens``/``budget.costUsd``) are ``model_calls_refused`` and
  not turns, as the gateway records but does not count tool calls past ``budget.steps``; ``model_budget`` names the
  cap that was reached (``tokens`` or ``cost_usd``), else None.

Without a trajectory file the call-based metrics are None (not 0): nothing was recorded.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jsonschema

from orchestrator.schemacheck import load_schema

SUBMIT_TOOL = "submit"


def read_trajectory(path: Path | None) -> tuple[list[dict[str, Any]] | None, int]:
    """The trajectory's valid records (None when there is no file) and how many lines were not."""
    if path is None or not path.is_file():
        return None, 0
    validator = jsonschema.Draft202012Validator(load_schema("trajectory_record"))
    records: list[dict[str, Any]] = []
    bad = 0
    for line in path.read_text(errors="replace").splitlines():
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            bad += 1
            continue
        if validator.is_valid(record):
            records.append(record)
        else:
            bad += 1
    return records, bad


def _tokens(records: list[dict[str, Any]], usage: Mapping[str, Any], key: str) -> int | None:
    values: list[int] = [r[key] for r in records if isinstance(r.get(key), int)]
    per_call = sum(values) if values else None
    reported = usage.get(key)
    total = reported if isinstance(reported, int) else None
    if per_call is None or total is None:
        return per_call if total is None else total
    return max(per_call, total)


def model_usage(path: Path | None) -> dict[str, Any]:
    """The model proxy's counts of a run (``model-calls.jsonl``); every value None when there is no such file."""
    keys = ("model_calls", "cached_tokens", "cost_usd", "model_seconds", "model_calls_refused", "model_budget")
    if path is None or not path.is_file():
        return dict.fromkeys(keys)
    calls = []
    for line in path.read_text(errors="replace").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            calls.append(record)
    refused = [c for c in calls if c.get("status") == "refused"]
    calls = [c for c in calls if c.get("status") != "refused"]

    def total(key: str) -> int:
        return sum(int(c[key]) for c in calls if isinstance(c.get(key), int) and not isinstance(c.get(key), bool))

    costs = [c.get("cost_usd") for c in calls]
    priced = all(isinstance(c, int | float) and not isinstance(c, bool) for c in costs)
    return {"model_calls": len(calls), "input_tokens": total("input_tokens"), "output_tokens": total("output_tokens"),
            "cached_tokens": total("cached_tokens"),
            "cost_usd": round(sum(float(c) for c in costs if isinstance(c, int | float)), 8) if priced else None,
            "model_seconds": round(sum(float(c["latency"]) for c in calls
                                       if isinstance(c.get("latency"), int | float)), 3),
            "model_calls_refused": len(refused),
            "model_budget": next((str(c["budget"]) for c in refused if isinstance(c.get("budget"), str)), None)}


def score_process(trajectory_path: Path | None, output_path: Path | None,
                  ground_truth: Mapping[str, Any], reported_path: Path | None = None,
                  model_calls_path: Path | None = None) -> dict[str, Any]:
    """Process metrics of one run (see the module docstring). ``reported_path``: the agent's own
    trajectory when the gateway logged the calls; only its token counts are used. ``model_calls_path``: the model
    proxy's record of a preset's calls."""
    records, bad = read_trajectory(trajectory_path)
    reported, _ = read_trajectory(reported_path)
    output: dict[str, Any] = {}
    submitted = output_path is not None and output_path.is_file()
    if submitted and output_path is not None:
        try:
            loaded = json.loads(output_path.read_text())
            output = loaded if isinstance(loaded, dict) else {}
        except (OSError, ValueError):
            output = {}
    usage = output.get("usage") if isinstance(output.get("usage"), dict) else {}
    reference = ground_truth.get("trajectory") or {}
    mandatory = set(reference.get("mandatoryTools") or [])
    allowed = mandatory | set(reference.get("acceptableTools") or []) | {SUBMIT_TOOL}
    result: dict[str, Any] = {
        "submitted": float(submitted),
        "trajectory": "absent" if records is None else "recorded",
        "calls": None, "tool_coverage": None, "extra_calls": None, "invalid_actions": None,
        "trajectory_bad_lines": bad,
        "input_tokens": _tokens((records or []) + (reported or []), usage or {}, "input_tokens"),
        "output_tokens": _tokens((records or []) + (reported or []), usage or {}, "output_tokens"),
    }
    usage_counted = model_usage(model_calls_path)
    result.update({k: v for k, v in usage_counted.items() if v is not None or k not in result})
    if records is None:
        return result
    tools = [str(r["tool"]) for r in records]
    result["calls"] = len(tools)
    result["invalid_actions"] = sum(1 for r in records if r.get("status") in ("invalid", "denied"))
    if mandatory:
        result["tool_coverage"] = len(mandatory & set(tools)) / len(mandatory)
    if reference:
        result["extra_calls"] = sum(1 for t in tools if t not in allowed)
    return result
