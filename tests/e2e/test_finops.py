"""FinOps end to end: one data-insight and one anomaly scenario run by `opsbench run` with the baseline FinOps agent
(the default agent of FinOps scenarios): deploy generates the billing data, the agent queries it through the
gateway's query_sql, the evaluator scores it, teardown removes it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from orchestrator import paths

from .conftest import run_json

pytestmark = pytest.mark.e2e


def _run(home: Path, scenario: str) -> dict[str, Any]:
    # The agent imports this checkout's orchestrator (not whatever the venv has installed).
    rc, out = run_json(home, "run", scenario, timeout=300, PYTHONPATH=str(paths.PROJECT_ROOT))
    assert rc == 0 and out["status"] == "completed", out
    assert out["cleanup"] == "done" and out["agent"]["status"] == "exited", out
    run_dir = Path(out["run_dir"])
    assert not (run_dir / "env").exists() and not (run_dir / "environment.json").exists()
    records = [json.loads(line) for line in (run_dir / "artifacts" / "trajectory.jsonl").read_text().splitlines()]
    assert records and all(r["tool"] == "query_sql" and r["status"] == "ok" for r in records)
    assert out["evaluations"]["process"]["tool_coverage"] == 1.0
    return out


def test_insight_and_anomaly_scenarios_with_the_baseline_agent(home: Path) -> None:
    insight = _run(home, "finops-top-applications")["evaluations"]["finops"]
    assert insight["status"] == "scored" and insight["pass_at_1"] == 1 and insight["finops_pass"] == 1, insight

    ranking = _run(home, "finops-anomaly-ranking")
    scores = ranking["evaluations"]["finops"]
    assert scores["status"] == "scored" and scores["f1"] == 1.0 and scores["rank_score"] == 1.0, scores
    # Nothing of the ground truth reached the agent: its manifest holds no anomaly date.
    manifest = (Path(ranking["run_dir"]) / "agent" / "manifest.json").read_text()
    gt = yaml.safe_load((paths.SPECS_DIR / "finops-anomaly-ranking" / "ground_truth.yaml").read_text())
    assert not any(item["start"] in manifest for item in gt["finops"]["anomalies"]["items"])
