"""The agent's read-only SQL tool over the billing database (DuckDB).

Three layers keep it read-only and inside its data:

1. **Lint**: the text is parsed by DuckDB's own parser (``duckdb.extract_statements``) before anything runs: a parse
   error is reported with DuckDB's message, and only a single ``SELECT`` statement (``WITH ... SELECT``, ``VALUES``
   and set operations parse as SELECT) is accepted; anything else (INSERT, COPY, ATTACH, SET, PRAGMA, several
   statements ...) is refused, naming the statement type.
2. **Connection**: the database file is opened ``read_only`` with ``enable_external_access = false`` and the
   configuration locked, so even a SELECT cannot read or write files (``read_csv``, ``COPY``), attach databases or
   load extensions.
3. **Limits**: at most ``limit`` rows per answer (paged with ``offset``; the answer says whether more remain), a
   time limit per query (the query is interrupted), and values made JSON-safe (dates as ISO text, decimals as
   floats).
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

MAX_LIMIT = 1000
DEFAULT_LIMIT = 100
DEFAULT_TIMEOUT = 20.0


class SqlError(Exception):
    """A refused or failed query. ``code``: lint (not a single SELECT / does not parse), denied, timeout, error."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def lint(sql: str) -> str:
    """The one SELECT statement of ``sql`` (trailing semicolon dropped), or SqlError('lint', why)."""
    text = sql.strip()
    if not text:
        raise SqlError("lint", "empty query")
    try:
        statements = duckdb.extract_statements(text)
    except duckdb.Error as exc:
        raise SqlError("lint", f"the query does not parse: {_first_line(exc)}") from None
    if len(statements) != 1:
        raise SqlError("lint", f"exactly one statement is allowed; got {len(statements)}")
    statement = statements[0]
    kind = str(statement.type).rsplit(".", 1)[-1]
    if kind != "SELECT":
        raise SqlError("lint", f"only read-only SELECT queries are allowed; this is a {kind} statement")
    return str(statement.query).strip().rstrip(";")


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else exc.__class__.__name__


def json_value(value: Any) -> Any:
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else str(value)
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, list | tuple):
        return [json_value(v) for v in value]
    if isinstance(value, dict):
        return {str(k): json_value(v) for k, v in value.items()}
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    return value


def checked_query(sql: str, limit: int, offset: int) -> str:
    """The linted statement of a paged query, after checking the page arguments (shared by every billing store)."""
    if not 1 <= limit <= MAX_LIMIT:
        raise SqlError("lint", f"limit must be between 1 and {MAX_LIMIT}")
    if offset < 0:
        raise SqlError("lint", "offset must be >= 0")
    return lint(sql)


@dataclass(frozen=True)
class QueryResult:
    columns: list[str]
    types: list[str]
    rows: list[list[Any]]
    offset: int
    more: bool
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return {"columns": self.columns, "types": self.types, "rows": self.rows, "offset": self.offset,
                "returned": len(self.rows), "more": self.more, "seconds": round(self.seconds, 4)}


class BillingDatabase:
    """A read-only connection to one DuckDB database file. Thread-safe (one query at a time)."""

    def __init__(self, path: Path, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise SqlError("error", f"no billing database at {self.path}")
        self.timeout = timeout
        self._lock = threading.Lock()
        self._con = duckdb.connect(str(self.path), read_only=True,
                                   config={"enable_external_access": False, "threads": 2})
        self._con.execute("SET lock_configuration = true")

    def close(self) -> None:
        with self._lock:
            self._con.close()

    def query(self, sql: str, limit: int = DEFAULT_LIMIT, offset: int = 0) -> QueryResult:
        statement = checked_query(sql, limit, offset)
        with self._lock:
            timer = threading.Timer(self.timeout, self._con.interrupt)
            started = dt.datetime.now()
            timer.start()
            try:
                cursor = self._con.execute(statement)
                columns = [d[0] for d in cursor.description or []]
                types = [str(d[1]) for d in cursor.description or []]
                rows = cursor.fetchmany(offset + limit + 1)
            except duckdb.InterruptException:
                raise SqlError("timeout", f"the query ran longer than {self.timeout:g} s and was stopped") from None
            except duckdb.PermissionException as exc:
                raise SqlError("denied", f"not allowed: {_first_line(exc)}") from None
            except duckdb.Error as exc:
                raise SqlError("error", _first_line(exc)) from None
            finally:
                timer.cancel()
            seconds = (dt.datetime.now() - started).total_seconds()
        page = rows[offset:offset + limit]
        return QueryResult(columns, types, [[json_value(v) for v in row] for row in page], offset,
                           len(rows) > offset + limit, seconds)

    def describe(self, table: str) -> dict[str, Any]:
        """Columns and types of ``table``, its row count and the range of ChargePeriodStart."""
        with self._lock:
            cols = self._con.execute(
                "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = ? "
                "ORDER BY ordinal_position", [table]).fetchall()
            if not cols:
                raise SqlError("error", f"no table {table!r}")
            (rows,) = self._con.execute(f'SELECT count(*) FROM "{table}"').fetchone() or (0,)
            span = None
            if any(c == "ChargePeriodStart" for c, _ in cols):
                first, last = self._con.execute(
                    f'SELECT min(ChargePeriodStart), max(ChargePeriodEnd) FROM "{table}"').fetchone() or (None, None)
                span = {"first_charge_period_start": json_value(first), "last_charge_period_end": json_value(last)}
        return {"table": table, "rows": int(rows), "columns": [{"name": c, "type": t} for c, t in cols],
                "charge_periods": span}


_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
FROZEN_COMPRESSION_LEVEL = 9
"""zstd level of a frozen billing table: a 36 836-row scenario table is 1.14 MB at 9, 1.32 MB at 3 and 1.09 MB at 19
(which takes five times longer to write)."""


def _table_name(table: str) -> str:
    if not _IDENTIFIER.match(table):
        raise SqlError("error", f"not a plain table name: {table!r}")
    return table


def export_table(database: Path, table: str, dest: Path) -> int:
    """Write `table` of the DuckDB file `database` to the Parquet file `dest` (zstd), rows in their stored order,
    columns and types as the table has them; returns the row count. Nothing else of the database is copied."""
    name = _table_name(table)
    dest.parent.mkdir(parents=True, exist_ok=True)
    with duckdb.connect(str(database), read_only=True) as con:
        con.execute("SET preserve_insertion_order = true")
        con.execute(f"COPY (SELECT * FROM \"{name}\") TO '{_quoted(dest)}' "
                    f"(FORMAT parquet, COMPRESSION zstd, COMPRESSION_LEVEL {FROZEN_COMPRESSION_LEVEL})")
        (rows,) = con.execute(f'SELECT count(*) FROM "{name}"').fetchone() or (0,)
    return int(rows)


def import_table(parquet: Path, database: Path, table: str) -> int:
    """A new DuckDB file `database` holding `table` loaded from `parquet` (rows in file order), made read-only on
    disk: what `BillingDatabase` serves a frozen run. Returns the row count."""
    name = _table_name(table)
    database.parent.mkdir(parents=True, exist_ok=True)
    database.unlink(missing_ok=True)
    with duckdb.connect(str(database)) as con:
        con.execute("SET preserve_insertion_order = true")
        con.execute(f"CREATE TABLE \"{name}\" AS SELECT * FROM read_parquet('{_quoted(parquet)}')")
        (rows,) = con.execute(f'SELECT count(*) FROM "{name}"').fetchone() or (0,)
    database.chmod(0o444)
    return int(rows)


def _quoted(path: Path) -> str:
    return str(path).replace("'", "''")
