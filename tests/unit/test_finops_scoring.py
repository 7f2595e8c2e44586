"""FinOps scorers on hand-made cases, each scenario's ground truth, the gateway's billing tools and the baseline
agent's reading of the prompts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from orchestrator import paths
from orchestrator.agents import finops as agent
from orchestrator.evaluation.finops import score_answer, score_detection, score_finops, score_ranking
from orchestrator.finops import insights
from orchestrator.finops.authoring import DEFINITIONS
from orchestrator.finops.truth import anomaly_items, dataset_spec, with_dataset
from orchestrator.gateway import Gateway, GatewayOptions, load_context
from orchestrator.spec import load_scenario

Q = {"id": "q", "keys": ["app"], "fields": ["cost", "day"], "ordered": True,
     "rows": [{"app": "a", "cost": 100.0, "day": "2024-09-03"}, {"app": "b", "cost": 50.0, "day": "2024-09-04"}]}


# -- answers -----------------------------------------------------------------------------------------------------

def test_exact_answer_passes() -> None:
    assert score_answer([dict(r) for r in Q["rows"]], Q) == {"pass": 1, "field_accuracy": 1.0, "reason": ""}


def test_numbers_within_the_stated_tolerance_pass_and_outside_fail() -> None:
    inside = [{"app": "a", "cost": 100.4, "day": "2024-09-03T00:00:00"},
              {"app": "b", "cost": "50.01", "day": "2024-09-04"}]
    assert score_answer(inside, Q)["pass"] == 1  # 0.4 <= 0.5 % of 100; 0.01 absolute; dates on 10 characters
    outside = [{"app": "a", "cost": 100.6, "day": "2024-09-03"}, {"app": "b", "cost": 50.0, "day": "2024-09-04"}]
    result = score_answer(outside, Q)
    assert result["pass"] == 0 and result["field_accuracy"] == 0.75 and "cost" in result["reason"]


def test_keys_are_exact_and_rows_complete_and_ordered() -> None:
    assert score_answer([{"app": "A", "cost": 100.0, "day": "2024-09-03"}, Q["rows"][1]], Q)["pass"] == 0
    assert score_answer([Q["rows"][0]], Q)["pass"] == 0  # a row missing
    extra = [*Q["rows"], {"app": "c", "cost": 1.0, "day": "2024-09-05"}]
    assert score_answer(extra, Q)["pass"] == 0
    swapped = [Q["rows"][1], Q["rows"][0]]
    assert score_answer(swapped, Q)["pass"] == 0
    assert score_answer(swapped, {**Q, "ordered": False})["pass"] == 1
    assert score_answer(None, Q)["pass"] == 0
    assert score_answer("a, b", Q)["pass"] == 0


def test_finops_output_statuses(tmp_path: Path) -> None:
    gt = {"finops": {"answers": [Q]}}
    assert score_finops(tmp_path / "missing.json", gt)["status"] == "no_submission"
    (tmp_path / "bad.json").write_text("{not json")
    assert score_finops(tmp_path / "bad.json", gt)["status"] == "malformed"
    (tmp_path / "wrong.json").write_text(json.dumps({"answers": {"q": Q["rows"]}, "anomalies": [{"start": "x"}]}))
    assert score_finops(tmp_path / "wrong.json", gt)["status"] == "malformed"  # an anomaly needs an entity
    (tmp_path / "ok.json").write_text(json.dumps({"answers": {"q": Q["rows"]},
                                                  "usage": {"input_tokens": 10, "output_tokens": 5}}))
    scores = score_finops(tmp_path / "ok.json", gt)
    assert scores["finops_pass"] == 1 and scores["pass_at_1"] == 1 and scores["tokens"] == 15


# -- anomalies ---------------------------------------------------------------------------------------------------

TRUTH = [
    {"start": "2024-09-03", "end": "2024-09-03", "importance": 0.2},
    {"start": "2024-09-10", "end": "2024-09-14", "importance": 1.0},
    {"start": "2024-09-20", "end": "2024-09-21", "importance": 0.5},
]


def test_detection_f1_on_days() -> None:
    days = [{"entity": "s", "start": d} for d in ("2024-09-03", "2024-09-10", "2024-09-11", "2024-09-12",
                                                  "2024-09-13", "2024-09-14", "2024-09-20", "2024-09-21")]
    assert score_detection(days, TRUTH)["f1"] == 1.0
    ranges = [{"entity": "s", "start": "2024-09-10", "end": "2024-09-14"}]
    half = score_detection(ranges, TRUTH)
    assert half["precision"] == 1.0 and half["recall"] == 0.625
    assert half["f1"] == pytest.approx(2 * 0.625 / 1.625, abs=1e-6)
    wrong = score_detection([{"entity": "s", "start": "2024-09-01"}], TRUTH)
    assert wrong["f1"] == 0.0 and wrong["precision"] == 0.0
    assert score_detection([], [])["f1"] == 1.0


def test_rank_score_counts_true_positives_in_their_true_relative_rank() -> None:
    perfect = [{"entity": "s", "start": "2024-09-10", "end": "2024-09-14", "importance": 1.0},
               {"entity": "s", "start": "2024-09-20", "end": "2024-09-21", "importance": 0.5},
               {"entity": "s", "start": "2024-09-03", "importance": 0.2}]
    r = score_ranking(perfect, TRUTH)
    assert (r["f1"], r["rank_score"], r["importance_accuracy"]) == (1.0, 1.0, 1.0)
    swapped = [perfect[1], perfect[0], perfect[2]]
    r = score_ranking(swapped, TRUTH)
    assert r["f1"] == 1.0 and r["rank_score"] == pytest.approx(1 / 3)
    # Two of three found, in the right relative order (a missed anomaly does not spoil the others' ranks),
    # plus a false positive.
    partial = [perfect[0], {"entity": "s", "start": "2024-09-25"}, perfect[2]]
    r = score_ranking(partial, TRUTH)
    assert r["matched"] == 2 and r["rank_score"] == 1.0
    assert r["event_precision"] == pytest.approx(2 / 3) and r["event_recall"] == pytest.approx(2 / 3)
    assert score_ranking([], TRUTH)["rank_score"] == 0.0
    # Overlap is enough to match an event; importance off by more than 0.05 is counted.
    loose = [{"entity": "s", "start": "2024-09-11", "end": "2024-09-12", "importance": 0.8}]
    r = score_ranking(loose, TRUTH)
    assert r["matched"] == 1 and r["importance_accuracy"] == 0.0


# -- each scenario's ground truth --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def scenario_data() -> Any:
    """The dataset of the FinOps scenarios (they share one): read-only connection and generator summary."""
    specs = {sid: load_scenario(paths.SPECS_DIR / sid / "scenario.yaml") for sid in DEFINITIONS}
    args = {json.dumps(s.environment["args"], sort_keys=True) for s in specs.values()}
    assert len(args) == 1, "the FinOps scenarios are expected to share one dataset"
    con, summary, tmp = with_dataset(dataset_spec(next(iter(specs.values())).environment["args"]))
    yield specs, con, summary
    con.close()
    tmp.cleanup()


@pytest.mark.parametrize("scenario_id", sorted(DEFINITIONS))
def test_ground_truth_is_what_the_reference_gives(scenario_id: str, scenario_data: Any) -> None:
    specs, con, summary = scenario_data
    scn = specs[scenario_id]
    gt = yaml.safe_load(scn.ground_truth_path.read_text())["finops"]
    assert gt["dataset"] == summary["spec"]
    task_ids = {t["id"] for t in scn.data["tasks"]}
    for question in gt.get("answers", []):
        assert question["id"] in task_ids
        assert question["rows"], "an empty reference answer tests nothing"
        got = insights.run(con, question["query"])
        assert len(got) == len(question["rows"])
        for mine, want in zip(got, question["rows"], strict=True):
            assert mine.keys() == want.keys()
            for k, v in want.items():
                assert mine[k] == (pytest.approx(v, abs=1e-6) if isinstance(v, float) else v), (k, mine, want)
        # The stored answer passes its own scorer, and a perturbed one does not.
        assert score_answer(question["rows"], question)["pass"] == 1
        if question["fields"]:
            f = next(f for f in question["fields"] if isinstance(question["rows"][0][f], float))
            bent = [dict(r) for r in question["rows"]]
            bent[0][f] = bent[0][f] * 1.1 + 1
            assert score_answer(bent, question)["pass"] == 0
    if "anomalies" in gt:
        spec = gt["anomalies"]
        assert spec["id"] in task_ids
        series = spec["series"]
        assert spec["items"] == anomaly_items(con, summary["anomalies"], series["service"], series["pricingUnit"],
                                              spec["window"]["start"], spec["window"]["end"])
        assert len(spec["items"]) >= 2
        importances = sorted(i["importance"] for i in spec["items"])
        assert importances[-1] == 1.0 and len(set(importances)) == len(importances)  # a well-defined ranking
        # The goal names the series the ground truth is about (but not the anomalies).
        goal = next(t["goal"] for t in scn.data["tasks"] if t["id"] == spec["id"])
        assert f"'{series['service']}'" in goal and f"'{series['pricingUnit']}'" in goal
        for item in spec["items"]:
            assert item["start"] not in goal


def test_scenario_goals_never_carry_the_answer(scenario_data: Any) -> None:
    specs, _, _ = scenario_data
    for sid, scn in specs.items():
        gt = yaml.safe_load(scn.ground_truth_path.read_text())["finops"]
        goals = " ".join(t["goal"] for t in scn.data["tasks"])
        for question in gt.get("answers", []):
            for row in question["rows"]:
                for field in question["fields"]:
                    assert str(row[field]) not in goals, (sid, field)


# -- the gateway's billing tools ---------------------------------------------------------------------------------

def _run_dir(tmp_path: Path, **env: Any) -> Path:
    run_dir = tmp_path / "run"
    (run_dir / "env").mkdir(parents=True)
    (run_dir / "environment.json").write_text(json.dumps({"application": "finops_data", "endpoints": {},
                                                          "topology": {"entities": [], "edges": []}, **env}))
    return run_dir


def test_gateway_serves_query_sql_only_where_billing_data_is_published(tmp_path: Path) -> None:
    from orchestrator.finops.generator import DatasetSpec, generate

    run_dir = _run_dir(tmp_path)
    generate(DatasetSpec(resources=40, months=1), database=run_dir / "env" / "billing.duckdb")
    plain = Gateway(load_context(run_dir, GatewayOptions()))
    assert "query_sql" not in {t.name for t in plain.tools}
    assert plain.call("query_sql", {"sql": "SELECT 1"}).error.code == "denied"  # type: ignore[union-attr]

    run_dir = _run_dir(tmp_path / "b", billing={"database": str(run_dir / "env" / "billing.duckdb"),
                                                "table": "billing"}, tool_families=["billing"])
    (run_dir / "env" / "billing.duckdb").write_bytes((tmp_path / "run" / "env" / "billing.duckdb").read_bytes())
    (run_dir / "environment.json").write_text(json.dumps({
        "application": "finops_data", "endpoints": {}, "topology": {"entities": [], "edges": []},
        "billing": {"database": str(run_dir / "env" / "billing.duckdb"), "table": "billing"},
        "tool_families": ["billing"]}))
    gw = Gateway(load_context(run_dir, GatewayOptions()))
    assert {t.name for t in gw.tools} == {"query_sql", "describe_billing_schema"}
    first = gw.call("query_sql", {"sql": "SELECT ResourceId FROM billing ORDER BY ResourceId, ChargePeriodStart",
                                  "limit": 3})
    assert first.ok and first.result["returned"] == 3 and first.next_page
    second = gw.call("query_sql", {"sql": "SELECT ResourceId FROM billing ORDER BY ResourceId, ChargePeriodStart",
                                   "limit": 3, "page": first.next_page})
    assert second.ok and second.result["offset"] == 3
    refused = gw.call("query_sql", {"sql": "DROP TABLE billing"})
    assert not refused.ok and refused.error is not None
    assert refused.error.code == "invalid" and refused.error.field == "sql"
    files = gw.call("query_sql", {"sql": "SELECT * FROM read_text('/etc/hostname')"})
    assert files.error is not None and files.error.code == "denied"
    schema = gw.call("describe_billing_schema", {})
    assert schema.ok and schema.result["rows"] > 0
    assert gw.call("get_alerts", {}).error.code == "denied"  # type: ignore[union-attr]
    records = [json.loads(line) for line in (run_dir / "gateway" / "trajectory.jsonl").read_text().splitlines()]
    assert [r["status"] for r in records] == ["ok", "ok", "invalid", "denied", "ok", "denied"]
    assert {r.get("family") for r in records[:5]} == {"billing"}
    gw.ctx.close()


def test_a_billing_database_outside_the_run_is_not_served(tmp_path: Path) -> None:
    run_dir = _run_dir(tmp_path, billing={"database": "/etc/hostname"})
    ctx = load_context(run_dir, GatewayOptions())
    assert ctx.billing_file is None


# -- the baseline agent's reading of goals -----------------------------------------------------------------------

def test_agent_understands_every_scenario_goal(scenario_data: Any) -> None:
    specs, _, _ = scenario_data
    expected = {"finops-anomaly-detection": "anomaly_detect", "finops-anomaly-ranking": "anomaly_rank"}
    for sid, scn in specs.items():
        kind = DEFINITIONS[sid][1]
        for task in scn.data["tasks"]:
            assert agent.classify(task["goal"]) == expected.get(sid, kind), sid


def test_agent_windows() -> None:
    assert agent.window("between 2024-09-01 and 2024-09-08") == ("2024-09-01", "2024-09-09")
    assert agent.window("during September 2024.") == ("2024-09-01", "2024-10-01")
    assert agent.window("during December 2024") == ("2024-12-01", "2025-01-01")
    assert agent.window("over all the data") is None
    assert agent.classify("what is the weather") is None
