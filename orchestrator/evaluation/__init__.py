"""Deterministic scoring of agent outputs against ground truth, usable offline.

* :func:`score_diagnosis`: score an agent's diagnosis file (fl_pass/precision/recall, NTAM);
* :func:`ntam`, :class:`NtamScorer`, :class:`NtamParams`: ITBench's Normalized Topology-Aware
  Match for fault localisation and fault propagation chains (App. F);
* :func:`pass_at_k`, :func:`mean_pass_at_k`, :func:`mean_stderr`: aggregate statistics.

See docs/evaluation.md.
"""

from orchestrator.evaluation.diagnosis import score_diagnosis
from orchestrator.evaluation.ntam import NtamParams, NtamScorer, TopologyGraph, ntam
from orchestrator.evaluation.stats import mean_pass_at_k, mean_stderr, pass_at_k

__all__ = [
    "NtamParams",
    "NtamScorer",
    "TopologyGraph",
    "mean_pass_at_k",
    "mean_stderr",
    "ntam",
    "pass_at_k",
    "score_diagnosis",
]
