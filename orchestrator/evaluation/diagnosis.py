"""Scoring of SRE diagnosis outputs: fault localisation by exact root-cause match, and NTAM.

``fl_pass``/``fl_precision``/``fl_recall`` compare the claimed root causes with the true ones;
``ntam_fl``/``ntam_fpc`` (ITBench App. F, see ``orchestrator/evaluation/ntam.py``) give partial
credit by topology distance and need the environment's topology (``None`` without one).

A missing output scores as ``no_submission`` and an output that is not valid JSON or does
not match the diagnosis schema as ``malformed``; both are failures kept apart from wrong
answers, and neither raises.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jsonschema

from orchestrator.evaluation.ntam import NtamParams, NtamScorer, ground_truth_names
from orchestrator.spec import load_schema


def _canonical(ground_truth: dict[str, Any]) -> dict[str, str]:
    """Map every accepted name (id and aliases, case-folded) to the entity's id."""
    return ground_truth_names(ground_truth)


def score_diagnosis(output_path: Path | None, ground_truth: dict[str, Any],
                    topology: Mapping[str, Any] | None = None, ntam_params: NtamParams | None = None,
                    ) -> dict[str, Any]:
    """Score one diagnosis. Returns ``status`` (scored | no_submission | malformed) and metrics.

    Metrics: ``fl_pass``, ``fl_precision``, ``fl_recall`` and, given the environment's
    ``topology`` (``{"entities", "edges"}``), ``ntam_fl`` and ``ntam_fpc`` with ``ntam_params``
    (default ITBench Table 33). Without a topology a scored output has ``ntam_fl``/``ntam_fpc``
    ``None``; a missing or malformed output scores 0.0 on every metric.
    """
    base: dict[str, Any] = {"fl_pass": 0.0, "fl_precision": 0.0, "fl_recall": 0.0, "ntam_fl": 0.0, "ntam_fpc": 0.0}
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

    ntam_scores: dict[str, Any] = {"ntam_fl": None, "ntam_fpc": None}
    if topology is not None:
        scored = NtamScorer(ground_truth, topology, ntam_params).score(output)
        ntam_scores = {"ntam_fl": scored["ntam_fl"], "ntam_fpc": scored["ntam_fpc"]}
    names = _canonical(ground_truth)
    truth = {e["id"] for e in ground_truth.get("entities", []) if e.get("rootCause")}
    claimed = {names.get(e["id"].casefold(), e["id"]) for e in output["entities"] if e.get("root_cause")}
    incident = ground_truth.get("incident", True)
    if not incident:
        # A healthy control: right only when nothing is blamed and no incident is asserted.
        says_none = not claimed and output.get("incident") is not True
        return {**base, **ntam_scores, "status": "scored", "fl_pass": float(says_none),
                "fl_precision": float(says_none), "fl_recall": float(says_none), "predicted": sorted(claimed)}
    hits = truth & claimed
    return {
        **base,
        **ntam_scores,
        "status": "scored",
        "fl_pass": float(bool(truth) and claimed == truth),
        "fl_precision": len(hits) / len(claimed) if claimed else 0.0,
        "fl_recall": len(hits) / len(truth) if truth else 0.0,
        "predicted": sorted(claimed),
    }
