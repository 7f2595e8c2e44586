"""The changes family: the environment's change journal (deploys, frontend releases, feature-flag switches).

What a deploy pipeline and a feature-flag console record, served newest first. An entry says what changed and when,
never why: a fault that ships a release is one release among others. Each entry's `id` is an evidence id a diagnosis
can cite (`change:<service>:<what>:<ms>`).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from .. import paging
from ..context import RunContext
from ..times import TIME_HELP, to_ns
from .base import PAGE_DESCRIPTION, Args, TimeArg, Tool, ToolResult, pinned_now, visible_window


class GetRecentChangesArgs(Args):
    service: str | None = Field(None, description="Only changes of this service (or `flags` for feature flags).")
    since: TimeArg | None = Field(None, description=f"Only changes at or after this time. {TIME_HELP}.")
    limit: int = Field(50, ge=1, le=200, description="Changes per page.")
    page: str | None = Field(None, description=PAGE_DESCRIPTION)


def get_recent_changes(ctx: RunContext, args: GetRecentChangesArgs) -> ToolResult:
    service = None
    if args.service is not None:
        ctx.scope.refuse_internal("service", args.service)
        service = ctx.scope.normalize(args.service)
    query = args.model_dump()
    cursor = paging.decode(args.page, query)
    now = pinned_now(ctx, cursor)
    since_ns, until_ns = visible_window(ctx, now, args.since, None)
    entries: list[dict[str, Any]] = [
        e for e in ctx.evidence.changes()
        if (since_ns is None or float(e["time"]) * 1e9 >= since_ns) and float(e["time"]) * 1e9 <= until_ns
        and (service is None or e.get("service") == service)]
    entries.reverse()  # newest first
    body, next_page = paging.page_of(entries, paging.Cursor(cursor.offset, to_ns(now)), args.limit, query)
    return ToolResult(body, next_page)


TOOLS: tuple[Tool[Any], ...] = (
    Tool("get_recent_changes", "Recent changes to the environment, newest first: deploys, frontend releases and "
         "rollbacks, feature-flag switches (id, time, service, kind, summary, source, details). The id is an evidence "
         "id.", GetRecentChangesArgs, "observe", "changes", get_recent_changes),
)
