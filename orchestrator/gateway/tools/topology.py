"""The topology family: the application's entities and edges, and its services as the control backend sees them
(`list_services` and `describe_service` read through the control backend, so they carry the control category)."""

from __future__ import annotations

from typing import Any

from ..context import RunContext
from ..errors import ToolError
from .base import NoArgs, ServiceArgs, Tool, ToolResult


def get_topology(ctx: RunContext, args: NoArgs) -> ToolResult:
    return ToolResult(ctx.scope.topology)


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


TOOLS: tuple[Tool[Any], ...] = (
    Tool("get_topology", "The application's entities (services, instances, datastores, configuration) and their "
         "edges: `owns` (a service owns its instances and configuration) and `calls`.",
         NoArgs, "observe", "topology", get_topology),
    Tool("list_services", "The application's services with their instances and state, and the names of the "
         "feature flags.", NoArgs, "control", "control", list_services),
    Tool("describe_service", "One service's instances in detail: state, restarts, OOM kill, exit code, image, "
         "command, memory and CPU limits, environment (secrets redacted).",
         ServiceArgs, "control", "control", describe_service),
)
