"""Cost-alert incidents on the live shop (ITBench App. E, Tables 28-29): the autoscaler policy, the budgets, the
autoscaler's scaling rule and the proximity scores of App. E.4.2.

Three files under the run's `env/` carry the state, and this module is their one reader and writer:

* `finops/policy.json` — the autoscaler policy, re-read by the autoscaler on every loop::

      {"interval_seconds": 5, "scale_down_stabilization_seconds": 30, "tolerance": 0.1,
       "services": {"frontend": {"target_cpu_percent": 60, "min_replicas": 2, "max_replicas": 6}}}

* `config/budget_rules.yml` — the budgets, as a Prometheus rule file with one recording rule per service
  (`opsbench_budget_hourly_usd{service=...}`); the budget alert `CostOverBudget` (roles/env_shop_finops) compares
  each service's hourly cost with it. Writing it is followed by a Prometheus reload.
* `finops/autoscaler-status.json` — what the autoscaler saw and did last (written by the autoscaler only).
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

BUDGET_METRIC = "opsbench_budget_hourly_usd"
POLICY_KEYS = {"target_cpu_percent", "min_replicas", "max_replicas"}
PROXIMITY_METRICS = ("cpu_hourly_usd", "memory_hourly_usd", "cpu_efficiency", "memory_efficiency")
"""ITBench E.4.2: hourly CPU cost, hourly memory cost, workload CPU and memory efficiency."""


class PolicyError(ValueError):
    """A policy or budget document that does not have the expected shape."""


# -- files ----------------------------------------------------------------------------------------------------------

def write_atomic(path: Path, text: str) -> None:
    """Replace `path` with `text` (write, then rename in the same directory): readers see old or new, never half."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except OSError:
        Path(tmp).unlink(missing_ok=True)
        raise


