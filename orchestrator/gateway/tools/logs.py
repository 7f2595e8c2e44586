"""The logs family: search the application's log records (OpenTelemetry form, in the run's telemetry store)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from .. import paging
from ..context import RunContext
from ..times import TIME_HELP, to_ns
from .base import PAGE_DESCRIPTION, Args, TimeArg, Tool, ToolResult, pinned_now, visible_window

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


def search_logs(ctx: RunContext, args: SearchLogsArgs) -> ToolResult:
    service = ctx.scope.service("service", args.service) if args.service is not None else None
    query = args.model_dump()
    cursor = paging.decode(args.page, query)
    now = pinned_now(ctx, cursor)
    since_ns, until_ns = visible_window(ctx, now, args.since, args.until)
    page = ctx.store().search_logs(service=service, since_ns=since_ns, until_ns=until_ns, severity_min=args.severity,
                                   contains=args.contains, trace_id=args.trace_id, limit=args.limit,
                                   offset=cursor.offset, hidden_services=ctx.scope.hidden_services)
    next_page = paging.Cursor(page.next_offset, to_ns(now)).encode(query) if page.next_offset is not None else None
    return ToolResult({"items": page.items, "total": page.total, "offset": page.offset,
                       "returned": len(page.items), "until_ns": until_ns}, next_page)


TOOLS: tuple[Tool[Any], ...] = (
    Tool("search_logs", "Search the application's log records (newest first) by service, text, minimum "
         "severity, trace id and time window. Paged; the answer says how many records match in total.",
         SearchLogsArgs, "observe", "logs", search_logs),
)
