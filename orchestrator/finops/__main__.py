"""``python -m orchestrator.finops``: generate a billing dataset, or benchmark generation and reference queries.

    generate --database FILE [--parquet FILE] [--seed N --resources N --start DATE --months N ...]
        writes the dataset; prints rows and seconds (never the planted anomalies, unless --truth FILE is given)
    bench [--resources 13700 --months 12 --threads 2]
        times generating ~5 million rows plus ground truth, then each data-insight reference query on them
    load-postgres --database FILE --port N --owner-password-file FILE [--host 127.0.0.1]
        copies a generated dataset into PostgreSQL (database and owner `billing`) for the read-only role
        billing_reader (orchestrator/finops/pgstore.py); prints the row count
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

import duckdb

from . import insights
from .detect import detect
from .generator import DatasetSpec, generate

BENCH_WINDOW = {"start": "2024-09-01", "end": "2024-10-01"}


def _spec_args(parser: argparse.ArgumentParser, resources: int, months: int) -> None:
    d = DatasetSpec()
    parser.add_argument("--seed", type=int, default=d.seed)
    parser.add_argument("--resources", type=int, default=resources)
    parser.add_argument("--start", default=d.start)
    parser.add_argument("--months", type=int, default=months)
    parser.add_argument("--accounts-per-provider", type=int, default=d.accounts_per_provider)
    parser.add_argument("--anomalies-per-month", type=int, default=d.anomalies_per_month)
    parser.add_argument("--threads", type=int, default=None)


def _spec(a: argparse.Namespace) -> DatasetSpec:
    return DatasetSpec(seed=a.seed, resources=a.resources, start=a.start, months=a.months,
                       accounts_per_provider=a.accounts_per_provider, anomalies_per_month=a.anomalies_per_month)


def bench_queries() -> dict[str, str]:
    """One reference query per data-insight question kind, on the benchmark window."""
    w = BENCH_WINDOW
    return {
        "cost_by_category": insights.resolve("cost_by_category", categories=["Compute", "Storage"], **w),
        "top_applications": insights.resolve("top_applications", top=3, **w),
        "allocation_ratio": insights.resolve("allocation_ratio", **w),
        "peak_to_average": insights.resolve("peak_to_average", top=5, **w),
        "cost_variance": insights.resolve("cost_variance", top=5, start="2024-09-01", end="2024-09-09"),
        "discount_coverage": insights.resolve("discount_coverage", top=5),
        "anomaly_series": insights.series_sql("Amazon Elastic Compute Cloud", "Hours"),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m orchestrator.finops", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    gen = sub.add_parser("generate", help="write a dataset")
    gen.add_argument("--database", type=Path)
    gen.add_argument("--parquet", type=Path)
    gen.add_argument("--truth", type=Path, help="also write the planted anomalies here (keep it away from agents)")
    _spec_args(gen, DatasetSpec().resources, DatasetSpec().months)
    bench = sub.add_parser("bench", help="time 5M-row generation and the reference queries")
    _spec_args(bench, 13_700, 12)
    bench.add_argument("--repeats", type=int, default=3)
    pg = sub.add_parser("load-postgres", help="copy a generated dataset into PostgreSQL")
    pg.add_argument("--database", type=Path, required=True)
    pg.add_argument("--host", default="127.0.0.1")
    pg.add_argument("--port", type=int, required=True)
    pg.add_argument("--owner-password-file", type=Path, required=True)
    pg.add_argument("--wait", type=float, default=90.0, help="seconds to wait for the server to accept connections")
    a = parser.parse_args(argv)
    if a.command == "load-postgres":
        from .pgstore import load as load_postgres

        started = time.monotonic()
        loaded = load_postgres(a.database, a.host, a.port, a.owner_password_file.read_text().strip(), wait=a.wait)
        print(json.dumps({"rows": loaded, "seconds": round(time.monotonic() - started, 2)}))
        return 0
    spec = _spec(a)
    if a.command == "generate":
        if a.database is None and a.parquet is None:
            parser.error("give --database and/or --parquet")
        summary = generate(spec, parquet=a.parquet, database=a.database, threads=a.threads)
        if a.truth:
            a.truth.write_text(json.dumps(summary, indent=2, sort_keys=True))
        print(json.dumps({k: v for k, v in summary.items() if k != "anomalies"}, sort_keys=True))
        return 0
    with tempfile.TemporaryDirectory(prefix="opsbench-finops-bench-") as tmp:
        parquet, database = Path(tmp) / "billing.parquet", Path(tmp) / "billing.duckdb"
        started, cpu = time.monotonic(), time.process_time()
        summary = generate(spec, parquet=parquet, threads=a.threads)
        gen_seconds, gen_cpu = time.monotonic() - started, time.process_time() - cpu
        started = time.monotonic()
        load = duckdb.connect(str(database))
        load.execute(f"CREATE TABLE billing AS SELECT * FROM read_parquet('{parquet}')")
        load.close()
        load_seconds = time.monotonic() - started
        report: dict[str, object] = {
            "spec": asdict(spec), "threads": a.threads or "duckdb default", "rows": summary["rows"],
            "anomalies": len(summary["anomalies"]), "generate_seconds": round(gen_seconds, 2),
            "generate_cpu_seconds": round(gen_cpu, 2), "load_into_duckdb_seconds": round(load_seconds, 2),
            "load_average_1m": round(os.getloadavg()[0], 2), "cpus": os.cpu_count(),
            "parquet_mb": round(parquet.stat().st_size / 1e6, 1), "queries": {}}
        con = duckdb.connect(str(database), read_only=True, config={"threads": a.threads or 2})
        timings: dict[str, object] = {}
        series = None
        for name, sql in bench_queries().items():
            best = float("inf")
            for _ in range(a.repeats):
                t0 = time.monotonic()
                rows = con.execute(sql).fetchall()
                best = min(best, time.monotonic() - t0)
            timings[name] = {"best_seconds": round(best, 4), "rows": len(rows)}
            if name == "anomaly_series":
                series = rows
        t0 = time.monotonic()
        found = detect(series or [], (BENCH_WINDOW["start"], "2024-09-30"))
        timings["detector"] = {"seconds": round(time.monotonic() - t0, 4), "events": len(found)}
        report["queries"] = timings
        con.close()
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
