"""The control family: scoped actions on the application (restart, scale, set_env, rollback, toggle_flag).

These are the tools as agents see them; the backends that carry them out (podman, Kubernetes, a fake) are
`orchestrator.gateway.control`."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from ..context import RunContext
from .base import Args, ServiceArgs, Tool, ToolResult


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


TOOLS: tuple[Tool[Any], ...] = (
    Tool("restart", "Restart every instance of a service, or one instance.", RestartArgs, "control", "control",
         restart, acts=True),
    Tool("scale", "Set a service's number of instances.", ScaleArgs, "control", "control", scale, acts=True),
    Tool("set_env", "Set environment variables on a service's instances.", SetEnvArgs, "control", "control",
         set_env, acts=True),
    Tool("rollback", "Roll a service back to the image and configuration it was deployed with.",
         ServiceArgs, "control", "control", rollback, acts=True),
    Tool("toggle_flag", "Switch a feature flag on or off.", ToggleFlagArgs, "control", "control", toggle_flag,
         acts=True),
)
