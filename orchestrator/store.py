"""Run records: a SQLite index under the state dir plus a run.json in each run's directory.

run.json is written before every step, so a killed orchestrator leaves enough behind for
``opsbench cleanup`` to finish removal and teardown with the same extra vars.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from orchestrator import paths

SCHEMA_VERSION = 1
_DDL = """
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY,
    scenario_id TEXT NOT NULL,
    spec_version INTEGER NOT NULL,
    spec_digest TEXT NOT NULL,
    status TEXT NOT NULL,
    outcome TEXT,
    pid INTEGER,
    run_dir TEXT NOT NULL,
    agent TEXT,
    created REAL NOT NULL,
    updated REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS phases (
    run_id TEXT NOT NULL REFERENCES runs(id),
    seq INTEGER NOT NULL,
    phase TEXT NOT NULL,
    status TEXT NOT NULL,
    started REAL NOT NULL,
    ended REAL,
    detail TEXT,
    PRIMARY KEY (run_id, seq)
);
CREATE INDEX IF NOT EXISTS runs_scenario ON runs(scenario_id);
"""


def db_path() -> Path:
    return paths.state_dir() / "opsbench.db"


@contextmanager
def connect() -> Iterator[sqlite3.Connection]:
    conn = sqlite3.connect(db_path(), timeout=30)
    conn.row_factory = sqlite3.Row
    try:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version < SCHEMA_VERSION:
            conn.executescript(_DDL)
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        yield conn
        conn.commit()
    finally:
        conn.close()


def create_run(run: dict[str, Any]) -> None:
    now = time.time()
    with connect() as db:
        db.execute(
            "INSERT INTO runs (id, scenario_id, spec_version, spec_digest, status, pid, run_dir, agent,"
            " created, updated) VALUES (?,?,?,?,?,?,?,?,?,?)",
            (run["id"], run["scenario_id"], run["spec_version"], run["spec_digest"], run["status"],
             run["pid"], run["run_dir"], run.get("agent"), now, now),
        )


def update_run(run_id: str, **fields: Any) -> None:
    fields["updated"] = time.time()
    cols = ", ".join(f"{k} = ?" for k in fields)
    with connect() as db:
        db.execute(f"UPDATE runs SET {cols} WHERE id = ?", (*fields.values(), run_id))


def start_phase(run_id: str, phase: str) -> int:
    with connect() as db:
        seq = db.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM phases WHERE run_id = ?",
                         (run_id,)).fetchone()[0]
        db.execute("INSERT INTO phases (run_id, seq, phase, status, started) VALUES (?,?,?,?,?)",
                   (run_id, seq, phase, "running", time.time()))
    return int(seq)


def end_phase(run_id: str, seq: int, status: str, detail: str | None = None) -> None:
    with connect() as db:
        db.execute("UPDATE phases SET status = ?, ended = ?, detail = ? WHERE run_id = ? AND seq = ?",
                   (status, time.time(), detail, run_id, seq))


def get_run(run_id: str) -> dict[str, Any] | None:
    with connect() as db:
        row = db.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
        if row is None:
            return None
        run = dict(row)
        run["phases"] = [dict(p) for p in db.execute(
            "SELECT phase, status, started, ended, detail FROM phases WHERE run_id = ? ORDER BY seq",
            (run_id,))]
    return run


def list_runs(limit: int = 50, scenario: str | None = None) -> list[dict[str, Any]]:
    query = "SELECT * FROM runs"
    args: tuple[Any, ...] = ()
    if scenario:
        query += " WHERE scenario_id = ?"
        args = (scenario,)
    query += " ORDER BY created DESC LIMIT ?"
    with connect() as db:
        return [dict(r) for r in db.execute(query, (*args, limit))]


def write_run_json(run_dir: Path, data: dict[str, Any]) -> None:
    """Atomically replace run_dir/run.json (the state cleanup works from)."""
    tmp = run_dir / "run.json.tmp"
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True))
    tmp.replace(run_dir / "run.json")


def read_run_json(run_dir: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((run_dir / "run.json").read_text())
    return data
