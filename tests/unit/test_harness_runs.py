"""The harness's own runs (``opsbench bench``'s no-op agent, ``verify-scenarios``) are tagged with their purpose
and left out of results, the leaderboard and the report unless ``--include-harness``; store v3 migrates."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from click.testing import CliRunner
from synthetic_runs import LABEL_A, LABEL_B, NOOP, populate, populate_harness

from orchestrator import report, results, store
from orchestrator.catalog import find_scenario
from orchestrator.cli import main
from orchestrator.lifecycle import Run
from orchestrator.progress import Progress
from orchestrator.runner import StepResult
from orchestrator.trials import trial_on

pytestmark = pytest.mark.usefixtures("home")  # a private OPSBENCH_HOME (conftest)

NOTE = "12 harness runs left out; --include-harness to show them"
BENCH_LABEL = f"{NOOP} [bench]"



@pytest.fixture
def runs() -> list[str]:
    """The synthetic agent runs (two agents, 15 runs) plus what bench and verify-scenarios leave behind."""
    populate()
    return populate_harness()


# -- the library ---------------------------------------------------------------------------------
def test_harness_runs_are_left_out_and_counted(runs: list[str]) -> None:
    loaded = results.load()
    assert {t.agent for t in loaded.trials} == {LABEL_A, LABEL_B}
    assert len(loaded.trials) == 15 and loaded.harness_left_out == 12
    assert loaded.left_out_note() == NOTE
    assert results.load_trials() == loaded.trials


def test_include_harness_shows_the_bench_trials_as_such(runs: list[str]) -> None:
    loaded = results.load(include_harness=True)
    bench = [t for t in loaded.trials if t.purpose == "bench"]
    assert loaded.harness_left_out == 0 and loaded.left_out_note() == ""
    assert sorted(t.run_id for t in bench) == runs  # the host and the verify run are no agent runs at all
    assert {t.agent for t in bench} == {BENCH_LABEL} and {t.outcome for t in bench} == {"no_submission"}
    (row,) = [r for r in results.leaderboard(loaded.trials) if r["agent"] == BENCH_LABEL]
    assert (row["trials"], row["pass_at_k"], row["no_submission_rate"]) == (12, 0.0, 1.0)


def test_filters_apply_before_counting(runs: list[str]) -> None:
    assert results.load(agent=LABEL_B).harness_left_out == 0
    only_noop = results.load(agent=NOOP)
    assert only_noop.trials == [] and only_noop.harness_left_out == 12
    assert results.load(scenario="s-easy").harness_left_out == 4  # b00, b03, b06, b09
    assert len(results.load(agent=NOOP, scenario="s-easy", include_harness=True).trials) == 4


# -- the commands --------------------------------------------------------------------------------
def test_results_command(runs: list[str]) -> None:
    out = CliRunner().invoke(main, ["results"])
    assert out.exit_code == 0, out.output
    assert out.output.splitlines()[-1] == NOTE and NOOP not in out.output.replace(NOTE, "")
    data = json.loads(CliRunner().invoke(main, ["results", "--json"]).output)
    assert data["harness_runs_left_out"] == 12 and {r["agent"] for r in data["scenarios"]} == {LABEL_A, LABEL_B}

    out = CliRunner().invoke(main, ["results", "--include-harness"])
    assert out.exit_code == 0 and NOTE not in out.output and BENCH_LABEL in out.output
    data = json.loads(CliRunner().invoke(main, ["results", "--json", "--include-harness"]).output)
    assert data["harness_runs_left_out"] == 0
    assert {r["agent"] for r in data["scenarios"]} == {LABEL_A, LABEL_B, BENCH_LABEL}


def test_only_harness_runs_recorded(runs: list[str]) -> None:
    out = CliRunner().invoke(main, ["results", "--agent", NOOP])
    lines = out.output.splitlines()
    assert lines[0].startswith(f"no runs match --agent {NOOP} (") and " runs recorded;" in lines[0]
    assert lines[1:] == [NOTE]


def test_leaderboard_command(runs: list[str]) -> None:
    out = CliRunner().invoke(main, ["leaderboard"])
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    assert lines[-1] == NOTE and [line.split()[0] for line in lines[1:-1]] == [LABEL_B.split()[0], LABEL_A]
    data = json.loads(CliRunner().invoke(main, ["leaderboard", "--json"]).output)
    assert data["harness_runs_left_out"] == 12 and [r["agent"] for r in data["agents"]] == [LABEL_B, LABEL_A]

    out = CliRunner().invoke(main, ["leaderboard", "--include-harness"])
    assert NOTE not in out.output and out.output.splitlines()[-1].startswith(BENCH_LABEL)  # 0 %: last
    data = json.loads(CliRunner().invoke(main, ["leaderboard", "--json", "--include-harness"]).output)
    assert data["harness_runs_left_out"] == 0 and data["agents"][-1]["agent"] == BENCH_LABEL


def test_report_command(runs: list[str], tmp_path: Path) -> None:
    out_file = tmp_path / "r.html"
    out = CliRunner().invoke(main, ["report", "--out", str(out_file)])
    assert out.exit_code == 0, out.output
    assert out.output.splitlines() == [f"wrote {out_file} (15 run(s))", NOTE]
    html = out_file.read_text()
    assert BENCH_LABEL not in html and 'id="harness-left-out">12 harness run(s)' in html

    out = CliRunner().invoke(main, ["report", "--out", str(out_file), "--include-harness"])
    assert out.output.splitlines() == [f"wrote {out_file} (27 run(s))"]
    html = out_file.read_text()
    assert BENCH_LABEL in html and "harness-left-out" not in html
    assert report.render(results.load_trials()).count(BENCH_LABEL) == 0


def test_runs_and_show_display_the_purpose(runs: list[str]) -> None:
    out = CliRunner().invoke(main, ["runs", "--limit", "100"])
    assert out.exit_code == 0, out.output
    rows = {line.split()[0]: line.split() for line in out.output.splitlines()[1:]}
    assert out.output.splitlines()[0].split()[3] == "PURPOSE"
    assert (rows["b00"][3], rows["bhost"][3], rows["venv"][3], rows["r01"][3]) == ("bench", "bench", "verify", "agent")
    out = CliRunner().invoke(main, ["show", "b00"])
    assert out.exit_code == 0 and "purpose bench" in out.output.splitlines()[0]
    assert json.loads(CliRunner().invoke(main, ["show", "r01", "--json"]).output)["purpose"] == "agent"


def test_an_unknown_purpose_is_refused() -> None:
    with pytest.raises(ValueError, match="run purpose 'demo'"):
        store.create_run({"id": "x", "scenario_id": "s", "spec_version": 1, "spec_digest": "d", "status": "running",
                          "pid": 1, "run_dir": "/r/x", "agent": NOOP, "purpose": "demo"})
    assert store.get_run("x") is None


# -- migration from schema version 2 -------------------------------------------------------------
def _v2_db(home: Path) -> None:
    """A database as schema version 2 left it, beside the campaign records `opsbench bench` and a user wrote."""
    home.mkdir(parents=True)
    conn = sqlite3.connect(store.db_path())
    for ddl in (store.DDL_V1, store.DDL_V2):
        conn.executescript(ddl)
    conn.execute("PRAGMA user_version = 2")
    rows = [("a1", "completed", "python3 -m my_agent"), ("v1", "verified", "python3 -m orchestrator.agents.heuristic"),
            ("bt1", "completed", NOOP), ("bh1", "hosted", "python3 -m orchestrator.agents.heuristic"),
            ("u1", "completed", NOOP)]
    for i, (run_id, status, agent) in enumerate(rows):
        conn.execute("INSERT INTO runs (id, scenario_id, spec_version, spec_digest, status, run_dir, agent, "
                     "created, updated) VALUES (?, 's-easy', 1, 'd', ?, '/gone', ?, ?, ?)",
                     (run_id, status, agent, 100.0 + i, 100.0 + i))
    conn.commit()
    conn.close()
    bench = home / "campaigns" / "bench-20260101-120000-abcdef-k1"
    bench.mkdir(parents=True)
    (bench / "trials.jsonl").write_text(
        json.dumps({"scenario": "s-easy", "agent": NOOP, "trial": 1, "run_id": "bt1", "host": "bh1"}) + "\n"
        + '{"scenario": "s-easy", "agent": "tr')  # a line cut short
    mine = home / "campaigns" / "bench-marks"  # a user's campaign that happens to be named bench-*: agent runs
    mine.mkdir()
    (mine / "trials.jsonl").write_text(json.dumps({"agent": "python3 -m my_agent", "run_id": "a1", "host": ""}))


def test_a_version_2_database_migrates(home: Path) -> None:
    _v2_db(home)
    purposes = {r["id"]: r["purpose"] for r in store.list_runs()}  # the first connection migrates
    assert purposes == {"a1": "agent", "u1": "agent", "v1": "verify", "bt1": "bench", "bh1": "bench"}
    with store.connect() as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == store.SCHEMA_VERSION == 4
    assert [t.run_id for t in results.load_trials()] == ["a1", "u1"]  # u1: `true` run by hand is an agent run
    store.create_run({"id": "new", "scenario_id": "s", "spec_version": 1, "spec_digest": "d", "status": "running",
                      "pid": 1, "run_dir": "/r", "agent": NOOP})
    assert store.get_run("new")["purpose"] == "agent"  # type: ignore[index]


def test_a_version_2_database_without_campaigns_defaults_to_agent(home: Path) -> None:
    _v2_db(home)
    for trials in (home / "campaigns").glob("*/trials.jsonl"):
        trials.unlink()
    purposes = {r["id"]: r["purpose"] for r in store.list_runs()}
    assert purposes == {"a1": "agent", "u1": "agent", "v1": "verify", "bt1": "agent", "bh1": "agent"}


# -- where runs are made: every step is faked, the records are real ------------------------------
def _fake_step(self: Run, step: str, index: int, total: int, cleanup: bool = False) -> StepResult:
    stats: dict[str, Any] = {}
    if step in ("baseline", "manifestation", "recovery"):
        stats = {"checks": {c["name"]: {"ok": True} for c in self.state["vars"]["checks"][step]}}
    elif step == "pristine":
        stats = {"leftovers": []}
    elif step == "finish":  # collect, evaluate, revoke: one playbook of three plays (Run.finish)
        self._plays["finish"] = [(1.0, None), (1.1, None), (1.2, None)]
    self.state["started"] = [*self.state["started"], step]
    self.state["done"] = [*self.state["done"], step]
    self.state["results"][step] = {"status": "successful", "elapsed": 0.1, "stats": stats, "failures": [],
                                   "started_at": 1.0, "ended_at": 1.3}
    return StepResult(step, "successful", 0, 0.1, stats)


@pytest.fixture
def no_playbooks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Run, "step", _fake_step)
    monkeypatch.setattr(Run, "run_agent", lambda self, index, total: SimpleNamespace(status="exited", detail=""))


def _purposes() -> dict[str, tuple[str, str]]:
    return {r["id"]: (r["status"], r["purpose"]) for r in store.list_runs(limit=100)}


@pytest.mark.usefixtures("no_playbooks")
def test_campaigns_of_agents_are_agent_runs() -> None:
    from orchestrator.harness.campaign import Campaign, run_campaign

    (rec,) = run_campaign(Campaign("mine"), [find_scenario("loopweb-web-down")], ["python3 -m my_agent"], 1, 1,
                          Progress())
    runs = _purposes()
    assert runs[rec.run_id] == ("completed", "agent") and runs[rec.host] == ("hosted", "agent")
    assert [t.run_id for t in results.load_trials()] == [rec.run_id]
    assert json.loads((Path(store.get_run(rec.run_id)["run_dir"]) / "run.json").read_text())["purpose"] == "agent"  # type: ignore[index]


@pytest.mark.usefixtures("no_playbooks")
def test_bench_runs_are_tagged_bench(monkeypatch: pytest.MonkeyPatch) -> None:
    from orchestrator.harness import bench_lifecycle

    monkeypatch.setattr(bench_lifecycle.MemorySampler, "sample", lambda self: None)
    monkeypatch.setattr("orchestrator.harness.bench.measure_overhead", lambda repeats, echo: {})
    scenarios = [find_scenario(s) for s in ("loopweb-web-down", "loopweb-gateway-bad-upstream")]
    report_ = bench_lifecycle.bench(scenarios, 2, [1], 1, Progress())
    assert report_["levels"]["1"]["trials"] == 4
    runs = _purposes()
    assert {purpose for _, purpose in runs.values()} == {"bench"} and len(runs) == 5  # 4 trials, 1 host
    for run_id in runs:
        row = store.get_run(run_id)
        assert row is not None
        assert json.loads((Path(row["run_dir"]) / "run.json").read_text())["purpose"] == "bench"
    loaded = results.load()
    assert loaded.trials == [] and loaded.harness_left_out == 4


@pytest.mark.usefixtures("no_playbooks")
def test_verify_scenarios_runs_are_tagged_verify() -> None:
    from orchestrator.harness.verify import verify

    (trial,) = verify([find_scenario("loopweb-web-down")], 1, Progress())
    assert trial.passed, trial.reason
    assert _purposes() == {trial.run_id: ("verified", "verify")}
    assert results.load(include_harness=True).trials == []  # no agent ran: never a trial


def test_a_trial_takes_its_hosts_purpose_unless_told() -> None:
    scn = find_scenario("loopweb-web-down")
    host = Run.create(scn, agent=None, purpose="bench")
    assert trial_on(host, scn, NOOP).state["purpose"] == "bench"
    assert trial_on(host, scn, NOOP, purpose="agent").state["purpose"] == "agent"
    with pytest.raises(ValueError, match="run purpose"):
        Run.create(scn, agent=None, purpose="benchmark")
    assert len(_purposes()) == 3
