"""Run records: a SQLite index under the state dir plus a run.json in each run's directory.

run.json is written before every step, so a killed orchestrator leaves enough behind for
``opsbench cleanup`` to finish removal and teardown with the same extra vars.

The index also feeds results and the leaderboard (``orchestrator/results.py``): each run
keeps who ran it (``agent_name``, ``model``) and what the scenario was when it ran
(``scenario_meta``: domain, class, complexity, observability), and the ``metrics`` table
holds one row per evaluator metric, written when the run's outcome is recorded, so
aggregation is a query rather than a re-parse of every outcome. Each run also keeps its
``purpose`` (PURPOSES): an agent being measured, or the harness measuring itself (``bench``,
``verify-scenarios``); results leave the harness's runs out unless asked. And its ``mode`` (MODES): ``live`` on a
running environment, or ``replay`` of a recorded snapshot (``snapshot_id`` says which); results keep them apart.
"""

from __future__ import annotations

import json
import math
import os
import shlex
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from orchestrator import paths
from orchestrator.errors import FileUnreadable, OpsBenchError, Problem
from orchestrator.jsonfile import read_json

DDL_V1 = """
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
# v2: agent identity and a scenario snapshot on runs; per-metric rows for aggregation.
DDL_V2 = """
ALTER TABLE runs ADD COLUMN agent_name TEXT;
ALTER TABLE runs ADD COLUMN model TEXT;
ALTER TABLE runs ADD COLUMN scenario_meta TEXT;
CREATE TABLE IF NOT EXISTS metrics (
    run_id TEXT NOT NULL REFERENCES runs(id),
    evaluator TEXT NOT NULL,
    metric TEXT NOT NULL,
    value REAL,
    text TEXT,
    PRIMARY KEY (run_id, evaluator, metric)
);
CREATE INDEX IF NOT EXISTS metrics_metric ON metrics(evaluator, metric);
"""


# v3: why the run was made (PURPOSES); every run recorded before is an agent run unless its records say otherwise.
_DDL_V3 = """
ALTER TABLE runs ADD COLUMN purpose TEXT NOT NULL DEFAULT 'agent'
"""
AGENT = "agent"
PURPOSES = (AGENT, "bench", "verify", "record")
"""An agent being measured (``run``, ``campaign``); ``opsbench bench``'s no-op agent runs and the environments
they are hosted on; ``opsbench verify-scenarios``'s environments (fault cycles without an agent);
``opsbench snapshot record``'s trials and their environments (stopped at handover to record a snapshot)."""


# v4: live or replay (MODES), and the snapshot a replay served; every run recorded before ran live.
_DDL_V4 = """
ALTER TABLE runs ADD COLUMN mode TEXT NOT NULL DEFAULT 'live';
ALTER TABLE runs ADD COLUMN snapshot_id TEXT
"""
LIVE = "live"
REPLAY = "replay"
MODES = (LIVE, REPLAY)
"""A trial on a running environment, or a replay of a frozen incident (``opsbench replay``)."""


def _statements(ddl: str) -> list[str]:
    return [s.strip() for s in ddl.split(";") if s.strip()]


def _migrate_v1(db: sqlite3.Connection) -> None:
    for stmt in _statements(DDL_V1):
        db.execute(stmt)


def _migrate_v2(db: sqlite3.Connection) -> None:
    """Add the v2 columns and table, and backfill them from what v1 runs recorded."""
    for stmt in _statements(DDL_V2):
        db.execute(stmt)
    rows = db.execute("SELECT id, agent, outcome FROM runs").fetchall()
    for row in rows:
        name, model = agent_identity(row["agent"])
        db.execute("UPDATE runs SET agent_name = ?, model = ? WHERE id = ?", (name, model, row["id"]))
        if row["outcome"]:
            _record_metrics(db, row["id"], row["outcome"])


