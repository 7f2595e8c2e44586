"""Results, leaderboard, breakdowns and exports over synthetic runs, checked against hand-computed values."""

from __future__ import annotations

import csv
import json
import math
import sqlite3
import statistics
import threading
from math import comb
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from synthetic_runs import AGENT_A, AGENT_B, LABEL_A, LABEL_B, Clock, populate, record

from orchestrator import paths, results, store
from orchestrator.cli import main

pytestmark = pytest.mark.usefixtures("home")  # a private OPSBENCH_HOME (conftest)



@pytest.fixture
def runs() -> list[str]:
    return populate()


def _row(rows: list[dict[str, Any]], **match: Any) -> dict[str, Any]:
    (row,) = [r for r in rows if all(r[k] == v for k, v in match.items())]
    return row


def _strict_json(text: str) -> Any:
    def reject(constant: str) -> None:
        raise AssertionError(f"not JSON: {constant}")
    return json.loads(text, parse_constant=reject)


# -- the store ---------------------------------------------------------------------------------
def test_metrics_are_written_when_the_run_ends(runs: list[str]) -> None:
    rows = {(m["evaluator"], m["metric"]): m for m in store.metrics_for(["r01"])}
    assert rows["diagnosis", "fl_pass"]["value"] == 1.0
    assert rows["diagnosis", "ntam_fpc"]["value"] == 0.8
    assert rows["diagnosis", "status"]["text"] == "scored"
    assert rows["agent", "elapsed"]["value"] == 30.0
    assert rows["agent", "status"]["text"] == "exited"
    assert ("diagnosis", "predicted") not in rows  # lists are not metrics
    assert store.metrics_for(["r10"]) == []  # never evaluated
    assert {m["text"] for m in store.metrics_for(["r04"]) if m["metric"] == "status"} == {"no_submission", "exited"}


def test_a_new_outcome_replaces_the_metrics(runs: list[str]) -> None:
    store.update_run("r01", outcome=json.dumps({"evaluations": {"diagnosis": {"fl_pass": 0.0}}}))
    assert [(m["evaluator"], m["metric"], m["value"]) for m in store.metrics_for(["r01"])] == [
        ("diagnosis", "fl_pass", 0.0)]
    store.update_run("r01", outcome="invalid")  # not a summary: left as it was
    assert len(store.metrics_for(["r01"])) == 1


@pytest.mark.parametrize(("command", "identity"), [
    ("python3 -m orchestrator.agents.probe", ("orchestrator.agents.probe", None)),
    ("/usr/bin/python3.11 -u -m my_agents.react --model llama-3.3-70b", ("my_agents.react", "llama-3.3-70b")),
    ("/opt/agents/llm-agent --model gpt-4o", ("llm-agent", "gpt-4o")),
    ("python agent.py --model=granite-3.1-8b", ("agent.py", "granite-3.1-8b")),
    ("./run.sh --verbose", ("run.sh", None)),
    ("", (None, None)),
    (None, (None, None)),
])
def test_agent_identity_from_the_command(command: str | None, identity: tuple[str | None, str | None]) -> None:
    assert store.agent_identity(command) == identity


def test_runs_carry_agent_identity_and_scenario_snapshot(runs: list[str]) -> None:
    run = store.get_run("r12")
    assert run is not None
    assert (run["agent"], run["agent_name"], run["model"]) == (AGENT_B, "llm-agent", "gpt-4o")
    assert json.loads(run["scenario_meta"])["complexity"] == "Easy"


def test_snapshot_is_taken_from_the_spec_path() -> None:
    spec = paths.SPECS_DIR / "loopweb-web-down" / "scenario.yaml"
    store.create_run({"id": "x", "scenario_id": "loopweb-web-down", "spec_version": 1, "spec_digest": "d",
                      "status": "running", "pid": 1, "run_dir": "/r/x", "agent": AGENT_A, "spec_path": str(spec)})
    run = store.get_run("x")
    assert run is not None
    meta = json.loads(run["scenario_meta"])
    assert (meta["domain"], meta["class"], meta["complexity"]) == ("SRE", "process-failure", "Easy")
    assert meta["observability"] == {"metrics": True, "traces": True, "logs": True}  # schema defaults
    assert store.scenario_snapshot("/nonexistent/scenario.yaml") is None


