"""The topology family: the application's entities and edges, and its services as the control backend sees them
(`list_services` and `describe_service` read through the control backend live, so they carry the control category;
they only read, so a frozen replay serves their recorded answers)."""

from __future__ import annotations

from typing import Any

from ..context import RunContext
from .base import NoArgs, ServiceArgs, Tool, ToolResult


def get_topology(ctx: RunContext, args: NoArgs) -> ToolResult:
    return ToolResult(ctx.evidence.topology(ctx.scope))


def list_services(ctx: RunContext, args: NoArgs) -> ToolResult:
    return ToolResult(ctx.evidence.list_services(ctx.scope))


def describe_service(ctx: RunContext, args: ServiceArgs) -> ToolResult:
    return ToolResult(ctx.evidence.describe_service(ctx.scope.service("service", args.service)))


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
