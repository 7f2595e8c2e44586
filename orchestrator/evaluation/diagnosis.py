"""Scoring of SRE diagnosis outputs: fault localisation by exact root-cause match, and NTAM.

``fl_pass``/``fl_precision``/``fl_recall`` compare the claimed root causes with the true ones;
``ntam_fl``/``ntam_fpc`` (ITBench App. F, see ``orchestrator/evaluation/ntam.py``) give partial
credit by topology distance and need the environment's topology (``None`` without one).

A missing output scores as ``no_submission`` and an output that is not valid JSON or does
not match the diagnosis schema as ``malformed``; both are failures kept apart from wrong
answers, and neither raises.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from orchestrator.evaluation.cuj import PCW_WEIGHTS, cuj_metrics
from orchestrator.evaluation.ntam import NtamParams, NtamScorer, ground_truth_names
from orchestrator.evaluation.outputs import load_output


def _canonical(ground_truth: dict[str, Any]) -> dict[str, str]:
    """Map every accepted name (id and aliases, case-folded) to the entity's id."""
    return ground_truth_names(ground_truth)


def score_diagnosis(output_path: Path | None, ground_truth: dict[str, Any],
                    topology: Mapping[str, Any] | None = None, ntam_params: NtamParams | None = None,
                    pcw_weights: tuple[float, float, float] = PCW_WEIGHTS,
                    distractors: Iterable[str] = ()) -> dict[str, Any]:
    """Score one diagnosis. Returns ``status`` (scored | no_submission | malformed) and metrics.

    Metrics: ``fl_pass``, ``fl_precision``, ``fl_recall`` and, given the environment's
    ``topology`` (``{"entities", "edges"}``), ``ntam_fl`` and ``ntam_fpc`` with ``ntam_params``
    (default ITBench Table 33). Without a topology a scored output has ``ntam_fl``/``ntam_fpc``
    ``None``; a missing or malformed output scores 0.0 on these. A scored output also gets the
    CUJBench outcome metrics (``a_at_1``, ``component_match``, ``layer_match``, ``type_match``,
    ``pce``, ``pcw``, ``evidence_recall``; see ``cuj.py``) and ``alerts_explained_recall``, which
    are None where the ground truth lacks the field, and for missing or malformed outputs
    (CUJBench computes them over submitted runs only).

    ``distractors``: the targets of the scenario's distractors (benign changes at incident time, spec
    ``faults[].distractor``). A scored output then also gets ``blamed_distractors`` (those it names as a root
    cause, ground-truth ids) and ``distractor_blamed`` (1.0 when it names any, else 0.0; None for a scenario
    without distractors). ``false_positives`` counts the entities blamed that are not root causes (on a healthy
    control: every entity blamed).
    """
    base: dict[str, Any] = {"fl_pass": 0.0, "fl_precision": 0.0, "fl_recall": 0.0, "ntam_fl": 0.0, "ntam_fpc": 0.0}
    loaded = load_output(output_path, "diagnose")
    if loaded.output is None:
        return {**base, "status": loaded.status, "reason": loaded.reason}
    output = loaded.output

    ntam_scores: dict[str, Any] = {"ntam_fl": None, "ntam_fpc": None}
    if topology is not None:
        scored = NtamScorer(ground_truth, topology, ntam_params).score(output)
        ntam_scores = {"ntam_fl": scored["ntam_fl"], "ntam_fpc": scored["ntam_fpc"]}
    names = _canonical(ground_truth)
    ntam_scores.update(cuj_metrics(output, ground_truth, names, pcw_weights))
    true_alerts = {a["name"].casefold() for a in ground_truth.get("alerts") or []}
    explained = {str(a).casefold() for a in output.get("alerts_explained") or []}
    ntam_scores["alerts_explained_recall"] = (len(true_alerts & explained) / len(true_alerts)
                                              if true_alerts else None)
    truth = {e["id"] for e in ground_truth.get("entities", []) if e.get("rootCause")}
    claimed = {names.get(e["id"].casefold(), e["id"]) for e in output["entities"] if e.get("root_cause")}
    incident = ground_truth.get("incident", True)
    benign = {names.get(str(d).casefold(), str(d)) for d in distractors}
    blamed = sorted(claimed & benign)
    ntam_scores["blamed_distractors"] = blamed
    ntam_scores["distractor_blamed"] = float(bool(blamed)) if benign else None
    ntam_scores["false_positives"] = len(claimed - truth) if incident else len(claimed)
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
