"""The fast replay trial (handover, agent, then `finish` = collect + evaluate + revoke in one playbook), `opsbench
bench --replay` and `opsbench campaign --snapshots`, through real Ansible without podman (a synthetic snapshot);
and the bad inputs of both commands, which fail before anything runs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from orchestrator import store
from orchestrator.catalog import find_scenario
from orchestrator.cli import main
from orchestrator.harness.bench_replay import bench_replay
from orchestrator.progress import Progress
from orchestrator.snapshots import format as fmt
from orchestrator.trials import replay_host, replay_trial, replay_trial_on

pytestmark = pytest.mark.usefixtures("home")  # a private OPSBENCH_HOME (conftest)




def cli(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


@pytest.mark.e2e
def test_a_trial_is_two_invocations_recorded_as_its_steps(snapshot: Path) -> None:
    scn = find_scenario("shop-cart-down")
    host = replay_host(scn, snapshot, fmt.verify(snapshot).snapshot_id)
    try:
        assert host.step("deploy", 1, 1).status == "successful"
        trial = replay_trial_on(host, scn, "true")
        summary = replay_trial(trial)
        assert summary["status"] == "completed", summary["reason"]
        assert trial.state["done"] == ["handover", "agent", "collect", "evaluate", "revoke"]
        assert sorted(p.name.split("-", 1)[1] for p in (trial.record_dir / "steps").iterdir()) == [
            "finish", "handover"]
        res = trial.state["results"]
        # The three steps tile the one invocation: consecutive, and their times add up to it.
        assert res["collect"]["ended_at"] == res["evaluate"]["started_at"]
        assert res["evaluate"]["ended_at"] == res["revoke"]["started_at"]
        parts = sum(res[s]["elapsed"] for s in ("collect", "evaluate", "revoke"))
        assert abs(parts - trial.state["finish"]["elapsed"]) < 0.5
        assert set(res["evaluate"]["stats"]["evaluations"]) == {"diagnosis", "process"}
        assert res["revoke"]["stats"] == {"revoke": {"revoked": True}} and "collect" in res["collect"]["stats"]
        assert not (host.run_dir / "gateway" / "gateway.pid").exists()
        assert not (host.run_dir / "secrets" / "agent_token").exists()

        # An evaluator that breaks stops `finish` at its play: the trial is an error naming evaluate, and revoke,
        # still owed, runs on its own.
        broken = replay_trial_on(host, scn, "true")
        broken.state["vars"]["evaluators"][0]["role"] = "evaluate_no_such_role"
        summary = replay_trial(broken)
        assert summary["status"] == "error" and summary["reason"].startswith("step evaluate failed"), summary
        assert broken.state["done"] == ["handover", "agent", "collect", "revoke"]
        assert broken.state["results"]["evaluate"]["status"] == "failed"
        assert sorted(p.name.split("-", 1)[1] for p in (broken.record_dir / "steps").iterdir()) == [
            "finish", "handover", "revoke"]
        assert summary["cleanup"] == "done" and not (host.run_dir / "gateway" / "gateway.pid").exists()
    finally:
        host.cleanup()


@pytest.mark.e2e
def test_bench_replay_reports_phases_rate_and_load(snapshot: Path) -> None:
    report = bench_replay([snapshot], 2, [1], Progress())
    level = report["levels"]["1"]
    assert (level["trials"], level["completed"], level["environments"]) == (2, 2, 1)
    assert level["replays_per_hour"] > 0 and report["best"]["parallel"] == 1
    for phase in ("handover", "collect", "evaluate", "revoke"):
        assert level["phases_s"][phase]["n"] == 2
    assert level["phases_s"]["deploy"]["n"] == 1 and level["phases_s"]["teardown"]["n"] == 1
    assert level["trial_with_environment_share_s"]["median"] > level["trial_s"]["median"]
    assert level["load_1m"]["n"] >= 2
    runs = store.list_runs()
    assert runs and {r["purpose"] for r in runs} == {"bench"}


@pytest.mark.e2e
def test_campaign_over_a_snapshot_corpus_records_replays_and_resumes(snapshot: Path, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    shutil.copytree(snapshot, corpus / snapshot.name)
    res = cli("campaign", "--snapshots", str(corpus), "--agent", "true", "--trials", "2", "--name", "c1", "--json",
              "--quiet")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    info = fmt.verify(corpus / snapshot.name)
    assert doc["mode"] == "replay" and doc["unfinished"] == 0
    assert [(r["snapshot"], r["scenario"], r["trials"]) for r in doc["snapshots"]] == [
        (info.snapshot_id, "shop-cart-down", 2)]
    trials = [r for r in store.list_runs() if r["mode"] == "replay" and r["status"] != "hosted"]
    assert len(trials) == 2 and {r["snapshot_id"] for r in trials} == {info.snapshot_id}
    # Run again: both trials are recorded as finished, nothing runs.
    res = cli("campaign", "--snapshots", str(corpus), "--agent", "true", "--trials", "2", "--name", "c1", "--quiet")
    assert res.exit_code == 0, res.output
    assert len([r for r in store.list_runs() if r["mode"] == "replay" and r["status"] != "hosted"]) == 2
    assert "2/2 replay trial(s) finished" in res.output


@pytest.mark.parametrize(("args", "message"), [
    (["campaign", "shop-cart-down", "--snapshots", "{tmp}"], "give no SCENARIOS and no --file"),
    (["campaign", "--snapshots", "{tmp}"], "no snapshots (directories with snapshot.json"),
    (["campaign", "--snapshots", "{tmp}/missing"], "not a directory of snapshots"),
    (["bench", "--replay", "{tmp}/missing"], "no such snapshot, archive or corpus directory"),
    (["bench", "--replay", "{tmp}"], "no snapshots (directories with snapshot.json"),
    (["bench", "--replay", "--parallel", "0", "{tmp}"], "--parallel '0': levels from 1 to 8"),
])
def test_bad_input_is_one_clear_error_and_nothing_runs(args: list[str], message: str, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    res = cli(*[a.replace("{tmp}", str(empty)) for a in args])
    assert res.exit_code != 0 and message in res.output, res.output
    assert store.list_runs() == []


def test_a_bad_snapshot_in_the_corpus_stops_the_campaign_before_anything_runs(snapshot: Path,
                                                                             tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    shutil.copytree(snapshot, corpus / snapshot.name)
    (corpus / snapshot.name / fmt.ALERTS).write_text("[]")
    res = cli("campaign", "--snapshots", str(corpus), "--agent", "true", "--quiet")
    assert res.exit_code != 0 and fmt.ALERTS in res.output and snapshot.name in res.output, res.output
    assert store.list_runs() == []
