"""The traces family: trace summaries and whole traces from the run's telemetry store."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from .. import paging
from ..context import RunContext
from ..errors import ToolError, invalid
from ..times import TIME_HELP, to_ns
from .base import PAGE_DESCRIPTION, Args, TimeArg, Tool, ToolResult, pinned_now, visible_window


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
    now = pinned_now(ctx, cursor)
    since_ns, until_ns = visible_window(ctx, now, args.since, args.until)
    page = ctx.store().get_traces(service=service, since_ns=since_ns, until_ns=until_ns,
                                  errors_only=args.errors_only, limit=args.limit or 20, offset=cursor.offset,
                                  hidden_services=ctx.scope.hidden_services)
    next_page = paging.Cursor(page.next_offset, to_ns(now)).encode(query) if page.next_offset is not None else None
    return ToolResult({"items": page.items, "total": page.total, "offset": page.offset,
                       "returned": len(page.items), "until_ns": until_ns}, next_page)


TOOLS: tuple[Tool[Any], ...] = (
    Tool("get_traces", "Trace summaries (root operation, duration, span and error counts, services) filtered by "
         "service, errors and time window, or with `trace_id` all spans of one trace.",
         GetTracesArgs, "observe", "traces", get_traces),
)
