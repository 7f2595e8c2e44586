"""Process metrics from a run's trajectory (CUJBench: SR, TC, calls, EC; plus invalid actions, tokens)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from orchestrator.evaluation.process import score_process

GT: dict[str, Any] = {"trajectory": {"mandatoryTools": ["alerts", "promql", "logs"], "acceptableTools": ["topology"]}}


def write(tmp_path: Path, records: list[Any], output: Any = None) -> tuple[Path, Path]:
    traj, out = tmp_path / "trajectory.jsonl", tmp_path / "output.json"
    traj.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records))
    if output is not None:
        out.write_text(json.dumps(output))
    return traj, out


def test_counts_coverage_extra_and_invalid_calls(tmp_path: Path) -> None:
    traj, out = write(tmp_path, [
        {"tool": "alerts"}, {"tool": "promql", "status": "ok"}, {"tool": "promql", "status": "error"},
        {"tool": "traces"}, {"tool": "restart", "status": "denied"}, {"tool": "bogus", "status": "invalid"},
        {"tool": "submit"},
    ], {"entities": []})
    m = score_process(traj, out, GT)
    assert m["submitted"] == 1.0 and m["trajectory"] == "recorded"
    assert m["calls"] == 7
    assert m["tool_coverage"] == pytest.approx(2 / 3)  # logs never called
    assert m["extra_calls"] == 3  # traces, restart, bogus (submit and topology are allowed)
    assert m["invalid_actions"] == 2


def test_tokens_are_the_records_sum_or_the_reported_total_never_both_added(tmp_path: Path) -> None:
    traj, out = write(tmp_path, [{"tool": "alerts", "input_tokens": 100, "output_tokens": 10},
                                 {"tool": "logs", "input_tokens": 50}],
                      {"entities": [], "usage": {"input_tokens": 1000, "output_tokens": 5}})
    m = score_process(traj, out, GT)
    # input: records 150 vs total 1000; output: records 10 vs total 5 (a total that undercounts)
    assert (m["input_tokens"], m["output_tokens"]) == (1000, 10)


def test_no_trajectory_means_unknown_not_zero(tmp_path: Path) -> None:
    m = score_process(tmp_path / "none.jsonl", tmp_path / "none.json", GT)
    assert m["submitted"] == 0.0 and m["trajectory"] == "absent"
    assert m["calls"] is m["tool_coverage"] is m["extra_calls"] is m["input_tokens"] is None


def test_bad_lines_are_counted_and_skipped(tmp_path: Path) -> None:
    traj, out = write(tmp_path, ["{not json", json.dumps({"args": {}}), {"tool": "alerts"}], {"entities": []})
    m = score_process(traj, out, GT)
    assert m["calls"] == 1 and m["trajectory_bad_lines"] == 2


def test_without_a_reference_trajectory_coverage_and_extra_calls_are_undefined(tmp_path: Path) -> None:
    traj, out = write(tmp_path, [{"tool": "alerts"}], {"entities": []})
    m = score_process(traj, out, {})
    assert m["calls"] == 1 and m["tool_coverage"] is None and m["extra_calls"] is None


def test_the_agents_own_records_add_tokens_but_not_calls(tmp_path: Path) -> None:
    traj, out = write(tmp_path, [{"tool": "alerts"}], {"entities": []})
    reported = tmp_path / "agent-trajectory.jsonl"
    reported.write_text(json.dumps({"tool": "llm", "input_tokens": 500, "output_tokens": 40}) + "\n")
    m = score_process(traj, out, GT, reported)
    assert m["calls"] == 1 and (m["input_tokens"], m["output_tokens"]) == (500, 40)
