"""The alerts family: the run's firing alerts from its Alertmanager."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from .. import paging
from ..context import RunContext
from ..errors import ToolError
from ..httpjson import get_json
from .base import PAGE_DESCRIPTION, Args, Tool, ToolResult


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


TOOLS: tuple[Tool[Any], ...] = (
    Tool("get_alerts", "Active alerts (not silenced or inhibited) from the run's Alertmanager: alertname, labels "
         "(service, instance_id, severity, signal), annotations (summary), startsAt.",
         GetAlertsArgs, "observe", "alerts", get_alerts),
)
