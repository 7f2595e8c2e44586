"""Deterministic scoring of agent outputs against ground truth, usable offline.

* :func:`score_diagnosis`: an SRE diagnosis (fl_pass/precision/recall, NTAM, CUJBench outcome metrics);
* :func:`score_mitigation`, :func:`run_state_checks`: an SRE mitigation by the environment's state, MTTR;
* :func:`score_process`: process metrics from a run's trajectory;
* :func:`load_output`: read and validate any task kind's output (no_submission / malformed);
* :func:`ntam`, :class:`NtamScorer`, :class:`NtamParams`: ITBench's Normalized Topology-Aware
  Match for fault localisation and fault propagation chains (App. F);
* :func:`pass_at_k`, :func:`mean_pass_at_k`, :func:`mean_stderr`: aggregate statistics;
* ``orchestrator.evaluation.judge``: the optional LLM judge (off by default).

See docs/evaluation.md.
"""

from orchestrator.evaluation.cuj import cuj_metrics, evidence_recall
from orchestrator.evaluation.diagnosis import score_diagnosis
from orchestrator.evaluation.mitigation import run_state_checks, score_mitigation
from orchestrator.evaluation.ntam import NtamParams, NtamScorer, TopologyGraph, ntam
from orchestrator.evaluation.outputs import SCHEMAS, load_output
from orchestrator.evaluation.process import score_process
from orchestrator.evaluation.stats import mean_pass_at_k, mean_stderr, pass_at_k

__all__ = [
    "SCHEMAS",
    "NtamParams",
    "NtamScorer",
    "TopologyGraph",
    "cuj_metrics",
    "evidence_recall",
    "load_output",
    "mean_pass_at_k",
    "mean_stderr",
    "ntam",
    "pass_at_k",
    "run_state_checks",
    "score_diagnosis",
    "score_mitigation",
    "score_process",
]
