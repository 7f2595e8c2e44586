"""Deterministic scoring of agent outputs against ground truth, usable offline."""

from orchestrator.evaluation.diagnosis import score_diagnosis

__all__ = ["score_diagnosis"]
