"""The alerts family: the run's firing alerts (live: its Alertmanager; frozen: as Alertmanager answered at handover)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from .. import paging
from ..context import RunContext
from .base import PAGE_DESCRIPTION, Args, Tool, ToolResult


class GetAlertsArgs(Args):
    service: str | None = Field(None, description="Only alerts whose `service` label is this service.")
    limit: int = Field(50, ge=1, le=200, description="Alerts per page.")
    page: str | None = Field(None, description=PAGE_DESCRIPTION)


def get_alerts(ctx: RunContext, args: GetAlertsArgs) -> ToolResult:
    if args.service is not None:
        ctx.scope.refuse_internal("service", args.service)
    alerts = [a for a in ctx.evidence.alerts()
              if args.service is None or (a.get("labels") or {}).get("service") == ctx.scope.normalize(args.service)]
    alerts.sort(key=lambda a: (str(a["startsAt"]), str(a["alertname"]), str(a["fingerprint"])))
    cursor = paging.decode(args.page, args.model_dump())
    body, next_page = paging.page_of(alerts, cursor, args.limit, args.model_dump())
    return ToolResult(body, next_page)


TOOLS: tuple[Tool[Any], ...] = (
    Tool("get_alerts", "Active alerts (not silenced or inhibited) from the run's Alertmanager: alertname, labels "
         "(service, instance_id, severity, signal), annotations (summary), startsAt.",
         GetAlertsArgs, "observe", "alerts", get_alerts),
)