# -- migration ---------------------------------------------------------------------------------
OLD_DDL = """
CREATE TABLE runs (id TEXT PRIMARY KEY, scenario_id TEXT NOT NULL, spec_version INTEGER NOT NULL,
    spec_digest TEXT NOT NULL, status TEXT NOT NULL, outcome TEXT, pid INTEGER, run_dir TEXT NOT NULL,
    agent TEXT, created REAL NOT NULL, updated REAL NOT NULL);
CREATE TABLE phases (run_id TEXT NOT NULL REFERENCES runs(id), seq INTEGER NOT NULL, phase TEXT NOT NULL,
    status TEXT NOT NULL, started REAL NOT NULL, ended REAL, detail TEXT, PRIMARY KEY (run_id, seq));
CREATE INDEX runs_scenario ON runs(scenario_id);
PRAGMA user_version = 1;
"""


def _old_db() -> None:
    """A database as schema version 1 left it: two finished runs, one with a summary outcome."""
    summary = {"status": "completed", "agent": {"status": "exited", "elapsed": 12.5},
               "evaluations": {"diagnosis": {"status": "scored", "fl_pass": 1.0, "ntam_fl": 1.0, "ntam_fpc": 0.5}},
               "run_dir": "/gone"}
    conn = sqlite3.connect(store.db_path())
    conn.executescript(OLD_DDL)
    conn.execute("INSERT INTO runs VALUES ('old1','loopweb-web-down',1,'d','completed',?,1,'/gone',?,100.0,200.0)",
                 (json.dumps(summary), f"{AGENT_A} --model m1"))
    conn.execute("INSERT INTO runs VALUES ('old2','loopweb-web-down',1,'d','invalid','invalid',1,'/gone',NULL,"
                 "300.0,300.0)")
    conn.execute("INSERT INTO phases VALUES ('old1',1,'agent','exited',110.0,122.5,NULL)")
    conn.commit()
    conn.close()


def test_a_version_1_database_migrates() -> None:
    _old_db()
    run = store.get_run("old1")  # the first connection migrates
    assert run is not None
    assert (run["status"], run["created"], run["agent_name"], run["model"]) == (
        "completed", 100.0, "orchestrator.agents.probe", "m1")
    assert run["scenario_meta"] is None and [p["phase"] for p in run["phases"]] == ["agent"]
    with store.connect() as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == store.SCHEMA_VERSION == 4
    assert run["purpose"] == "agent"
    assert {(m["evaluator"], m["metric"]): m["value"] for m in store.metrics_for()}[("diagnosis", "fl_pass")] == 1.0
    trials = {t.run_id: t for t in results.load_trials()}
    assert trials["old1"].outcome == "correct" and trials["old2"].outcome == "excluded"
    assert trials["old1"].agent == "orchestrator.agents.probe (m1)" and trials["old2"].agent == "unknown"
    # No snapshot on old runs: the breakdown falls back to the spec as it is now.
    assert trials["old1"].meta["complexity"] == "Easy"
    store.create_run({"id": "new", "scenario_id": "s", "spec_version": 1, "spec_digest": "d", "status": "running",
                      "pid": 1, "run_dir": "/r", "agent": AGENT_B})
    assert [r["id"] for r in store.list_runs()] == ["new", "old2", "old1"]


def test_concurrent_first_connections_migrate_once() -> None:
    _old_db()
    errors: list[BaseException] = []

    def open_it() -> None:
        try:
            store.list_runs()
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=open_it) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(store.metrics_for(["old1"])) == 6  # 4 diagnosis + 2 agent rows, not duplicated


# -- results -----------------------------------------------------------------------------------
def test_runs_are_classified(runs: list[str]) -> None:
    outcomes = [t.outcome for t in results.load_trials()]
    assert outcomes == ["correct", "correct", "wrong", "no_submission", "correct", "malformed", "wrong", "wrong",
                        "wrong", "excluded", "excluded", "correct", "correct", "wrong", "no_submission"]


