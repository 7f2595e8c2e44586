"""Scoring of SRE diagnosis outputs: fault localisation by exact root-cause match.

A missing output scores as ``no_submission`` and an output that is not valid JSON or does
not match the diagnosis schema as ``malformed``; both are failures kept apart from wrong
answers, and neither raises.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema

from orchestrator.spec import load_schema


def _canonical(ground_truth: dict[str, Any]) -> dict[str, str]:
    """Map every accepted name (id and aliases, case-folded) to the entity's id."""
    names: dict[str, str] = {}
    for ent in ground_truth.get("entities", []):
        for name in [ent["id"], *ent.get("aliases", [])]:
            names[name.casefold()] = ent["id"]
    return names


def score_diagnosis(output_path: Path | None, ground_truth: dict[str, Any]) -> dict[str, Any]:
    """Score one diagnosis. Returns ``status`` (scored | no_submission | malformed) and metrics."""
    base: dict[str, Any] = {"fl_pass": 0.0, "fl_precision": 0.0, "fl_recall": 0.0}
    if output_path is None or not output_path.is_file():
        return {**base, "status": "no_submission", "reason": "the agent wrote no output file"}
    try:
        output = json.loads(output_path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        return {**base, "status": "malformed", "reason": f"output is not JSON: {exc}"}
    errors = sorted(jsonschema.Draft202012Validator(load_schema("diagnosis_output")).iter_errors(output),
                    key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        where = "/".join(map(str, errors[0].absolute_path)) or "$"
        return {**base, "status": "malformed", "reason": f"output does not match the schema at {where}: "
                                                          f"{errors[0].message}"}

    names = _canonical(ground_truth)
    truth = {e["id"] for e in ground_truth.get("entities", []) if e.get("rootCause")}
    claimed = {names.get(e["id"].casefold(), e["id"]) for e in output["entities"] if e.get("root_cause")}
    incident = ground_truth.get("incident", True)
    if not incident:
        # A healthy control: right only when nothing is blamed and no incident is asserted.
        says_none = not claimed and output.get("incident") is not True
        return {**base, "status": "scored", "fl_pass": float(says_none),
                "fl_precision": float(says_none), "fl_recall": float(says_none), "predicted": sorted(claimed)}
    hits = truth & claimed
    return {
        **base,
        "status": "scored",
        "fl_pass": float(bool(truth) and claimed == truth),
        "fl_precision": len(hits) / len(claimed) if claimed else 0.0,
        "fl_recall": len(hits) / len(truth) if truth else 0.0,
        "predicted": sorted(claimed),
    }
