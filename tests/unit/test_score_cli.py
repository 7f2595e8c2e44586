"""`opsbench score`: offline, deterministic scoring of one agent output."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from orchestrator import paths
from orchestrator.cli import main

GT = paths.SPECS_DIR / "shop-cart-down" / "ground_truth.yaml"


def score(tmp_path: Path, output: object | None, *extra: str) -> tuple[int, dict[str, object]]:
    out = tmp_path / "output.json"
    if output is not None:
        out.write_text(output if isinstance(output, str) else json.dumps(output))
    res = CliRunner().invoke(main, ["score", "--ground-truth", str(GT), "--output", str(out), "--json", *extra])
    return res.exit_code, json.loads(res.output) if res.exit_code == 0 else {"error": res.output}


def test_exact_answer_scores_one_on_every_metric(tmp_path: Path) -> None:
    truth = {"entities": [{"id": "cart-1", "root_cause": True}, {"id": "frontend"}, {"id": "gateway"}],
             "propagations": [{"source": "cart-1", "target": "frontend"}, {"source": "frontend", "target": "gateway"}]}
    code, r = score(tmp_path, truth)
    assert code == 0 and r["status"] == "scored"
    assert (r["fl_pass"], r["ntam_fl"], r["ntam_fpc"]) == (1.0, 1.0, 1.0)


def test_same_input_same_score_and_wrong_answer_scores_lower(tmp_path: Path) -> None:
    wrong = {"entities": [{"id": "payment", "root_cause": True}]}
    first, second = score(tmp_path, wrong)[1], score(tmp_path, wrong)[1]
    assert first == second
    assert first["fl_pass"] == 0.0 and 0.0 <= float(str(first["ntam_fl"])) < 1.0


def test_missing_and_malformed_outputs_are_statuses_not_crashes(tmp_path: Path) -> None:
    assert score(tmp_path, None)[1]["status"] == "no_submission"
    assert score(tmp_path, "{not json")[1]["status"] == "malformed"


def test_topology_from_a_file(tmp_path: Path) -> None:
    topo = paths.ROLES_DIR / "env_shop" / "files" / "topology.yml"
    code, r = score(tmp_path, {"entities": [{"id": "cart", "root_cause": True}]}, "--topology", str(topo))
    assert code == 0 and r["fl_pass"] == 1.0