def check_policy(doc: Any) -> dict[str, Any]:
    """The policy, validated; PolicyError naming the first problem."""
    if not isinstance(doc, dict) or not isinstance(doc.get("services"), dict) or not doc["services"]:
        raise PolicyError("the policy needs `services`: a map of service name to its scaling rule")
    for key in ("interval_seconds", "scale_down_stabilization_seconds", "tolerance"):
        if key in doc and (isinstance(doc[key], bool) or not isinstance(doc[key], (int, float)) or doc[key] < 0):
            raise PolicyError(f"{key}: must be a number >= 0")
    for service, rule in doc["services"].items():
        if not isinstance(rule, dict) or set(rule) != POLICY_KEYS:
            raise PolicyError(f"services.{service}: needs exactly {', '.join(sorted(POLICY_KEYS))}")
        target, low, high = rule["target_cpu_percent"], rule["min_replicas"], rule["max_replicas"]
        if isinstance(target, bool) or not isinstance(target, (int, float)) or not 0 < target <= 1000:
            raise PolicyError(f"services.{service}.target_cpu_percent: must be a number in (0, 1000]")
        for name, value in (("min_replicas", low), ("max_replicas", high)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise PolicyError(f"services.{service}.{name}: must be an integer >= 1")
        if low > high:
            raise PolicyError(f"services.{service}: min_replicas is above max_replicas")
    return doc


def read_policy(path: Path) -> dict[str, Any]:
    try:
        return check_policy(json.loads(path.read_text()))
    except (OSError, ValueError) as exc:
        if isinstance(exc, PolicyError):
            raise
        raise PolicyError(f"cannot read the autoscaler policy: {exc}") from None


def write_policy(path: Path, doc: Mapping[str, Any]) -> None:
    write_atomic(path, json.dumps(check_policy(dict(doc)), indent=2, sort_keys=True) + "\n")


def budget_rules(budgets: Mapping[str, float]) -> str:
    """The Prometheus rule file that states `budgets` (service -> USD per hour)."""
    rules = [{"record": BUDGET_METRIC, "expr": f"vector({float(v)!r})", "labels": {"service": s}}
             for s, v in sorted(budgets.items())]
    doc = {"groups": [{"name": "opsbench-budgets", "rules": rules}]}
    return "# Budgets per service in USD per hour (written by OpsBench; read by CostOverBudget).\n" + yaml.safe_dump(
        doc, sort_keys=False)


def read_budgets(path: Path) -> dict[str, float]:
    """service -> USD per hour, from the budget rule file."""
    try:
        doc = yaml.safe_load(path.read_text()) or {}
        out = {}
        for group in doc.get("groups") or []:
            for rule in group.get("rules") or []:
                if rule.get("record") != BUDGET_METRIC:
                    continue
                expr = str(rule["expr"]).strip()
                if not (expr.startswith("vector(") and expr.endswith(")")):
                    raise PolicyError(f"budget of {rule.get('labels')}: not a constant vector(...)")
                out[str(rule["labels"]["service"])] = float(expr[len("vector("):-1])
        return out
    except (OSError, ValueError, KeyError, TypeError, AttributeError, yaml.YAMLError) as exc:
        if isinstance(exc, PolicyError):
            raise
        raise PolicyError(f"cannot read the budgets: {exc}") from None


def write_budgets(path: Path, budgets: Mapping[str, float]) -> None:
    for service, value in budgets.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            raise PolicyError(f"budget of {service}: must be a positive number of USD per hour")
    write_atomic(path, budget_rules(budgets))


# -- the scaling rule ------------------------------------------------------------------------------------------------

def recommend(current: int, utilisation: float | None, rule: Mapping[str, Any], tolerance: float = 0.1) -> int:
    """Kubernetes' HPA rule: ceil(current x utilisation / target), unchanged within the tolerance, clamped to
    [min_replicas, max_replicas]. `utilisation` is CPU used / CPU requested over the running instances (1.0 =
    100 %); None (no metrics yet) keeps the current count (clamped)."""
    low, high = int(rule["min_replicas"]), int(rule["max_replicas"])
    if utilisation is None or current < 1:
        return min(max(current, low), high)
    ratio = utilisation / (float(rule["target_cpu_percent"]) / 100.0)
    desired = current if abs(ratio - 1.0) <= tolerance else math.ceil(current * ratio - 1e-9)
    return min(max(desired, low), high)


def stabilised(history: list[tuple[float, int]], now: float, window: float, current: int, desired: int) -> int:
    """Scale up at once; scale down only to the highest recommendation of the last `window` seconds (HPA's
    scale-down stabilisation). `history` holds (time, recommendation) and is pruned in place."""
    history.append((now, desired))
    history[:] = [(t, d) for t, d in history if now - t <= window]
    if desired >= current:
        return desired
    return min(current, max(d for _, d in history))


# -- proximity (ITBench App. E.4.2) ----------------------------------------------------------------------------------

def proximity(observed: float | None, optimal: float) -> float | None:
    """1 - |observed - optimal| / optimal, floored at 0 (1 = optimal). None when nothing was observed or the
    optimum is not positive (the formula is undefined)."""
    if observed is None or optimal <= 0 or not math.isfinite(observed):
        return None
    return max(0.0, 1.0 - abs(observed - optimal) / optimal)


def proximity_scores(observed: Mapping[str, float | None], optimal: Mapping[str, float]) -> dict[str, float | None]:
    """`proximity_<metric>` for each of the four E.4.2 metrics the ground truth gives an optimum for."""
    return {f"proximity_{m}": proximity(observed.get(m), float(optimal[m])) for m in PROXIMITY_METRICS
            if m in optimal}


COST_QUERIES = {
    "cpu_hourly_usd": 'sum(opsbench:service_cpu_cost_hourly_usd{{service="{s}"}})',
    "memory_hourly_usd": 'sum(opsbench:service_memory_cost_hourly_usd{{service="{s}"}})',
    "cpu_efficiency": 'avg(opsbench:service_cpu_efficiency{{service="{s}"}})',
    "memory_efficiency": 'avg(opsbench:service_memory_efficiency{{service="{s}"}})',
    "replicas": 'sum(opsbench:service_replicas{{service="{s}"}})',
}
"""PromQL over the cost model's recording rules (roles/env_shop_finops/templates/cost_rules.yml.j2) for one service."""


def observe(query: Any, service: str, window: str = "30s", step: str = "2s") -> dict[str, float | None]:
    """The service's cost figures averaged over the last `window` (a subquery over the recording rules), through
    `query(promql) -> list of {"value": [t, "v"]}` (prometheus_api_client's custom_query). None where no data."""
    out: dict[str, float | None] = {}
    for name, expr in COST_QUERIES.items():
        try:
            rows = query(f"avg_over_time(({expr.format(s=service)})[{window}:{step}])")
            out[name] = float(rows[0]["value"][1]) if rows else None
        except Exception:  # an unreachable Prometheus scores as nothing observed, never as a crash
            out[name] = None
    return out


def score_cost(ground_truth: Mapping[str, Any], observed: Mapping[str, float | None]) -> dict[str, Any]:
    """The E.4.2 proximity scores of one run from the ground truth's `finops.cost` (service, optimal figures)."""
    spec = (ground_truth.get("finops") or {}).get("cost")
    if not spec:
        return {"status": "no_ground_truth"}
    scores: dict[str, Any] = {"status": "scored", "service": spec["service"]}
    scores.update(proximity_scores(observed, spec["optimal"]))
    scores.update({f"observed_{k}": (None if v is None else round(v, 6)) for k, v in observed.items()})
    values = [v for k, v in scores.items() if k.startswith("proximity_") and v is not None]
    scores["proximity_mean"] = round(sum(values) / len(values), 4) if values else None
    return scores
