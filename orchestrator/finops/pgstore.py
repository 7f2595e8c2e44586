"""PostgreSQL as the billing store (the alternative to DuckDB): load a generated dataset, query it read-only.

The environment role (`env_finops_data` with `store: postgres`) runs PostgreSQL in a container and calls `load`: the
table is copied from the generated DuckDB file into `billing` with the same columns, **unquoted** (PostgreSQL folds
them to lower case, so `SELECT BilledCost FROM billing` works as in DuckDB; result columns that are not aliased come
back in lower case). Two small compatibility functions let the DuckDB-dialect reference queries run unchanged:
`json_extract_string(text, '$.key')` and `round(double precision, int)`.

`PostgresBillingDatabase` is the same read-only SQL tool as `sql.BillingDatabase` over that server, read-only three
times over as well: the same lint (DuckDB's parser: one SELECT statement only), a role that has only SELECT on the
table and whose transactions are read-only, and limits (rows per page, `statement_timeout`).
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from pathlib import Path
from typing import Any

import duckdb

from .sql import DEFAULT_LIMIT, DEFAULT_TIMEOUT, QueryResult, SqlError, checked_query, json_value

PG_TYPES = {"VARCHAR": "text", "TIMESTAMP": "timestamp", "DOUBLE": "double precision", "BIGINT": "bigint",
            "INTEGER": "integer", "DATE": "date", "BOOLEAN": "boolean"}

COMPAT_SQL = r"""
CREATE OR REPLACE FUNCTION json_extract_string(doc text, path text) RETURNS text LANGUAGE sql IMMUTABLE AS
$$ SELECT (doc::jsonb) #>> string_to_array(regexp_replace(path, '^\$\.?', ''), '.') $$;
CREATE OR REPLACE FUNCTION round(double precision, integer) RETURNS numeric LANGUAGE sql IMMUTABLE AS
$$ SELECT round($1::numeric, $2) $$;
"""


def _connect(host: str, port: int, dbname: str, user: str, password: str, wait: float = 0.0) -> Any:
    import psycopg

    deadline = time.monotonic() + wait
    while True:
        try:
            return psycopg.connect(host=host, port=port, dbname=dbname, user=user, password=password,
                                   connect_timeout=5)
        except psycopg.OperationalError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(1)


def load(database: Path, host: str, port: int, owner_password: str, reader: str = "billing_reader",
         table: str = "billing", wait: float = 90.0) -> int:
    """Copy `table` of the DuckDB file into PostgreSQL (database and owner `billing`), grant `reader` SELECT only;
    returns the row count. Idempotent: the table is recreated."""
    src = duckdb.connect(str(database), read_only=True)
    try:
        cols = src.execute("SELECT column_name, data_type FROM information_schema.columns WHERE table_name = ? "
                           "ORDER BY ordinal_position", [table]).fetchall()
        if not cols:
            raise SqlError("error", f"no table {table!r} in {database}")
        ddl = ", ".join(f"{name} {PG_TYPES.get(str(kind).split('(')[0], 'text')}" for name, kind in cols)
        with _connect(host, port, "billing", "billing", owner_password, wait=wait) as con:
            con.execute(f"DROP TABLE IF EXISTS {table}")
            con.execute(f"CREATE TABLE {table} ({ddl})")
            cursor = src.execute(f'SELECT * FROM "{table}"')
            with con.cursor().copy(f"COPY {table} FROM STDIN") as copy:
                while batch := cursor.fetchmany(10_000):
                    for row in batch:
                        copy.write_row(row)
            con.execute(COMPAT_SQL)
            con.execute(f"GRANT CONNECT ON DATABASE billing TO {reader}")
            con.execute(f"GRANT USAGE ON SCHEMA public TO {reader}")
            con.execute(f"GRANT SELECT ON {table} TO {reader}")
            con.execute(f"ANALYZE {table}")
            (count,) = con.execute(f"SELECT count(*) FROM {table}").fetchone() or (0,)
        return int(count)
    finally:
        src.close()


class PostgresBillingDatabase:
    """A read-only session on the billing database in PostgreSQL. Thread-safe (one query at a time)."""

    def __init__(self, host: str, port: int, user: str, password: str, dbname: str = "billing",
                 timeout: float = DEFAULT_TIMEOUT) -> None:
        import psycopg

        self.timeout = timeout
        self._lock = threading.Lock()
        try:
            self._con = _connect(host, port, dbname, user, password)
        except psycopg.Error as exc:
            raise SqlError("error", f"cannot reach the billing database: {str(exc).strip()[:200]}") from None
        self._con.execute("SET default_transaction_read_only = on")
        self._con.execute(f"SET statement_timeout = {int(timeout * 1000)}")
        self._con.commit()

    def close(self) -> None:
        with self._lock:
            self._con.close()

    def query(self, sql: str, limit: int = DEFAULT_LIMIT, offset: int = 0) -> QueryResult:
        import psycopg

        statement = checked_query(sql, limit, offset)
        with self._lock:
            started = dt.datetime.now()
            try:
                cursor = self._con.execute(statement)
                columns = [d.name for d in cursor.description or []]
                types = [_type_name(d.type_code) for d in cursor.description or []]
                rows = cursor.fetchmany(offset + limit + 1)
            except psycopg.errors.QueryCanceled:
                raise SqlError("timeout", f"the query ran longer than {self.timeout:g} s and was stopped") from None
            except (psycopg.errors.InsufficientPrivilege, psycopg.errors.ReadOnlySqlTransaction) as exc:
                raise SqlError("denied", f"not allowed: {_first(exc)}") from None
            except psycopg.Error as exc:
                raise SqlError("error", _first(exc)) from None
            finally:
                self._con.rollback()
            seconds = (dt.datetime.now() - started).total_seconds()
        page = rows[offset:offset + limit]
        return QueryResult(columns, types, [[json_value(v) for v in row] for row in page], offset,
                           len(rows) > offset + limit, seconds)

    def describe(self, table: str) -> dict[str, Any]:
        with self._lock:
            try:
                cols = self._con.execute(
                    "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = %s "
                    "ORDER BY ordinal_position", [table]).fetchall()
                if not cols:
                    raise SqlError("error", f"no table {table!r}")
                (rows,) = self._con.execute(f'SELECT count(*) FROM "{table}"').fetchone() or (0,)
                first, last = self._con.execute(
                    f'SELECT min(chargeperiodstart), max(chargeperiodend) FROM "{table}"').fetchone() or (None, None)
            finally:
                self._con.rollback()
        return {"table": table, "rows": int(rows), "columns": [{"name": c, "type": t} for c, t in cols],
                "charge_periods": {"first_charge_period_start": json_value(first),
                                   "last_charge_period_end": json_value(last)}}


def _type_name(oid: int) -> str:
    import psycopg

    info = psycopg.adapters.types.get(oid)
    return info.name if info is not None else str(oid)


def _first(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else exc.__class__.__name__
