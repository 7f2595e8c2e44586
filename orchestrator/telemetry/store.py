"""Embedded DuckDB query engine over a run's telemetry directory.

Layout read: ``<telemetry_dir>/traces/*.jsonl`` (spans) and ``<telemetry_dir>/logs/*.jsonl`` (log records), one
OpenTelemetry-shaped JSON object per line, one file per service instance, appended to while we read.

Design:

* **No cache; every query scans the files** with ``read_ndjson`` and an explicit column list, so schema inference
  never runs and an odd line cannot change a column's type. ``ignore_errors`` turns an invalid line (garbage, a
  partially written last line) into an all-NULL row, which the base views drop (``traceId``/``spanId``/start time,
  resp. ``timeUnixNano``, must be present). A field of the wrong type becomes NULL without losing the line.
* **Threading**: one in-memory DuckDB database per store, holding no tables. Each query opens its own
  ``cursor()`` (a separate DuckDB connection to that database, ~10 us) under a short lock and closes it afterwards,
  so any number of threads (the HTTP tool gateway) may call one store concurrently; DuckDB releases the GIL while
  executing.
* The file list is taken from the directory at query time and passed as a parameter; a directory that is missing or
  empty gives empty results. A file that vanishes between listing and reading makes the query retry with a fresh list.
* Time windows are half-open: ``since_ns <= t < until_ns`` (spans by start time, traces by their first span's start).
  Paging is stable for a fixed window; while files grow, pin ``until_ns`` to page through a consistent snapshot.
* A span is an error when its status code is ERROR or its ``http.response.status_code`` is >= 500.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb

from .types import LogRecord, Page, ServiceCall, ServiceErrors, Span, TraceSummary

MAX_LIMIT = 1000
"""Largest page size; a bigger `limit` is clamped (the returned Page says so and `next_offset` continues)."""

SEVERITY_NUMBERS: dict[str, int] = {
    "TRACE": 1,
    "DEBUG": 5,
    "INFO": 9,
    "WARN": 13,
    "WARNING": 13,
    "ERROR": 17,
    "FATAL": 21,
    "CRITICAL": 21,
}

_RESOURCE = 'STRUCT("service.name" VARCHAR, "service.instance.id" VARCHAR)'

_SPAN_COLUMNS = {
    "resource": _RESOURCE,
    "traceId": "VARCHAR",
    "spanId": "VARCHAR",
    "parentSpanId": "VARCHAR",
    "name": "VARCHAR",
    "kind": "VARCHAR",
    "startTimeUnixNano": "BIGINT",
    "endTimeUnixNano": "BIGINT",
    "attributes": "JSON",
    "status": "STRUCT(code VARCHAR, message VARCHAR)",
}

_LOG_COLUMNS = {
    "resource": _RESOURCE,
    "timeUnixNano": "BIGINT",
    "severityText": "VARCHAR",
    "severityNumber": "INTEGER",
    "body": "VARCHAR",
    "attributes": "JSON",
    "traceId": "VARCHAR",
    "spanId": "VARCHAR",
}


def _columns_literal(columns: dict[str, str]) -> str:
    return "{" + ", ".join(f"'{name}': '{sql_type}'" for name, sql_type in columns.items()) + "}"


def _reader(param: str, columns: dict[str, str]) -> str:
    return (
        f"read_ndjson(${param}, columns={_columns_literal(columns)}, format='newline_delimited', "
        "ignore_errors=true, maximum_object_size=67108864)"
    )


_HTTP_STATUS = """TRY_CAST(json_extract_string(attributes, '$."http.response.status_code"') AS INTEGER)"""

SPANS_SQL = f"""(
    SELECT
        resource."service.name" AS service,
        resource."service.instance.id" AS instance,
        traceId AS trace_id,
        spanId AS span_id,
        nullif(parentSpanId, '') AS parent_span_id,
        name,
        upper(replace(kind, 'SPAN_KIND_', '')) AS kind,
        startTimeUnixNano AS start_ns,
        endTimeUnixNano AS end_ns,
        attributes,
        {_HTTP_STATUS} AS http_status,
        json_extract_string(attributes, '$."peer.service"') AS peer_service,
        upper(replace(status.code, 'STATUS_CODE_', '')) AS status_code,
        status.message AS status_message,
        (coalesce(upper(replace(status.code, 'STATUS_CODE_', '')) = 'ERROR', false)
            OR coalesce({_HTTP_STATUS} >= 500, false)) AS is_error
    FROM {_reader("span_files", _SPAN_COLUMNS)}
    WHERE traceId IS NOT NULL AND traceId <> '' AND spanId IS NOT NULL AND spanId <> ''
        AND startTimeUnixNano IS NOT NULL
)"""

_SEVERITY_FROM_TEXT = (
    "CASE upper(severityText) "
    + " ".join(f"WHEN '{text}' THEN {number}" for text, number in SEVERITY_NUMBERS.items())
    + " END"
)
_TEXT_FROM_SEVERITY = (
    "CASE WHEN severityNumber >= 21 THEN 'FATAL' WHEN severityNumber >= 17 THEN 'ERROR' "
    "WHEN severityNumber >= 13 THEN 'WARN' WHEN severityNumber >= 9 THEN 'INFO' "
    "WHEN severityNumber >= 5 THEN 'DEBUG' WHEN severityNumber >= 1 THEN 'TRACE' END"
)

LOGS_SQL = f"""(
    SELECT
        timeUnixNano AS time_ns,
        resource."service.name" AS service,
        resource."service.instance.id" AS instance,
        coalesce(severityText, {_TEXT_FROM_SEVERITY}) AS severity,
        coalesce(severityNumber, {_SEVERITY_FROM_TEXT}) AS severity_number,
        body,
        attributes,
        nullif(traceId, '') AS trace_id,
        nullif(spanId, '') AS span_id
    FROM {_reader("log_files", _LOG_COLUMNS)}
    WHERE timeUnixNano IS NOT NULL
)"""

# The match query is inlined twice, not shared as a CTE: materialising every match costs ~3x a second scan.
_PAGE_SQL = """
SELECT * FROM (SELECT count(*) AS total FROM ({matches})) AS counted
LEFT JOIN (SELECT * FROM ({matches}) ORDER BY {order} LIMIT $limit OFFSET $offset) AS page ON true
ORDER BY {order}
"""


def _severity_number(severity: str | int) -> int:
    if isinstance(severity, int):
        return severity
    try:
        return SEVERITY_NUMBERS[severity.strip().upper()]
    except KeyError:
        raise ValueError(f"unknown severity {severity!r}; use one of {sorted(SEVERITY_NUMBERS)} or a number") from None


def _check_paging(limit: int, offset: int) -> int:
    if limit < 1:
        raise ValueError(f"limit must be >= 1, got {limit}")
    if offset < 0:
        raise ValueError(f"offset must be >= 0, got {offset}")
    return min(limit, MAX_LIMIT)


def _window(column: str, since_ns: int | None, until_ns: int | None, params: dict[str, Any]) -> list[str]:
    conds = []
    if since_ns is not None:
        conds.append(f"{column} >= $since_ns")
        params["since_ns"] = since_ns
    if until_ns is not None:
        conds.append(f"{column} < $until_ns")
        params["until_ns"] = until_ns
    return conds


def _hide(services: Sequence[str], params: dict[str, Any]) -> list[str]:
    """The condition that leaves out rows of `services` (rows without a service stay)."""
    if not services:
        return []
    params["hidden_services"] = list(services)
    return ["NOT list_contains($hidden_services, coalesce(service, ''))"]


def _where(conds: Sequence[str], keyword: str = "WHERE") -> str:
    return f"{keyword} " + " AND ".join(conds) if conds else ""


def _json_obj(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    try:
        parsed = json.loads(value) if isinstance(value, str) else value
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _ms(start: int | None, end: int | None) -> float | None:
    return None if start is None or end is None else (end - start) / 1e6


class TelemetryStore:
    """Query a run's telemetry directory (see module docstring). Safe to share between threads."""

    def __init__(self, telemetry_dir: Path) -> None:
        self.telemetry_dir = Path(telemetry_dir)
        self._db = duckdb.connect(":memory:")
        self._lock = threading.Lock()

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> TelemetryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- plumbing ---------------------------------------------------------------------------------------------------

    def _files(self, kind: str) -> list[str]:
        directory = self.telemetry_dir / kind
        try:
            return sorted(str(p) for p in directory.glob("*.jsonl") if p.is_file())
        except OSError:
            return []

    @contextmanager
    def _cursor(self) -> Iterator[duckdb.DuckDBPyConnection]:
        with self._lock:
            cursor = self._db.cursor()
        try:
            yield cursor
        finally:
            cursor.close()

    def _query(self, sql: str, params: dict[str, Any], kinds: Sequence[str]) -> list[dict[str, Any]] | None:
        """Run `sql` over the current files of `kinds` (bound as $span_files / $log_files).

        Returns None when any needed directory has no files. Retries when a file vanished mid-query.
        """
        for attempt in range(3):
            bound = dict(params)
            for kind in kinds:
                files = self._files(kind)
                if not files:
                    return None
                bound["span_files" if kind == "traces" else "log_files"] = files
            try:
                with self._cursor() as cursor:
                    cursor.execute(sql, bound)
                    names = [d[0] for d in cursor.description or []]
                    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
            except duckdb.IOException:
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def _page_query(
        self, matches: str, order: str, params: dict[str, Any], kinds: Sequence[str], limit: int, offset: int
    ) -> tuple[list[dict[str, Any]], int]:
        """Count all `matches` and fetch one page of them in one statement."""
        sql = _PAGE_SQL.format(matches=matches, order=order)
        rows = self._query(sql, {**params, "limit": limit, "offset": offset}, kinds)
        if not rows:
            return [], 0
        total = int(rows[0]["total"])
        # With an offset past the end, the LEFT JOIN yields one all-NULL page row next to the count; the first
        # ordering column is never NULL in a real row.
        key = order.split()[0]
        return [row for row in rows if row[key] is not None], total

    # -- logs -------------------------------------------------------------------------------------------------------

    def search_logs(
        self,
        service: str | None = None,
        since_ns: int | None = None,
        until_ns: int | None = None,
        severity_min: str | int | None = None,
        contains: str | None = None,
        trace_id: str | None = None,
        limit: int = 100,
        offset: int = 0,
        hidden_services: Sequence[str] = (),
    ) -> Page[LogRecord]:
        """Log records, newest first. `severity_min` is a name (INFO, WARN, ...) or an OTel severity number;
        `contains` is a case-insensitive substring of the body. Records of `hidden_services` are left out."""
        limit = _check_paging(limit, offset)
        params: dict[str, Any] = {}
        conds = _window("time_ns", since_ns, until_ns, params)
        conds += _hide(hidden_services, params)
        if service is not None:
            conds.append("service = $service")
            params["service"] = service
        if severity_min is not None:
            conds.append("severity_number >= $severity_min")
            params["severity_min"] = _severity_number(severity_min)
        if contains:
            conds.append("strpos(lower(body), $contains) > 0")
            params["contains"] = contains.lower()
        if trace_id is not None:
            conds.append("trace_id = $trace_id")
            params["trace_id"] = trace_id.strip().lower()
        matches = f"SELECT * FROM {LOGS_SQL} {_where(conds)}"
        order = "time_ns DESC, service, instance, span_id, body"
        rows, total = self._page_query(matches, order, params, ["logs"], limit, offset)
        items: list[LogRecord] = [
            {
                "time_ns": row["time_ns"],
                "service": row["service"],
                "instance": row["instance"],
                "severity": row["severity"],
                "severity_number": row["severity_number"],
                "body": row["body"],
                "attributes": _json_obj(row["attributes"]),
                "trace_id": row["trace_id"],
                "span_id": row["span_id"],
            }
            for row in rows
        ]
        return Page.build(items, total, offset, limit)

    # -- traces -----------------------------------------------------------------------------------------------------

    def get_traces(
        self,
        service: str | None = None,
        since_ns: int | None = None,
        until_ns: int | None = None,
        errors_only: bool = False,
        limit: int = 20,
        offset: int = 0,
        hidden_services: Sequence[str] = (),
    ) -> Page[TraceSummary]:
        """Trace summaries, newest first. A trace matches the window by its first span's start and `service` when
        any of its spans belongs to that service. The root is the earliest span without a parent (the earliest
        span while the root is not written yet); `duration_ms` spans the first start to the last end. Spans of
        `hidden_services` are left out before that (their callees' spans become the roots)."""
        limit = _check_paging(limit, offset)
        params: dict[str, Any] = {}
        having = _window("start_ns", since_ns, until_ns, params)
        hide = _where(_hide(hidden_services, params))
        if service is not None:
            having.append("list_contains(services, $service)")
            params["service"] = service
        if errors_only:
            having.append("error_count > 0")
        matches = f"""
            SELECT * FROM (
                SELECT
                    trace_id,
                    coalesce(arg_min(name, start_ns) FILTER (WHERE parent_span_id IS NULL),
                             arg_min(name, start_ns)) AS root_name,
                    coalesce(arg_min(service, start_ns) FILTER (WHERE parent_span_id IS NULL),
                             arg_min(service, start_ns)) AS root_service,
                    min(start_ns) AS start_ns,
                    max(end_ns) AS end_ns,
                    count(*) AS span_count,
                    count(*) FILTER (WHERE is_error) AS error_count,
                    list_sort(list(DISTINCT service) FILTER (WHERE service IS NOT NULL)) AS services
                FROM {SPANS_SQL} {hide}
                GROUP BY trace_id
            ) {_where(having)}"""
        order = "start_ns DESC, trace_id"
        rows, total = self._page_query(matches, order, params, ["traces"], limit, offset)
        items: list[TraceSummary] = [
            {
                "trace_id": row["trace_id"],
                "root_name": row["root_name"],
                "root_service": row["root_service"],
                "start_ns": row["start_ns"],
                "end_ns": row["end_ns"],
                "duration_ms": _ms(row["start_ns"], row["end_ns"]),
                "span_count": int(row["span_count"]),
                "error_count": int(row["error_count"]),
                "services": list(row["services"] or []),
            }
            for row in rows
        ]
        return Page.build(items, total, offset, limit)

    def get_trace(self, trace_id: str, hidden_services: Sequence[str] = ()) -> list[Span]:
        """All spans of one trace ordered by start, each with `parent_span_id` and `depth` (0 for roots and for
        spans whose parent is not (yet) in the files, or is a span of `hidden_services`, which are left out).
        Empty when the trace is unknown."""
        params: dict[str, Any] = {"trace_id": trace_id.strip().lower()}
        conds = ["trace_id = $trace_id", *_hide(hidden_services, params)]
        sql = f"SELECT * FROM {SPANS_SQL} {_where(conds)} ORDER BY start_ns, span_id"
        rows = self._query(sql, params, ["traces"]) or []
        parents = {row["span_id"]: row["parent_span_id"] for row in rows}

        def depth(span_id: str) -> int:
            seen = {span_id}
            level = 0
            parent = parents.get(span_id)
            while parent is not None and parent in parents and parent not in seen:
                seen.add(parent)
                level += 1
                parent = parents[parent]
            return level

        return [
            {
                "trace_id": row["trace_id"],
                "span_id": row["span_id"],
                "parent_span_id": row["parent_span_id"],
                "depth": depth(row["span_id"]),
                "service": row["service"],
                "instance": row["instance"],
                "name": row["name"],
                "kind": row["kind"],
                "start_ns": row["start_ns"],
                "end_ns": row["end_ns"],
                "duration_ms": _ms(row["start_ns"], row["end_ns"]),
                "status_code": row["status_code"],
                "status_message": row["status_message"],
                "http_status": row["http_status"],
                "error": bool(row["is_error"]),
                "attributes": _json_obj(row["attributes"]),
            }
            for row in rows
        ]

    # -- aggregates -------------------------------------------------------------------------------------------------

    def service_calls(self, since_ns: int | None = None, until_ns: int | None = None) -> list[ServiceCall]:
        """Caller -> callee edges measured from CLIENT spans started in the window. The callee is the service of
        the CLIENT span's child SERVER span, else the CLIENT span's `peer.service`; calls with neither are left
        out. `errors` counts calls where the CLIENT span or its SERVER child is an error; `p95_ms` is the
        caller-side latency."""
        params: dict[str, Any] = {}
        window = _window("start_ns", since_ns, until_ns, params)
        sql = f"""
            WITH spans AS MATERIALIZED (
                SELECT trace_id, span_id, parent_span_id, service, kind, peer_service, start_ns, end_ns, is_error
                FROM {SPANS_SQL} WHERE kind IN ('CLIENT', 'SERVER')
            ),
            client AS (
                SELECT * FROM spans WHERE kind = 'CLIENT' {_where(window, "AND")}
            ),
            server AS (
                SELECT trace_id, parent_span_id, arg_min(service, start_ns) AS service, bool_or(is_error) AS is_error
                FROM spans WHERE kind = 'SERVER' AND parent_span_id IS NOT NULL
                GROUP BY trace_id, parent_span_id
            )
            SELECT
                client.service AS source,
                coalesce(server.service, client.peer_service) AS target,
                count(*) AS calls,
                count(*) FILTER (WHERE client.is_error OR coalesce(server.is_error, false)) AS errors,
                quantile_cont(client.end_ns - client.start_ns, 0.95) / 1e6 AS p95_ms
            FROM client
            LEFT JOIN server ON server.trace_id = client.trace_id AND server.parent_span_id = client.span_id
            WHERE client.service IS NOT NULL AND coalesce(server.service, client.peer_service) IS NOT NULL
            GROUP BY ALL
            ORDER BY source, target"""
        rows = self._query(sql, params, ["traces"]) or []
        return [
            {
                "source": row["source"],
                "target": row["target"],
                "calls": int(row["calls"]),
                "errors": int(row["errors"]),
                "p95_ms": None if row["p95_ms"] is None else float(row["p95_ms"]),
            }
            for row in rows
        ]

    def error_summary(self, since_ns: int | None = None, until_ns: int | None = None) -> list[ServiceErrors]:
        """Per service, from its SERVER spans started in the window: requests, errors, error rate, p95 latency."""
        params: dict[str, Any] = {}
        conds = ["kind = 'SERVER'", "service IS NOT NULL", *_window("start_ns", since_ns, until_ns, params)]
        sql = f"""
            SELECT service, count(*) AS requests, count(*) FILTER (WHERE is_error) AS errors,
                   quantile_cont(end_ns - start_ns, 0.95) / 1e6 AS p95_ms
            FROM {SPANS_SQL} {_where(conds)}
            GROUP BY service ORDER BY service"""
        rows = self._query(sql, params, ["traces"]) or []
        return [
            {
                "service": row["service"],
                "requests": int(row["requests"]),
                "errors": int(row["errors"]),
                "error_rate": int(row["errors"]) / int(row["requests"]),
                "p95_ms": None if row["p95_ms"] is None else float(row["p95_ms"]),
            }
            for row in rows
        ]
