"""The gateway's tools, defined once: name, description, argument model, category, evidence family and handler.

REST (`rest.py`), MCP (`mcp_server.py`) and the OpenAPI document are all generated from `TOOLS`, so the three can
never disagree about what a tool takes. Argument models are strict pydantic models (no coercion, no unknown fields):
their JSON schema is what agents see, and a wrong type is reported as `invalid` naming the field.

Handlers take the run context and the validated arguments and return a `ToolResult`; they raise `ToolError` for
anything else. Lists that can be long are paged (`limit` + opaque `page` token) and say how many there are in total.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from . import paging
from .context import RunContext
from .errors import ErrorCode, ToolError, invalid
from .httpjson import get_json, post_json
from .promql_scope import check_query, reach, visible_series
from .times import DURATION_HELP, TIME_HELP, parse_duration, parse_time, to_ns

Category = Literal["observe", "control"]
Family = Literal["alerts", "metrics", "logs", "traces", "topology", "control", "billing", "cost"]


@dataclass(frozen=True)
class ToolResult:
    result: Any
    next_page: str | None = None


A = TypeVar("A", bound=BaseModel)


@dataclass(frozen=True)
class Tool(Generic[A]):
    name: str
    description: str
    args: type[A]
    category: Category
    family: Family
    handler: Callable[[RunContext, A], ToolResult]

    def input_schema(self) -> dict[str, Any]:
        """The argument model's JSON schema without pydantic's generated titles and null defaults (noise for a
        model reading it, and dropped by the OpenAPI renderer anyway)."""
        schema = self.args.model_json_schema()
        schema.pop("title", None)
        for prop in schema.get("properties", {}).values():
            prop.pop("title", None)
            if "default" in prop and prop["default"] is None:
                del prop["default"]
        return schema

    def run(self, ctx: RunContext, args: BaseModel) -> ToolResult:
        assert isinstance(args, self.args)
        return self.handler(ctx, args)


class Args(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")


TimeArg = str | float
PAGE_DESCRIPTION = "The `next_page` token of the previous answer; repeat every other argument unchanged."


# -- alerts ---------------------------------------------------------------------------------------------------------

class GetAlertsArgs(Args):
    service: str | None = Field(None, description="Only alerts whose `service` label is this service.")
    limit: int = Field(50, ge=1, le=200, description="Alerts per page.")
    page: str | None = Field(None, description=PAGE_DESCRIPTION)


def get_alerts(ctx: RunContext, args: GetAlertsArgs) -> ToolResult:
    if args.service is not None:
        ctx.scope.refuse_internal("service", args.service)
    raw = get_json(ctx.endpoint("alertmanager"), "/api/v2/alerts",
                   {"active": "true", "silenced": "false", "inhibited": "false"}, what="Alertmanager")
    if not isinstance(raw, list):
        raise ToolError("backend_error", "Alertmanager answered an unexpected document")
    alerts = []
    for alert in raw:
        labels = alert.get("labels") or {}
        if args.service is not None and labels.get("service") != ctx.scope.normalize(args.service):
            continue
        alerts.append({
            "alertname": labels.get("alertname"),
            "labels": labels,
            "annotations": alert.get("annotations") or {},
            "startsAt": alert.get("startsAt"),
            "state": (alert.get("status") or {}).get("state"),
            "fingerprint": alert.get("fingerprint"),
        })
    alerts.sort(key=lambda a: (str(a["startsAt"]), str(a["alertname"]), str(a["fingerprint"])))
    cursor = paging.decode(args.page, args.model_dump())
    body, next_page = paging.page_of(alerts, cursor, args.limit, args.model_dump())
    return ToolResult(body, next_page)


# -- metrics --------------------------------------------------------------------------------------------------------

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
    prometheus = ctx.endpoint("prometheus")
    known: dict[str, list[str]] = {}

    def label_values(label: str) -> list[str]:
        if label not in known:
            answer = get_json(prometheus, f"/api/v1/label/{label}/values", {}, what="Prometheus")
            values = answer.get("data") if isinstance(answer, dict) else None
            known[label] = [str(v) for v in values] if isinstance(values, list) else []
        return known[label]

    check_query(args.query, label_values)
    query = args.model_dump()
    cursor = paging.decode(args.page, query)
    now = _now(ctx, cursor)
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
    answer = get_json(prometheus, path, params, what="Prometheus", query_field="query")
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


# -- logs and traces ------------------------------------------------------------------------------------------------

Severity = Literal["TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL"]


class SearchLogsArgs(Args):
    service: str | None = Field(None, description="Only this service's log records.")
    contains: str | None = Field(None, min_length=1, description="Case-insensitive substring of the message.")
    severity: Severity | None = Field(None, description="Minimum severity.")
    trace_id: str | None = Field(None, min_length=1, description="Only records of this trace.")
    since: TimeArg | None = Field(None, description=f"Records at or after this time. {TIME_HELP}.")
    until: TimeArg | None = Field(None, description="Records before this time (default: when the first page "
                                  "was asked for, so pages stay consistent while logs grow).")
    limit: int = Field(100, ge=1, le=1000, description="Records per page (newest first).")
    page: str | None = Field(None, description=PAGE_DESCRIPTION)


def _now(ctx: RunContext, cursor: paging.Cursor) -> float:
    """The time the first page was asked for: later pages resolve `now` and relative times against it, so every
    page belongs to one snapshot."""
    return cursor.pin / 1e9 if cursor.pin is not None else ctx.clock()


def _window(ctx: RunContext, now: float, since: TimeArg | None, until: TimeArg | None) -> tuple[int | None, int]:
    """The records' time window, clamped to the run's visible window (see `GatewayOptions.visible_since`)."""
    until_ns = to_ns(parse_time("until", until, now) if until is not None else now)
    since_ns = to_ns(parse_time("since", since, now)) if since is not None else None
    floor = ctx.options.visible_since
    if floor is not None:
        if until_ns <= to_ns(floor):
            raise invalid("until", f"before this run's window, which starts at {floor:.3f} (Unix time): earlier "
                          "records belong to another run on this environment")
        since_ns = max(since_ns or 0, to_ns(floor))
    if since_ns is not None and since_ns >= until_ns:
        raise invalid("since", "must be before until")
    return since_ns, until_ns


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


def search_logs(ctx: RunContext, args: SearchLogsArgs) -> ToolResult:
    service = ctx.scope.service("service", args.service) if args.service is not None else None
    query = args.model_dump()
    cursor = paging.decode(args.page, query)
    now = _now(ctx, cursor)
    since_ns, until_ns = _window(ctx, now, args.since, args.until)
    page = ctx.store().search_logs(service=service, since_ns=since_ns, until_ns=until_ns, severity_min=args.severity,
                                   contains=args.contains, trace_id=args.trace_id, limit=args.limit,
                                   offset=cursor.offset, hidden_services=ctx.scope.hidden_services)
    next_page = paging.Cursor(page.next_offset, to_ns(now)).encode(query) if page.next_offset is not None else None
    return ToolResult({"items": page.items, "total": page.total, "offset": page.offset,
                       "returned": len(page.items), "until_ns": until_ns}, next_page)


class GetTracesArgs(Args):
    trace_id: str | None = Field(None, min_length=1, description="One trace: all its spans, ordered by start, "
                                 "with depth. Without it: trace summaries, newest first.")
    service: str | None = Field(None, description="Only traces with a span of this service.")
    errors_only: bool = Field(False, description="Only traces with an error span (status ERROR or HTTP >= 500).")
    since: TimeArg | None = Field(None, description=f"Traces started at or after this time. {TIME_HELP}.")
    until: TimeArg | None = Field(None, description="Traces started before this time (default: when the first "
                                  "page was asked for).")
    limit: int | None = Field(None, ge=1, le=1000, description="Traces per page (default 20), or spans per page "
                              "with trace_id (default 200).")
    page: str | None = Field(None, description=PAGE_DESCRIPTION)


def get_traces(ctx: RunContext, args: GetTracesArgs) -> ToolResult:
    query = args.model_dump()
    cursor = paging.decode(args.page, query)
    if args.trace_id is not None:
        for name in ("service", "since", "until"):
            if query[name] is not None:
                raise invalid(name, "not used with trace_id (a trace is returned whole, page by page)")
        spans = ctx.store().get_trace(args.trace_id, hidden_services=ctx.scope.hidden_services)
        if ctx.options.visible_since is not None and spans and spans[0]["start_ns"] < to_ns(ctx.options.visible_since):
            spans = []  # a trace of an earlier run on this environment
        if not spans:
            raise ToolError("not_found", f"trace_id: no span of trace {args.trace_id!r} is recorded",
                            field="trace_id")
        body, next_page = paging.page_of(list(spans), cursor, args.limit or 200, query)
        return ToolResult({"trace_id": args.trace_id.strip().lower(), **body}, next_page)
    service = ctx.scope.service("service", args.service) if args.service is not None else None
    now = _now(ctx, cursor)
    since_ns, until_ns = _window(ctx, now, args.since, args.until)
    page = ctx.store().get_traces(service=service, since_ns=since_ns, until_ns=until_ns,
                                  errors_only=args.errors_only, limit=args.limit or 20, offset=cursor.offset,
                                  hidden_services=ctx.scope.hidden_services)
    next_page = paging.Cursor(page.next_offset, to_ns(now)).encode(query) if page.next_offset is not None else None
    return ToolResult({"items": page.items, "total": page.total, "offset": page.offset,
                       "returned": len(page.items), "until_ns": until_ns}, next_page)


# -- topology -------------------------------------------------------------------------------------------------------

class NoArgs(Args):
    pass


def get_topology(ctx: RunContext, args: NoArgs) -> ToolResult:
    return ToolResult(ctx.scope.topology)


# -- control --------------------------------------------------------------------------------------------------------

class ServiceArgs(Args):
    service: str = Field(min_length=1, description="A service (or datastore) of the application.")


class RestartArgs(ServiceArgs):
    instance: str | None = Field(None, min_length=1, description="Only this instance (e.g. frontend-2); "
                                 "default: every instance of the service.")


class ScaleArgs(ServiceArgs):
    replicas: int = Field(ge=0, le=10, description="Number of instances wanted (0 stops them all).")


class SetEnvArgs(ServiceArgs):
    env: dict[str, str] = Field(min_length=1, description="Environment variables to set on every instance "
                                "(instances are recreated).")


class ToggleFlagArgs(Args):
    flag: str = Field(min_length=1, description="Feature flag name (list_services shows them).")
    state: Literal["on", "off"] = Field(description="Switch the flag's default variant to on or off.")


def list_services(ctx: RunContext, args: NoArgs) -> ToolResult:
    control = ctx.require_control()
    services = [s for s in control.list_services() if s.get("service") in ctx.scope.services]
    try:
        flags: list[str] | None = control.list_flags()
    except ToolError as exc:
        if exc.code != "not_supported":
            raise
        flags = None
    return ToolResult({"services": services, "feature_flags": flags})


def describe_service(ctx: RunContext, args: ServiceArgs) -> ToolResult:
    return ToolResult(ctx.require_control().describe_service(ctx.scope.service("service", args.service)))


def restart(ctx: RunContext, args: RestartArgs) -> ToolResult:
    service = ctx.scope.service("service", args.service)
    instance = None
    if args.instance is not None:
        ctx.scope.refuse_internal("instance", args.instance)
        instance = ctx.scope.normalize(args.instance)
    return ToolResult(ctx.require_control().restart(service, instance))


def scale(ctx: RunContext, args: ScaleArgs) -> ToolResult:
    return ToolResult(ctx.require_control().scale(ctx.scope.service("service", args.service), args.replicas))


def set_env(ctx: RunContext, args: SetEnvArgs) -> ToolResult:
    return ToolResult(ctx.require_control().set_env(ctx.scope.service("service", args.service), args.env))


def rollback(ctx: RunContext, args: ServiceArgs) -> ToolResult:
    return ToolResult(ctx.require_control().rollback(ctx.scope.service("service", args.service)))


def toggle_flag(ctx: RunContext, args: ToggleFlagArgs) -> ToolResult:
    ctx.scope.refuse_internal("flag", args.flag)
    return ToolResult(ctx.require_control().toggle_flag(args.flag.strip(), args.state == "on"))


# -- billing (FinOps) ------------------------------------------------------------------------------------------------

class QuerySqlArgs(Args):
    sql: str = Field(min_length=1, max_length=20_000, description="One read-only SELECT (or WITH ... SELECT) "
                     "statement in DuckDB's SQL dialect over the table `billing` (FOCUS columns).")
    limit: int = Field(100, ge=1, le=1000, description="Rows per page.")
    page: str | None = Field(None, description=PAGE_DESCRIPTION)


def query_sql(ctx: RunContext, args: QuerySqlArgs) -> ToolResult:
    from orchestrator.finops.sql import SqlError

    query = args.model_dump()
    cursor = paging.decode(args.page, query)
    try:
        result = ctx.billing().query(args.sql, limit=args.limit, offset=cursor.offset)
    except SqlError as exc:
        code: ErrorCode = "denied" if exc.code == "denied" else "invalid"
        raise ToolError(code, f"sql: {exc.message}", field="sql") from None
    next_page = paging.Cursor(cursor.offset + len(result.rows)).encode(query) if result.more else None
    return ToolResult(result.to_dict(), next_page)


def describe_billing_schema(ctx: RunContext, args: NoArgs) -> ToolResult:
    from orchestrator.finops.sql import SqlError

    try:
        return ToolResult(ctx.billing().describe(ctx.billing_table))
    except SqlError as exc:
        raise ToolError("backend_error", exc.message) from None


# -- cost (FinOps cost incidents on the live shop) -------------------------------------------------------------------

class SetPolicyArgs(Args):
    service: str = Field(min_length=1, description="Service whose scaling rule changes (it must be in the policy).")
    target_cpu_percent: float | int | None = Field(None, gt=0, le=1000, description="CPU utilisation the "
                                                   "autoscaler keeps, in percent of the CPU request.")
    min_replicas: int | None = Field(None, ge=1, description="Fewest instances.")
    max_replicas: int | None = Field(None, ge=1, description="Most instances.")


class SetBudgetArgs(Args):
    service: str = Field(min_length=1, description="Service whose budget changes.")
    hourly_usd: float | int = Field(gt=0, description="The new budget in USD per hour.")


def _cost(ctx: RunContext) -> dict[str, Any]:
    if ctx.cost is None:
        raise ToolError("not_supported", "this environment has no cost model, autoscaler or budgets")
    return ctx.cost


def get_autoscaler_policy(ctx: RunContext, args: NoArgs) -> ToolResult:
    from orchestrator.finops import cost

    section = _cost(ctx)
    try:
        policy = cost.read_policy(section["policy_file"])
    except cost.PolicyError as exc:
        raise ToolError("backend_error", str(exc)) from None
    try:
        status = json.loads(Path(section["status_file"]).read_text())
    except (OSError, ValueError):
        status = None
    return ToolResult({"policy": policy, "last_loop": status,
                       "rule": "desired = ceil(replicas x CPU utilisation / target_cpu_percent), within "
                               "[min_replicas, max_replicas]; utilisation = CPU used / CPU requested"})


def set_autoscaler_policy(ctx: RunContext, args: SetPolicyArgs) -> ToolResult:
    from orchestrator.finops import cost

    section = _cost(ctx)
    service = ctx.scope.service("service", args.service)
    try:
        policy = cost.read_policy(section["policy_file"])
        rule = policy["services"].get(service)
        if rule is None:
            raise invalid("service", f"the policy has no rule for {service!r}; policed: "
                          f"{', '.join(sorted(policy['services']))}")
        before = dict(rule)
        changes = {k: v for k, v in args.model_dump().items() if k != "service" and v is not None}
        if not changes:
            raise invalid("target_cpu_percent", "give at least one of target_cpu_percent, min_replicas, max_replicas")
        rule.update(changes)
        cost.write_policy(section["policy_file"], policy)
    except cost.PolicyError as exc:
        raise invalid("service", str(exc)) from None
    return ToolResult({"service": service, "previous": before, "current": rule,
                       "note": "the autoscaler applies it on its next loop"})


def get_budgets(ctx: RunContext, args: NoArgs) -> ToolResult:
    from orchestrator.finops import cost

    section = _cost(ctx)
    try:
        budgets = cost.read_budgets(section["budget_file"])
    except cost.PolicyError as exc:
        raise ToolError("backend_error", str(exc)) from None
    model = {k: section.get(k) for k in ("cpu_price_per_core_hour", "memory_price_per_gb_hour", "cpu_request_cores",
                                         "memory_request_gb")}
    return ToolResult({
        "budgets_hourly_usd": budgets,
        "alert": f"CostOverBudget fires when a service's hourly cost exceeds its budget by more than "
                 f"{float(section.get('budget_variance') or 0.2):.0%}",
        "cost_model": model,
        "metrics": {"cost": "opsbench:service_cost_hourly_usd", "cpu_cost": "opsbench:service_cpu_cost_hourly_usd",
                    "memory_cost": "opsbench:service_memory_cost_hourly_usd",
                    "cpu_efficiency": "opsbench:service_cpu_efficiency",
                    "memory_efficiency": "opsbench:service_memory_efficiency",
                    "replicas": "opsbench:service_replicas", "budget": cost.BUDGET_METRIC},
    })


def set_budget(ctx: RunContext, args: SetBudgetArgs) -> ToolResult:
    from orchestrator.finops import cost

    section = _cost(ctx)
    service = ctx.scope.service("service", args.service)
    try:
        budgets = cost.read_budgets(section["budget_file"])
        previous = budgets.get(service)
        budgets[service] = float(args.hourly_usd)
        cost.write_budgets(section["budget_file"], budgets)
    except cost.PolicyError as exc:
        raise invalid("hourly_usd", str(exc)) from None
    post_json(ctx.endpoint("prometheus"), "/-/reload", what="Prometheus")
    return ToolResult({"service": service, "previous": previous, "current": budgets[service],
                       "note": "Prometheus reloaded its rules"})


# -- the registry ---------------------------------------------------------------------------------------------------

TOOLS: tuple[Tool[Any], ...] = (
    Tool("get_alerts", "Active alerts (not silenced or inhibited) from the run's Alertmanager: alertname, labels "
         "(service, instance_id, severity, signal), annotations (summary), startsAt.",
         GetAlertsArgs, "observe", "alerts", get_alerts),
    Tool("query_metrics", "Run a PromQL query against the run's Prometheus: an instant query (optionally at "
         "`time`) or a range query (`start`, optional `end` and `step`). Series are paged. Metrics carry "
         "`service` and `instance_id` labels; see e.g. http_server_requests_total, "
         "http_server_request_duration_seconds_bucket, process_resident_memory_bytes, container_running.",
         QueryMetricsArgs, "observe", "metrics", query_metrics),
    Tool("search_logs", "Search the application's log records (newest first) by service, text, minimum "
         "severity, trace id and time window. Paged; the answer says how many records match in total.",
         SearchLogsArgs, "observe", "logs", search_logs),
    Tool("get_traces", "Trace summaries (root operation, duration, span and error counts, services) filtered by "
         "service, errors and time window, or with `trace_id` all spans of one trace.",
         GetTracesArgs, "observe", "traces", get_traces),
    Tool("get_topology", "The application's entities (services, instances, datastores, configuration) and their "
         "edges: `owns` (a service owns its instances and configuration) and `calls`.",
         NoArgs, "observe", "topology", get_topology),
    Tool("list_services", "The application's services with their instances and state, and the names of the "
         "feature flags.", NoArgs, "control", "control", list_services),
    Tool("describe_service", "One service's instances in detail: state, restarts, OOM kill, exit code, image, "
         "command, memory and CPU limits, environment (secrets redacted).",
         ServiceArgs, "control", "control", describe_service),
    Tool("restart", "Restart every instance of a service, or one instance.", RestartArgs, "control", "control",
         restart),
    Tool("scale", "Set a service's number of instances.", ScaleArgs, "control", "control", scale),
    Tool("set_env", "Set environment variables on a service's instances.", SetEnvArgs, "control", "control",
         set_env),
    Tool("rollback", "Roll a service back to the image and configuration it was deployed with.",
         ServiceArgs, "control", "control", rollback),
    Tool("toggle_flag", "Switch a feature flag on or off.", ToggleFlagArgs, "control", "control", toggle_flag),
    Tool("query_sql", "Run one read-only SQL SELECT (DuckDB dialect) over the cloud billing table `billing`, in "
         "the FinOps Foundation's FOCUS format: BilledCost, EffectiveCost, ListCost, ChargePeriodStart/End, "
         "ChargeCategory (Usage, Tax, Credit), ProviderName, ServiceName, ServiceCategory, SubAccountId/Name, "
         "RegionId, PricingUnit, ResourceId, Tags (JSON text, e.g. json_extract_string(Tags, '$.application')). "
         "The query is linted first (one SELECT only); rows are paged.",
         QuerySqlArgs, "observe", "billing", query_sql),
    Tool("describe_billing_schema", "The billing table's columns and types, its row count and the span of its "
         "charge periods.", NoArgs, "observe", "billing", describe_billing_schema),
    Tool("get_autoscaler_policy", "The CPU autoscaler's policy (per service: target_cpu_percent, min_replicas, "
         "max_replicas) and what its last loop saw and did (replicas, CPU utilisation, desired).",
         NoArgs, "observe", "cost", get_autoscaler_policy),
    Tool("set_autoscaler_policy", "Change one service's scaling rule (target_cpu_percent, min_replicas, "
         "max_replicas); the autoscaler applies it on its next loop.", SetPolicyArgs, "control", "cost",
         set_autoscaler_policy),
    Tool("get_budgets", "The hourly budget of each service, the CostOverBudget alert's threshold, the cost model "
         "(prices, requests) and the names of the cost metrics.", NoArgs, "observe", "cost", get_budgets),
    Tool("set_budget", "Set one service's hourly budget (the CostOverBudget alert's reference).", SetBudgetArgs,
         "control", "cost", set_budget),
)
BY_NAME: dict[str, Tool[Any]] = {t.name: t for t in TOOLS}

PROFILES: dict[str, Callable[[Tool[Any]], bool]] = {
    "full": lambda t: True,
    "no-traces": lambda t: t.family != "traces",
    "metrics-only": lambda t: t.family in ("alerts", "metrics", "topology"),
    "observe-only": lambda t: t.category == "observe",
}
"""Which tools a run offers. A tool outside the profile is not listed, and calling it is `denied`."""


def profile_tools(profile: str) -> list[Tool[Any]]:
    try:
        keep = PROFILES[profile]
    except KeyError:
        raise ValueError(f"unknown tool profile {profile!r}; profiles: {', '.join(PROFILES)}") from None
    return [t for t in TOOLS if keep(t)]