def test_verify_scenarios_runs_are_not_agent_runs(runs: list[str]) -> None:
    record("v1", AGENT_A, "s-easy", "verified", 0.0, Clock())
    assert "v1" not in {t.run_id for t in results.load_trials()}


def test_per_scenario_rows(runs: list[str]) -> None:
    rows = results.scenario_results(results.load_trials())
    assert [(r["agent"], r["scenario"]) for r in rows] == [
        (LABEL_B, "s-easy"), (LABEL_B, "s-med"), (LABEL_A, "s-easy"), (LABEL_A, "s-hard"), (LABEL_A, "s-med")]
    easy = _row(rows, agent=LABEL_A, scenario="s-easy")
    assert {k: easy[k] for k in ("n", "c", "wrong", "no_submission", "malformed", "excluded")} == {
        "n": 4, "c": 2, "wrong": 1, "no_submission": 1, "malformed": 0, "excluded": 0}
    assert easy["pass_at"] == pytest.approx({1: 0.5, 2: 5 / 6, 3: 1.0, 4: 1.0})
    assert easy["pass_rate_se"] == pytest.approx(statistics.stdev([1, 1, 0, 0]) / 2)
    assert easy["ntam_fl"] == pytest.approx((1 + 1 + 0.3 + 0) / 4)
    assert (easy["mttd"], easy["mttd_se"]) == pytest.approx((40.0, 10.0))  # correct trials: 30 s, 50 s
    assert easy["agent_time"] == pytest.approx((30 + 50 + 60 + 120) / 4)
    assert (easy["complexity"], easy["traces"], easy["name"]) == ("Easy", "traces on", "Easy one")
    hard = _row(rows, agent=LABEL_A, scenario="s-hard")
    assert (hard["n"], hard["c"], hard["excluded"], hard["mttd"]) == (2, 0, 2, None)
    med = _row(rows, agent=LABEL_A, scenario="s-med")
    assert (med["mttd"], med["mttd_se"]) == (40.0, None)  # one correct trial: no standard error


def test_pass_at_k_matches_the_closed_form(runs: list[str]) -> None:
    for row in results.scenario_results(results.load_trials()):
        n, c = row["n"], row["c"]
        assert sorted(row["pass_at"]) == list(range(1, n + 1))
        for k, value in row["pass_at"].items():
            assert value == pytest.approx(1 - comb(n - c, k) / comb(n, k)), (row["scenario"], k)


def test_leaderboard_pass_at_1(runs: list[str]) -> None:
    board = results.leaderboard(results.load_trials())
    assert [r["agent"] for r in board] == [LABEL_B, LABEL_A]  # best pass@1 first
    a = board[1]
    assert (a["agent_name"], a["model"], a["scenarios"], a["trials"], a["excluded"]) == (
        "orchestrator.agents.probe", None, 3, 9, 2)
    assert a["pass_at_k"] == pytest.approx((1 / 2 + 1 / 3 + 0) / 3)
    assert a["pass_at_k_se"] == pytest.approx(statistics.stdev([1] * 3 + [0] * 6) / 3)  # over the 9 trials
    assert (a["correct"], a["wrong"], a["no_submission"], a["malformed"]) == (3, 4, 1, 1)
    assert (a["no_submission_rate"], a["malformed_rate"]) == pytest.approx((1 / 9, 1 / 9))
    assert a["ntam_fl"] == pytest.approx(4.2 / 9)
    assert (a["mttd"], a["mttd_se"], a["mttd_n"]) == pytest.approx((40.0, 10 / math.sqrt(3), 3))
    b = board[0]
    assert (b["model"], b["pass_at_k"], b["no_submission_rate"], b["mttd"], b["mttd_se"]) == pytest.approx(
        ("gpt-4o", 0.5, 0.25, 15.0, 5.0))