def _migrate_v3(db: sqlite3.Connection) -> None:
    """Add ``purpose`` (default agent); tag what the old records prove was the harness: verify-scenarios runs
    (status ``verified``) and the trials and hosts of ``opsbench bench``'s campaigns (named ``bench-*``, agent
    ``true``)."""
    for stmt in _statements(_DDL_V3):
        db.execute(stmt)
    db.execute("UPDATE runs SET purpose = 'verify' WHERE status = 'verified'")
    for trials in sorted((paths.state_dir() / "campaigns").glob("bench-*/trials.jsonl")):
        ids: set[str] = set()
        for line in trials.read_text(errors="replace").splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if isinstance(rec, dict) and rec.get("agent") == "true":
                ids |= {str(rec[k]) for k in ("run_id", "host") if rec.get(k)}
        db.executemany("UPDATE runs SET purpose = 'bench' WHERE id = ?", [(i,) for i in sorted(ids)])


def _migrate_v4(db: sqlite3.Connection) -> None:
    """Add ``mode`` (default live) and ``snapshot_id``: no replay existed before."""
    for stmt in _statements(_DDL_V4):
        db.execute(stmt)


# Version N is reached by running MIGRATIONS[N - 1] on a database at version N - 1.
MIGRATIONS: list[Callable[[sqlite3.Connection], None]] = [
    _migrate_v1,
    _migrate_v2,
    _migrate_v3,
    _migrate_v4,
]
SCHEMA_VERSION = len(MIGRATIONS)


def db_path() -> Path:
    return paths.state_dir() / "opsbench.db"


def _migrate(conn: sqlite3.Connection) -> None:
    """Bring the schema to SCHEMA_VERSION in one write transaction (safe against a concurrent opener)."""
    if conn.execute("PRAGMA user_version").fetchone()[0] >= SCHEMA_VERSION:
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        for target in range(version + 1, SCHEMA_VERSION + 1):
            MIGRATIONS[target - 1](conn)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        conn.commit()
    except BaseException:
        conn.rollback()
        raise


def unusable_index(db: Path, exc: sqlite3.Error) -> OpsBenchError:
    """The error for a run index SQLite cannot use (garbage, a folder, damaged, unreadable): names the file, what is
    wrong and what to do, instead of sqlite3's traceback."""
    if db.is_dir():
        what = "is a folder, not the SQLite run index"
    elif isinstance(exc, sqlite3.OperationalError):
        what = f"cannot be opened as the SQLite run index ({exc})"
    else:
        what = f"is not a usable SQLite run index ({exc})"
    return OpsBenchError(f"{db} {what}: move it aside (the run folders under {db.parent / 'runs'} stay) to start a "
                         "new index, or point OPSBENCH_HOME at another state folder")


@contextmanager
def connect() -> Iterator[sqlite3.Connection]:
    db = db_path()
    try:
        conn = sqlite3.connect(db, timeout=30)
    except sqlite3.DatabaseError as exc:  # OperationalError too: a folder, no permission
        raise unusable_index(db, exc) from None
    conn.row_factory = sqlite3.Row
    try:
        _migrate(conn)
    except sqlite3.DatabaseError as exc:  # not a database, damaged
        conn.close()
        raise unusable_index(db, exc) from None
    try:
        yield conn
        conn.commit()
    except sqlite3.DatabaseError as exc:
        if type(exc) is not sqlite3.DatabaseError:  # a locked database or a bad query is no damaged file
            raise
        raise unusable_index(db, exc) from None
    finally:
        conn.close()


