"""The billing data in PostgreSQL (store postgres): `opsbench run finops-top-applications-postgres --keep` deploys a
PostgreSQL 15 container loaded from the generator, the baseline agent answers through the same read-only query_sql
(here backed by the role billing_reader), the evaluator scores it against the same ground truth as the DuckDB
scenario; the kept environment then shows the tool's refusals, and teardown removes the container and its secrets.
About one to two minutes."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from orchestrator import paths
from orchestrator.finops.pgstore import PostgresBillingDatabase
from orchestrator.finops.sql import SqlError
from orchestrator.runner import ansible_env

from .conftest import run_cli, run_json

pytestmark = pytest.mark.e2e


def podman_names(run_id: str) -> str:
    env = {**os.environ, **{k: v for k, v in ansible_env().items() if k.startswith("CONTAINERS_")}}
    return subprocess.run(["podman", "ps", "-a", "--filter", f"label=opsbench.run={run_id}", "--format",
                           "{{.Names}}"], env=env, capture_output=True, text=True, check=False).stdout.strip()


def test_insight_scenario_on_postgres(home: Path) -> None:
    rc, out = run_json(home, "run", "finops-top-applications-postgres", "--keep", timeout=600,
                       PYTHONPATH=str(paths.PROJECT_ROOT))
    try:
        assert rc == 0 and out["status"] == "completed", out
        scores = out["evaluations"]["finops"]
        assert scores["status"] == "scored" and scores["finops_pass"] == 1, scores
        run_dir = Path(out["run_dir"])
        records = [json.loads(line) for line in
                   (run_dir / "artifacts" / "trajectory.jsonl").read_text().splitlines()]
        assert records and all(r["tool"] == "query_sql" and r["status"] == "ok" for r in records)
        billing = json.loads((run_dir / "environment.json").read_text())["billing"]
        assert billing["store"] == "postgres" and podman_names(out["run_id"]).endswith("billing-pg")
        db = PostgresBillingDatabase(billing["host"], int(billing["port"]), billing["user"],
                                     Path(billing["password_file"]).read_text().strip())
        try:
            assert db.describe("billing")["rows"] == 36_836
            first = db.query("SELECT ChargeCategory, count(*) AS n FROM billing GROUP BY 1 ORDER BY 1", limit=2)
            assert first.columns == ["chargecategory", "n"] and first.more
            for sql, code in (("DELETE FROM billing", "lint"), ("SELECT pg_read_file('/etc/passwd')", "denied"),
                              ("SELECT * FROM pg_authid", "denied")):
                with pytest.raises(SqlError) as refused:
                    db.query(sql)
                assert refused.value.code == code, (sql, refused.value.message)
        finally:
            db.close()
    finally:
        if out.get("run_id"):
            proc = run_cli(home, "cleanup", "--teardown", out["run_id"], "--json")
            assert proc.returncode == 0, proc.stderr
    assert podman_names(out["run_id"]) == ""
