"""Runs record their mode (live / replay) and snapshot; `runs`, `show`, `results` and `leaderboard` keep the two
apart, and a database of schema version 3 migrates with every old run live."""

from __future__ import annotations

import json
import sqlite3

import pytest
from click.testing import CliRunner
from synthetic_runs import AGENT_A, LABEL_A, Clock, record

from orchestrator import results, store
from orchestrator.cli import main

pytestmark = pytest.mark.usefixtures("home")  # a private OPSBENCH_HOME (conftest)

SNAP = "shop-cart-down-20261125T085741Z-c6cd11"



def _populate() -> None:
    clock = Clock()
    record("live1", AGENT_A, "s-easy", "correct", 30.0, clock)
    record("live2", AGENT_A, "s-easy", "wrong", 30.0, clock)
    for i in range(3):
        record(f"rep{i}", AGENT_A, "s-easy", "correct", 5.0, clock, mode="replay", snapshot_id=SNAP)


def test_live_and_replay_trials_are_never_pooled() -> None:
    _populate()
    trials = {t.run_id: t for t in results.load_trials()}
    assert trials["live1"].agent == LABEL_A and trials["live1"].mode == "live"
    assert trials["rep0"].agent == f"{LABEL_A} [replay]" and trials["rep0"].snapshot_id == SNAP
    rows = {r["agent"]: (r["n"], r["c"]) for r in results.scenario_results(list(trials.values()))}
    assert rows == {LABEL_A: (2, 1), f"{LABEL_A} [replay]": (3, 3)}
    board = {r["agent"]: r for r in results.leaderboard(list(trials.values()))}
    assert set(board) == {LABEL_A, f"{LABEL_A} [replay]"}
    assert [t.run_id for t in results.load_trials(agent=f"{LABEL_A} [replay]")] == ["rep0", "rep1", "rep2"]
    with pytest.raises(ValueError, match="run mode 'frozen'"):
        store.create_run({"id": "x", "scenario_id": "s", "spec_version": 1, "spec_digest": "d", "status": "running",
                          "pid": 1, "run_dir": "/r", "mode": "frozen"})


def test_the_commands_show_the_mode() -> None:
    _populate()
    runner = CliRunner()
    listing = runner.invoke(main, ["runs"])
    assert listing.exit_code == 0, listing.output
    header, *lines = listing.output.splitlines()
    assert "MODE" in header
    modes = {line.split()[0]: line.split()[4] for line in lines}
    assert modes == {"live1": "live", "live2": "live", "rep0": "replay", "rep1": "replay", "rep2": "replay"}
    shown = runner.invoke(main, ["show", "rep1"])
    assert f"mode replay of {SNAP}" in shown.output
    assert "mode live" in runner.invoke(main, ["show", "live1"]).output
    board = runner.invoke(main, ["leaderboard", "--json"])
    assert {r["agent"] for r in json.loads(board.output)["agents"]} == {LABEL_A, f"{LABEL_A} [replay]"}


def test_a_version_3_database_migrates_every_run_live() -> None:
    conn = sqlite3.connect(store.db_path())
    conn.row_factory = sqlite3.Row
    for migrate in store.MIGRATIONS[:3]:
        migrate(conn)
    conn.execute("PRAGMA user_version = 3")
    conn.execute("INSERT INTO runs (id, scenario_id, spec_version, spec_digest, status, run_dir, created, updated)"
                 " VALUES ('old', 's-easy', 1, 'd', 'completed', '/gone', 1.0, 2.0)")
    conn.commit()
    conn.close()
    run = store.get_run("old")
    assert run is not None and (run["mode"], run["snapshot_id"], run["purpose"]) == ("live", None, "agent")
    with store.connect() as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == store.SCHEMA_VERSION == 4
