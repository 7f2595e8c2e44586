"""Ground truth of FinOps scenarios: reference answers and planted anomalies, computed on a generated dataset."""

from __future__ import annotations

import datetime as dt
import tempfile
from pathlib import Path
from typing import Any

import duckdb

from . import insights
from .detect import Event, importance
from .generator import DatasetSpec, generate

DATASET_KEYS = ("seed", "resources", "start", "months", "accounts_per_provider", "anomalies_per_month")


def dataset_spec(args: dict[str, Any]) -> DatasetSpec:
    """The DatasetSpec of an environment's args (with or without the role prefix env_finops_data_)."""
    clean = {k.removeprefix("env_finops_data_"): v for k, v in args.items()}
    return DatasetSpec(**{k: clean[k] for k in DATASET_KEYS if k in clean})


def answer(con: duckdb.DuckDBPyConnection, kind: str, id_: str, **params: Any) -> dict[str, Any]:
    """A ground-truth answer entry: the resolved reference query and its rows."""
    q = insights.QUESTIONS[kind]
    sql = insights.resolve(kind, **params)
    return {"id": id_, "question": kind, "query": sql, "keys": list(q.keys), "fields": list(q.fields),
            "ordered": q.ordered, "rows": insights.run(con, sql)}


def anomaly_items(con: duckdb.DuckDBPyConnection, planted: list[dict[str, Any]], service: str, unit: str,
                  start: str, end: str) -> list[dict[str, Any]]:
    """The planted anomalies of one series starting in [start, end] (inclusive days), with the series' cumulative
    cost over each anomaly's days and their ITBench importance."""
    series = {d: c for d, c in con.execute(insights.series_sql(service, unit)).fetchall()}
    chosen = [a for a in planted if a["service"] == service and a["pricing_unit"] == unit
              and start <= a["start"] <= end]
    events = []
    for a in chosen:
        first, last = dt.date.fromisoformat(a["start"]), dt.date.fromisoformat(a["end"])
        cost = sum(series.get(first + dt.timedelta(days=i), 0.0) for i in range(a["days"]))
        events.append(Event(first, last, cost, a["excess_cost"]))
    out = []
    for a, e, imp in zip(chosen, events, importance(events), strict=True):
        out.append({"id": a["id"], "kind": a["kind"], "start": a["start"], "end": a["end"], "days": a["days"],
                    "cost": round(e.cost, 2), "excessCost": a["excess_cost"], "importance": round(imp, 6),
                    "resourceId": a["resource_id"]})
    return out


Temp = tempfile.TemporaryDirectory[str]


def with_dataset(spec: DatasetSpec) -> tuple[duckdb.DuckDBPyConnection, dict[str, Any], Temp]:
    """Generate ``spec`` into a temporary database; (read-only connection, generator summary, the temp dir)."""
    tmp = tempfile.TemporaryDirectory(prefix="opsbench-finops-")
    db = Path(tmp.name) / "billing.duckdb"
    summary = generate(spec, database=db)
    return duckdb.connect(str(db), read_only=True), summary, tmp
