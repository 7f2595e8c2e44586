"""The PostgreSQL billing store's wiring without a server: which store the gateway opens, and what the loader
creates. The server itself is exercised by tests/e2e/test_finops_postgres.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb
import pytest

from orchestrator.finops import pgstore
from orchestrator.gateway import load_context


def _env(run_dir: Path, billing: dict[str, Any]) -> Path:
    (run_dir / "environment.json").write_text(json.dumps({"application": "finops_data", "endpoints": {},
                                                          "billing": billing, "tool_families": ["billing"]}))
    return run_dir


def test_postgres_store_is_opened_with_the_reader_password(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "billing_reader").write_text("s3cret\n")
    opened: list[tuple[Any, ...]] = []
    monkeypatch.setattr(pgstore, "PostgresBillingDatabase", lambda *a: opened.append(a) or "db")
    ctx = load_context(_env(tmp_path, {"store": "postgres", "host": "127.0.0.1", "port": "15432",
                                       "user": "billing_reader", "password_file": str(tmp_path / "secrets" /
                                                                                      "billing_reader"),
                                       "database": str(tmp_path / "env" / "billing.duckdb")}), run_id="r1")
    assert ctx.billing() == "db" and ctx.billing() == "db"  # opened once
    assert opened == [("127.0.0.1", 15432, "billing_reader", "s3cret")]


def test_password_outside_the_run_or_duckdb_store_means_no_postgres(tmp_path: Path) -> None:
    ctx = load_context(_env(tmp_path, {"store": "postgres", "port": 15432, "password_file": "/etc/shadow"}),
                       run_id="r1")
    assert ctx.billing_postgres is None
    ctx = load_context(_env(tmp_path, {"store": "duckdb", "database": str(tmp_path / "b.duckdb")}), run_id="r1")
    assert ctx.billing_postgres is None and ctx.billing_file == (tmp_path / "b.duckdb").resolve()


def test_loader_maps_every_focus_column_to_a_postgres_type(tmp_path: Path) -> None:
    from orchestrator.finops.generator import DatasetSpec, generate

    db = tmp_path / "b.duckdb"
    generate(DatasetSpec(resources=20, months=1), database=db)
    con = duckdb.connect(str(db), read_only=True)
    kinds = {str(t).split("(")[0] for _, t in con.execute(
        "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = 'billing'").fetchall()}
    con.close()
    assert kinds <= set(pgstore.PG_TYPES), kinds - set(pgstore.PG_TYPES)
    assert "json_extract_string" in pgstore.COMPAT_SQL and "round(double precision, integer)" in pgstore.COMPAT_SQL
