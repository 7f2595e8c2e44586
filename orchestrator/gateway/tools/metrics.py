"""The metrics family: PromQL against the run's Prometheus, held inside the run's visible window."""

from __future__ import annotations

import math
from typing import Any

from pydantic import Field

from .. import paging
from ..context import RunContext
from ..errors import ToolError, invalid
from ..promql_scope import check_query, reach, visible_series
from ..times import DURATION_HELP, TIME_HELP, parse_duration, parse_time, to_ns
from .base import PAGE_DESCRIPTION, Args, TimeArg, Tool, ToolResult, pinned_now

MAX_POINTS = 11_000
"""Prometheus refuses a range query with more points per series than this."""
DEFAULT_POINTS = 250


class QueryMetricsArgs(Args):
    query: str = Field(min_length=1, description="PromQL expression.")
    time: TimeArg | None = Field(None, description=f"Instant query at this time (default now). {TIME_HELP}.")
    start: TimeArg | None = Field(None, description=f"Range query from this time. {TIME_HELP}.")
    end: TimeArg | None = Field(None, description="Range query until this time (default now).")
    step: str | float | None = Field(None, description=f"Range query resolution ({DURATION_HELP}); default: "
                                     f"about {DEFAULT_POINTS} points.")
    limit: int = Field(50, ge=1, le=500, description="Series per page.")
    page: str | None = Field(None, description=PAGE_DESCRIPTION)


def query_metrics(ctx: RunContext, args: QueryMetricsArgs) -> ToolResult:
    ctx.evidence.prometheus_url()  # not_supported before anything else when there is no Prometheus
    known: dict[str, list[str]] = {}

    def label_values(label: str) -> list[str]:
        if label not in known:
            known[label] = ctx.evidence.label_values(label)
        return known[label]

    check_query(args.query, label_values)
    query = args.model_dump()
    cursor = paging.decode(args.page, query)
    now = pinned_now(ctx, cursor)
    ranged = args.start is not None or args.end is not None or args.step is not None
    if ranged:
        if args.start is None:
            raise invalid("start", "a range query needs `start` (or leave out end and step for an instant query)")
        if args.time is not None:
            raise invalid("time", "give either `time` (instant query) or `start`/`end` (range query)")
        start = _not_before_window(ctx, "start", parse_time("start", args.start, now))
        end = _not_before_window(ctx, "end", parse_time("end", args.end, now) if args.end is not None else now)
        start = _reach_within_window(ctx, args.query, start, end)
        if end <= start:
            raise invalid("end", "must be after start")
        step = parse_duration("step", args.step) if args.step is not None else max(1.0, (end - start) / DEFAULT_POINTS)
        if (end - start) / step > MAX_POINTS:
            raise invalid("step", f"{math.ceil((end - start) / step)} points per series; at most {MAX_POINTS} "
                          "(use a larger step or a shorter range)")
        params = {"query": args.query, "start": f"{start:.3f}", "end": f"{end:.3f}",
                  "step": f"{step:.3f}".rstrip("0").rstrip(".")}
        path = "/api/v1/query_range"
    else:
        at = _not_before_window(ctx, "time", parse_time("time", args.time, now) if args.time is not None else now)
        _reach_within_window(ctx, args.query, at, at)
        params = {"query": args.query, "time": f"{at:.3f}"}
        path = "/api/v1/query"
    answer = ctx.evidence.prometheus(path, params, query_field="query")
    data = answer.get("data") if isinstance(answer, dict) else None
    if not isinstance(data, dict):
        raise ToolError("backend_error", "Prometheus answered an unexpected document")
    kind, result = data.get("resultType"), data.get("result")
    if kind in ("scalar", "string"):
        return ToolResult({"result_type": kind, "value": result})
    series = sorted((s for s in result or [] if visible_series(s.get("metric") or {})),
                    key=lambda s: sorted((s.get("metric") or {}).items()))
    body, next_page = paging.page_of(series, paging.Cursor(cursor.offset, to_ns(now)), args.limit, query)
    return ToolResult({"result_type": kind, **body}, next_page)


def _not_before_window(ctx: RunContext, field: str, at: float) -> float:
    """`at` for a metric query, refused when it lies before the run's visible window; a range start is clamped."""
    floor = ctx.options.visible_since
    if floor is None or at >= floor:
        return at
    if field == "start":
        return floor
    raise invalid(field, f"before this run's window, which starts at {floor:.3f} (Unix time): earlier samples "
                  "belong to another run on this environment")


