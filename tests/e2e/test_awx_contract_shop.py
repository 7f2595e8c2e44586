"""The AWX contract on the shop (issue 24): shop-cart-down's exported workflow, run node by node as AWX runs it,
scored and recorded; the environment back at baseline. Helpers: awx_checks.py."""

from __future__ import annotations

import json
from pathlib import Path

from orchestrator import paths

from .awx_checks import ALL_NODES, assert_back_at_baseline, launch
from .awx_contract import Contract, record
from .conftest import run_cli


def test_shop_workflow_runs_as_awx_runs_it(awx_contract: Contract, awx_home: Path) -> None:
    wf = launch(awx_contract, awx_home, "shop-cart-down")
    assert wf.ran == ALL_NODES, [(j.identifier, j.status, j.failures) for j in wf.jobs]
    assert all(j.ok for j in wf.jobs), [(j.identifier, j.failures) for j in wf.jobs if not j.ok]
    evaluate = wf.job("evaluate")
    assert evaluate is not None
    scores = evaluate.artifacts["opsbench"]["evaluations"]["diagnosis"]
    assert scores["status"] == "scored" and scores["fl_pass"] == 1.0, scores
    assert_back_at_baseline(awx_home, wf)
    summary = record(wf, paths.SPECS_DIR / "shop-cart-down" / "scenario.yaml")
    assert summary["status"] == "completed"
    proc = run_cli(awx_home, "runs", "--json")
    assert proc.returncode == 0, proc.stderr
    assert summary["run_id"] in {r["id"] for r in json.loads(proc.stdout)}