def test_leaderboard_pass_at_k(runs: list[str]) -> None:
    trials = results.load_trials()
    a = _row(results.leaderboard(trials, k=2), agent=LABEL_A)
    per_scenario = [5 / 6, 2 / 3, 0.0]  # pass@2 of (4, 2), (3, 1), (2, 0)
    assert (a["pass_at_k"], a["pass_at_k_scenarios"]) == pytest.approx((statistics.mean(per_scenario), 3))
    assert a["pass_at_k_se"] == pytest.approx(statistics.stdev(per_scenario) / math.sqrt(3))
    k3 = {r["agent"]: r for r in results.leaderboard(trials, k=3)}
    assert (k3[LABEL_A]["pass_at_k"], k3[LABEL_A]["pass_at_k_scenarios"]) == (1.0, 2)  # only n >= 3 counts
    assert (k3[LABEL_B]["pass_at_k"], k3[LABEL_B]["pass_at_k_scenarios"]) == (None, 0)
    with pytest.raises(ValueError, match="k must be"):
        results.leaderboard(trials, k=0)


def test_breakdowns(runs: list[str]) -> None:
    trials = results.load_trials()
    levels = [r for r in results.breakdown(trials, "complexity") if r["agent"] == LABEL_A]
    assert [(r["group"], r["trials"]) for r in levels] == [("Easy", 4), ("Medium", 3), ("Hard", 2)]
    assert [r["pass_at_k"] for r in levels] == pytest.approx([0.5, 1 / 3, 0.0])
    traces = {r["group"]: r for r in results.breakdown(trials, "traces") if r["agent"] == LABEL_A}
    assert traces["traces on"]["pass_at_k"] == pytest.approx(0.25)  # s-easy 2/4, s-hard 0/2
    assert traces["traces on"]["pass_at_k_se"] == pytest.approx(statistics.stdev([1, 1, 0, 0, 0, 0]) / math.sqrt(6))
    assert traces["traces off"]["trials"] == 3
    assert {r["group"] for r in results.breakdown(trials, "class")} == {"process-failure", "network", "resource"}
    assert {r["group"] for r in results.breakdown(trials, "domain")} == {"SRE"}
    with pytest.raises(ValueError, match="unknown dimension"):
        results.breakdown(trials, "colour")


def test_unknown_scenario_metadata_groups_as_unknown() -> None:
    record("u1", AGENT_A, "not-a-scenario", "correct", 5.0, Clock(), meta={})
    (row,) = results.breakdown(results.load_trials(), "complexity")
    assert (row["group"], row["trials"]) == ("unknown", 1)


def test_mttd_uses_the_submission_time_when_recorded(tmp_path: Path) -> None:
    record("s1", AGENT_A, "s-easy", "correct", 30.0, Clock(), run_dir=tmp_path / "s1", write_output_after=12.0)
    assert {m["metric"]: m["value"] for m in store.metrics_for(["s1"]) if m["evaluator"] == "agent"}["submitted"] == 12
    (trial,) = results.load_trials()
    assert (trial.agent_elapsed, trial.time_to_diagnosis) == (30.0, 12.0)
    assert results.leaderboard([trial])[0]["mttd"] == 12.0


def test_filters(runs: list[str]) -> None:
    assert {t.agent for t in results.load_trials(agent=LABEL_B)} == {LABEL_B}
    for alias in ("llm-agent", "gpt-4o", AGENT_B):
        assert len(results.load_trials(agent=alias)) == 4
    assert len(results.load_trials(agent="orchestrator.agents.probe")) == 11
    assert {t.scenario for t in results.load_trials(scenario="s-med")} == {"s-med"}
    since = store.get_run("r12")["created"]  # type: ignore[index]
    assert [t.run_id for t in results.load_trials(since=since)] == ["r12", "r13", "r14", "r15"]


# -- the command line --------------------------------------------------------------------------
def test_leaderboard_command(runs: list[str], tmp_path: Path) -> None:
    out = CliRunner().invoke(main, ["leaderboard"])
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    assert lines[0].split()[:4] == ["AGENT", "SCENARIOS", "TRIALS", "PASS@1"]
    assert lines[1].startswith(LABEL_B) and "50.00 ± 28.87" in lines[1]
    assert lines[2].startswith(LABEL_A) and "27.78 ± 16.67" in lines[2] and "40.0 ± 5.8" in lines[2]

    out = CliRunner().invoke(main, ["leaderboard", "--k", "2", "--json", "--csv", str(tmp_path / "lb.csv")])
    assert out.exit_code == 0, out.output
    data = _strict_json(out.output)
    assert data["harness_runs_left_out"] == 0
    assert [(r["agent"], r["k"]) for r in data["agents"]] == [(LABEL_B, 2), (LABEL_A, 2)]
    with (tmp_path / "lb.csv").open() as fh:
        table = list(csv.DictReader(fh))
    assert [r["agent"] for r in table] == [LABEL_B, LABEL_A]
    assert float(table[1]["pass_at_k"]) == pytest.approx(0.5) and table[1]["model"] == ""