def _reach_within_window(ctx: RunContext, query: str, start: float, end: float) -> float:
    """The first evaluation time at which ``query`` reads nothing from before the run's visible window: a range
    query's start is moved up to it; a query that cannot be evaluated at all inside the window (an instant query,
    a range that ends too early, an ``@`` before the window) is refused, naming how far it reads back."""
    floor = ctx.options.visible_since
    if floor is None:
        return start
    span = reach(query)
    if any(t < floor for t in span.pinned):
        raise invalid("query", f"an `@` time before this run's window, which starts at {floor:.3f} (Unix time): "
                      "earlier samples belong to another run on this environment")
    earliest = floor + max(span.lookback, 0.0)
    if start >= earliest:
        return start
    if start == end or end < earliest:
        raise invalid("query", f"reads {span.lookback:g}s back (range selectors, subqueries and offsets), to before "
                      f"this run's window, which starts {max(end - floor, 0):.0f}s before the query's "
                      f"{'time' if start == end else 'end'}: earlier samples belong to another run on this "
                      f"environment. Use shorter ranges (at most [{max(int(end - floor), 0)}s]) or a later time")
    return earliest


class GetErrorRateArgs(Args):
    service: str | None = Field(None, description="Only this service (default: every service that served requests).")
    window: str | float = Field("1m", description=f"The rate window ({DURATION_HELP}).")
    time: TimeArg | None = Field(None, description=f"At this time (default now). {TIME_HELP}.")


ERROR_RATE_QUERIES = {
    "requests_per_s": "sum by (service) (rate(http_server_requests_total[{w}]))",
    "errors_per_s": 'sum by (service) (rate(http_server_requests_total{{code=~"5.."}}[{w}]))',
    "client_errors_per_s": 'sum by (service) (rate(http_server_requests_total{{code=~"4.."}}[{w}]))',
}


def get_error_rate(ctx: RunContext, args: GetErrorRateArgs) -> ToolResult:
    """Per service: requests, server errors (5xx) and client errors (4xx) per second, and the 5xx share."""
    ctx.evidence.prometheus_url()
    service = ctx.scope.service("service", args.service) if args.service is not None else None
    seconds = parse_duration("window", args.window)
    window = f"{max(round(seconds), 1)}s"
    at = _not_before_window(ctx, "time", parse_time("time", args.time, ctx.now()) if args.time is not None
                            else ctx.now())
    _reach_within_window(ctx, ERROR_RATE_QUERIES["requests_per_s"].format(w=window), at, at)
    rows: dict[str, dict[str, Any]] = {}
    for key, template in ERROR_RATE_QUERIES.items():
        answer = ctx.evidence.prometheus("/api/v1/query", {"query": template.format(w=window), "time": f"{at:.3f}"})
        for sample in ((answer.get("data") or {}).get("result") or []) if isinstance(answer, dict) else []:
            name = str((sample.get("metric") or {}).get("service") or "")
            if name in ctx.scope.services and (service is None or name == service):
                row = rows.setdefault(name, {"service": name, "evidence_id": f"errors:{name}"})
                row[key] = round(float(sample["value"][1]), 4)
    items = []
    for row in rows.values():
        total = row.setdefault("requests_per_s", 0.0)
        row.setdefault("errors_per_s", 0.0)
        row.setdefault("client_errors_per_s", 0.0)
        row["error_ratio"] = round(row["errors_per_s"] / total, 4) if total > 0 else None
        items.append(row)
    items.sort(key=lambda r: (-(r["error_ratio"] or 0.0), r["service"]))
    return ToolResult({"time": round(at, 3), "window": window, "services": items})


TOOLS: tuple[Tool[Any], ...] = (
    Tool("query_metrics", "Run a PromQL query against the run's Prometheus: an instant query (optionally at "
         "`time`) or a range query (`start`, optional `end` and `step`). Series are paged. Metrics carry "
         "`service` and `instance_id` labels; see e.g. http_server_requests_total, "
         "http_server_request_duration_seconds_bucket, process_resident_memory_bytes, container_running.",
         QueryMetricsArgs, "observe", "metrics", query_metrics),
    Tool("get_error_rate", "Per service, over a window (default 1m): requests per second, server errors (5xx) and "
         "client errors (4xx) per second, and the share of 5xx (error_ratio); worst first. Each row's evidence_id "
         "(errors:<service>) can be cited.", GetErrorRateArgs, "observe", "metrics", get_error_rate),
)
