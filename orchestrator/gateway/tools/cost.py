"""The cost family (FinOps cost incidents on the live shop): the autoscaler's policy and the services' budgets."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import Field

from ..context import RunContext
from ..errors import ToolError, invalid
from ..httpjson import post_json
from .base import Args, NoArgs, Tool, ToolResult


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
    post_json(ctx.evidence.prometheus_url(), "/-/reload", what="Prometheus")
    return ToolResult({"service": service, "previous": previous, "current": budgets[service],
                       "note": "Prometheus reloaded its rules"})


TOOLS: tuple[Tool[Any], ...] = (
    Tool("get_autoscaler_policy", "The CPU autoscaler's policy (per service: target_cpu_percent, min_replicas, "
         "max_replicas) and what its last loop saw and did (replicas, CPU utilisation, desired).",
         NoArgs, "observe", "cost", get_autoscaler_policy),
    Tool("set_autoscaler_policy", "Change one service's scaling rule (target_cpu_percent, min_replicas, "
         "max_replicas); the autoscaler applies it on its next loop.", SetPolicyArgs, "control", "cost",
         set_autoscaler_policy, acts=True),
    Tool("get_budgets", "The hourly budget of each service, the CostOverBudget alert's threshold, the cost model "
         "(prices, requests) and the names of the cost metrics.", NoArgs, "observe", "cost", get_budgets),
    Tool("set_budget", "Set one service's hourly budget (the CostOverBudget alert's reference).", SetBudgetArgs,
         "control", "cost", set_budget, acts=True),
)