def test_results_command(runs: list[str], tmp_path: Path) -> None:
    out = CliRunner().invoke(main, ["results", "--json", "--csv", str(tmp_path / "res.csv")])
    assert out.exit_code == 0, out.output
    data = _strict_json(out.output)
    assert len(data["scenarios"]) == 5 and set(data["breakdowns"]) == set(results.DIMENSIONS)
    easy = _row(data["scenarios"], agent=LABEL_A, scenario="s-easy")
    assert easy["pass_at"] == pytest.approx({"1": 0.5, "2": 5 / 6, "3": 1.0, "4": 1.0})
    with (tmp_path / "res.csv").open() as fh:
        reader = csv.DictReader(fh)
        table = list(reader)
    assert reader.fieldnames is not None and reader.fieldnames[-4:] == ["pass@1", "pass@2", "pass@3", "pass@4"]
    b_easy = _row(table, agent=LABEL_B, scenario="s-easy")
    assert (b_easy["n"], b_easy["pass@2"], b_easy["pass@3"], b_easy["mttd_se"]) == ("2", "1.0", "", "5.0")

    out = CliRunner().invoke(main, ["results", "--agent", "gpt-4o", "--scenario", "s-med"])
    assert out.exit_code == 0, out.output
    assert "s-med" in out.output and "s-easy" not in out.output.split("\n\n")[0]
    out = CliRunner().invoke(main, ["results", "--since", "2100-01-01"])
    assert out.output.startswith("no runs match --since 2100-01-01") and " runs recorded;" in out.output


def test_commands_on_an_empty_store() -> None:
    assert CliRunner().invoke(main, ["leaderboard"]).output.strip() == "no runs recorded (see `opsbench run`)"
    out = CliRunner().invoke(main, ["leaderboard", "--json"])
    assert _strict_json(out.output) == {"agents": [], "harness_runs_left_out": 0}


def _mitigation_run(run_id: str, scores: dict[str, Any], extra: dict[str, Any] | None = None) -> None:
    store.create_run({"id": run_id, "scenario_id": "shop-cart-down-mitigate", "spec_version": 1,
                      "spec_digest": "d" * 16, "status": "running", "pid": 1, "run_dir": f"/nonexistent/{run_id}",
                      "agent": "python3 -m fixer"})
    store.update_run(run_id, status="completed", outcome=json.dumps({
        "evaluations": {"mitigation": scores, **(extra or {})},
        "agent": {"status": "exited", "exit_code": 0, "elapsed": 50.0}}))


def test_mitigation_only_scenarios_are_decided_by_mitigation_pass_with_mttr() -> None:
    _mitigation_run("m1", {"status": "scored", "mitigation_pass": 1.0, "mttr": 40.0},
                    {"process": {"calls": 4, "submitted": 1.0}})
    _mitigation_run("m2", {"status": "scored", "mitigation_pass": 1.0, "mttr": 60.0},
                    {"process": {"calls": 6, "submitted": 1.0}})
    _mitigation_run("m3", {"status": "scored", "mitigation_pass": 0.0, "mttr": None})
    _mitigation_run("m4", {"status": "malformed", "mitigation_pass": 0.0})
    trials = results.load_trials()
    assert [t.outcome for t in trials] == ["correct", "correct", "wrong", "malformed"]
    (row,) = results.leaderboard(trials)
    assert (row["correct"], row["wrong"], row["malformed"]) == (2, 1, 1)
    assert row["mttr"] == 50.0 and row["mttr_n"] == 2
    assert row["mttr_se"] == pytest.approx(statistics.stdev([40.0, 60.0]) / math.sqrt(2))
    assert row["calls"] == 5.0 and row["submitted"] == 1.0 and row["a_at_1"] is None
    assert "MTTR (s)" in results.render_leaderboard([row])