# -- agent identity --------------------------------------------------------------------------
def agent_identity(command: str | None) -> tuple[str | None, str | None]:
    """(display name, model label) derived from an agent command.

    The name is the module of ``python -m MODULE``, else the script a Python interpreter runs,
    else the program's basename; the model is the value of a ``--model`` option when the
    command has one. TODO(agent-interface issue): take explicit ``--agent-name``/``--model``
    from ``opsbench run`` and pass them to create_run instead of deriving them.
    """
    if not command:
        return None, None
    try:
        argv = shlex.split(command)
    except ValueError:
        argv = command.split()
    if not argv:
        return None, None
    name = os.path.basename(argv[0])
    if name.startswith("python"):
        rest = argv[1:]
        if "-m" in rest and rest.index("-m") + 1 < len(rest):
            name = rest[rest.index("-m") + 1]
            if name == "orchestrator.agents.presets.run" and rest.index("-m") + 2 < len(rest):
                name = rest[rest.index("-m") + 2]  # an agent preset: the CLI's name (claude-code, codex)
        else:
            script = next((a for a in rest if not a.startswith("-")), None)
            name = os.path.basename(script) if script else name
    model = None
    for i, arg in enumerate(argv):
        if arg == "--model" and i + 1 < len(argv):
            model = argv[i + 1]
        elif arg.startswith("--model="):
            model = arg.split("=", 1)[1]
    return name, model or None


def scenario_snapshot(spec_path: str | Path) -> dict[str, Any] | None:
    """What results break down by, as the spec says when the run starts (None if unreadable)."""
    from orchestrator.errors import OpsBenchError
    from orchestrator.spec import load_scenario

    try:
        scn = load_scenario(Path(spec_path))
        meta = scn.data["metadata"]
        obs = scn.environment["observability"]
        complexity = meta.get("complexity", {})
    except (OpsBenchError, OSError, KeyError, TypeError, AttributeError):
        return None
    return {"name": meta.get("name"), "domain": meta.get("domain"), "class": meta.get("class"),
            "complexity": complexity.get("level"), "complexity_value": complexity.get("value"),
            "observability": {k: bool(obs.get(k, True)) for k in ("metrics", "traces", "logs")}}


# -- runs and phases -------------------------------------------------------------------------
def check_purpose(purpose: str) -> str:
    if purpose not in PURPOSES:
        raise ValueError(f"run purpose {purpose!r}: one of {', '.join(PURPOSES)}")
    return purpose


def check_mode(mode: str) -> str:
    if mode not in MODES:
        raise ValueError(f"run mode {mode!r}: one of {', '.join(MODES)}")
    return mode


def create_run(run: dict[str, Any]) -> None:
    """Index a new run; ``run["purpose"]`` (one of PURPOSES) defaults to an agent run, ``run["mode"]`` (MODES) to
    live (a replay names its ``snapshot_id``)."""
    purpose = check_purpose(run.get("purpose") or AGENT)
    mode = check_mode(run.get("mode") or LIVE)
    now = time.time()
    derived_name, derived_model = agent_identity(run.get("agent"))
    meta = run.get("scenario_meta")
    if meta is None and run.get("spec_path"):
        meta = scenario_snapshot(run["spec_path"])
    with connect() as db:
        db.execute(
            "INSERT INTO runs (id, scenario_id, spec_version, spec_digest, status, pid, run_dir, agent,"
            " agent_name, model, scenario_meta, purpose, mode, snapshot_id, created, updated)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (run["id"], run["scenario_id"], run["spec_version"], run["spec_digest"], run["status"],
             run["pid"], run["run_dir"], run.get("agent"), run.get("agent_name") or derived_name,
             run.get("model") or derived_model, json.dumps(meta, sort_keys=True) if meta else None, purpose,
             mode, run.get("snapshot_id"), now, now),
        )


def update_run(run_id: str, **fields: Any) -> None:
    """Update columns of a run; a new ``outcome`` (the run's summary JSON) also refreshes its metrics."""
    fields["updated"] = time.time()
    cols = ", ".join(f"{k} = ?" for k in fields)
    with connect() as db:
        db.execute(f"UPDATE runs SET {cols} WHERE id = ?", (*fields.values(), run_id))
        if fields.get("outcome") is not None:
            _record_metrics(db, run_id, fields["outcome"])


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


# -- metrics ---------------------------------------------------------------------------------
def _record_metrics(db: sqlite3.Connection, run_id: str, outcome: str) -> None:
    """Replace the run's metric rows with those of its summary (non-JSON outcomes have none).

    Rows: every scalar of every evaluator's scores (numbers and booleans in ``value``, strings
    such as ``status`` in ``text``); the agent phase as evaluator ``agent`` (``status``,
    ``exit_code``, ``elapsed`` seconds) plus ``submitted``: seconds from the agent's start to
    the last write of its output file, when that file is in the run dir."""
    try:
        summary = json.loads(outcome)
    except (TypeError, ValueError):
        return
    if not isinstance(summary, dict):
        return
    rows: list[tuple[str, str, float | None, str | None]] = []
    sources = {**(summary.get("evaluations") or {}), "agent": summary.get("agent") or {}}
    for evaluator, scores in sources.items():
        if not isinstance(scores, dict):
            continue
        for metric, value in scores.items():
            if isinstance(value, bool | int | float) and not (isinstance(value, float) and math.isnan(value)):
                rows.append((evaluator, metric, float(value), None))
            elif isinstance(value, str) and metric != "detail":
                rows.append((evaluator, metric, None, value[:500]))
    submitted = _submission_delay(db, run_id, summary.get("run_dir"))
    if submitted is not None:
        rows.append(("agent", "submitted", submitted, None))
    db.execute("DELETE FROM metrics WHERE run_id = ?", (run_id,))
    db.executemany("INSERT INTO metrics (run_id, evaluator, metric, value, text) VALUES (?,?,?,?,?)",
                   [(run_id, *r) for r in rows])


def _submission_delay(db: sqlite3.Connection, run_id: str, run_dir: Any) -> float | None:
    if not run_dir:
        return None
    phase = db.execute("SELECT started, ended FROM phases WHERE run_id = ? AND phase = 'agent'"
                       " ORDER BY seq DESC LIMIT 1", (run_id,)).fetchone()
    output = Path(str(run_dir)) / "agent" / "output.json"
    if phase is None or not output.is_file():
        return None
    written = output.stat().st_mtime
    if written < phase["started"] or (phase["ended"] is not None and written > phase["ended"] + 1):
        return None  # not written during the agent phase (copied in, or touched later)
    return round(written - float(phase["started"]), 2)


def record_metrics(run_id: str, summary: dict[str, Any]) -> None:
    """Write a run's metric rows from its summary (``update_run(outcome=...)`` does this itself)."""
    with connect() as db:
        _record_metrics(db, run_id, json.dumps(summary, default=str))


def metrics_for(run_ids: list[str] | None = None) -> list[dict[str, Any]]:
    """Metric rows (run_id, evaluator, metric, value, text), all or for the given runs."""
    query = "SELECT run_id, evaluator, metric, value, text FROM metrics"
    args: list[str] = []
    if run_ids is not None:
        query += f" WHERE run_id IN ({','.join('?' * len(run_ids))})"
        args = run_ids
    with connect() as db:
        return [dict(r) for r in db.execute(query + " ORDER BY run_id, evaluator, metric", args)]


# -- run.json --------------------------------------------------------------------------------
def write_run_json(run_dir: Path, data: dict[str, Any]) -> None:
    """Atomically replace run_dir/run.json (the state cleanup works from)."""
    tmp = run_dir / "run.json.tmp"
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True))
    tmp.replace(run_dir / "run.json")


def read_run_json(run_dir: Path) -> dict[str, Any]:
    """run_dir/run.json; FileUnreadable (naming it) when it is not UTF-8, not JSON or no JSON object."""
    data = read_json(run_dir / "run.json")
    if not isinstance(data, dict):
        raise FileUnreadable(Problem(str(run_dir / "run.json"), "$", "not a JSON object: not a run.json OpsBench "
                                                                     "wrote"))
    return data
