"""FinOps cost incidents: proximity scores (ITBench E.4.2) on hand-made cases, the autoscaler's rule, the policy and
budget files, the cost rules the role renders, the gateway's cost tools and the baseline agent's decisions."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import jinja2
import promql_parser
import pytest
import yaml

from orchestrator import paths
from orchestrator.agents import finops as agent
from orchestrator.finops import cost
from orchestrator.gateway import FakeControl, load_context
from orchestrator.gateway import tools as gw_tools
from orchestrator.gateway.errors import ToolError
from orchestrator.gateway.tools import cost as cost_tools
from orchestrator.generation.effects import MODEL_FACTS

ROLE = paths.ROLES_DIR / "env_shop_finops"
POLICY = {"interval_seconds": 5, "scale_down_stabilization_seconds": 30, "tolerance": 0.1,
          "services": {"frontend": {"target_cpu_percent": 60, "min_replicas": 2, "max_replicas": 6}}}


# -- proximity ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("observed", "optimal", "expected"), [
    (0.00632, 0.00632, 1.0),     # optimal
    (0.01896, 0.00632, 0.0),     # three times the optimum: 1 - 2 = -1, floored at 0
    (0.0079, 0.00632, 0.75),     # 25 % above
    (0.00474, 0.00632, 0.75),    # 25 % below: symmetric
    (0.45, 0.3, 0.5),            # efficiency 45 % against 30 %
    (0.0, 0.3, 0.0),             # nothing used: as far as 2x
])
def test_proximity_hand_made(observed: float, optimal: float, expected: float) -> None:
    assert cost.proximity(observed, optimal) == pytest.approx(expected)


def test_proximity_undefined_cases() -> None:
    assert cost.proximity(None, 1.0) is None
    assert cost.proximity(1.0, 0.0) is None
    assert cost.proximity(math.nan, 1.0) is None


def test_score_cost_uses_the_ground_truth_optimum() -> None:
    truth = {"finops": {"cost": {"service": "frontend", "optimal": {
        "cpu_hourly_usd": 0.00632, "memory_hourly_usd": 0.001, "cpu_efficiency": 0.3, "memory_efficiency": 0.4}}}}
    observed = {"cpu_hourly_usd": 0.00632, "memory_hourly_usd": 0.0015, "cpu_efficiency": 0.15,
                "memory_efficiency": None, "replicas": 2.0}
    scores = cost.score_cost(truth, observed)
    assert scores["status"] == "scored" and scores["service"] == "frontend"
    assert scores["proximity_cpu_hourly_usd"] == 1.0
    assert scores["proximity_memory_hourly_usd"] == pytest.approx(0.5)
    assert scores["proximity_cpu_efficiency"] == pytest.approx(0.5)
    assert scores["proximity_memory_efficiency"] is None
    assert scores["proximity_mean"] == pytest.approx((1.0 + 0.5 + 0.5) / 3, abs=1e-4)
    assert scores["observed_replicas"] == 2.0
    assert cost.score_cost({"finops": {}}, observed) == {"status": "no_ground_truth"}


def test_observe_reads_each_figure_and_survives_a_failing_prometheus() -> None:
    asked: list[str] = []

    def query(promql: str) -> list[dict[str, Any]]:
        asked.append(promql)
        if "memory_efficiency" in promql:
            raise OSError("unreachable")
        return [] if "replicas" in promql else [{"value": [0, "0.25"]}]

    got = cost.observe(query, "frontend")
    assert got["cpu_hourly_usd"] == 0.25 and got["memory_efficiency"] is None and got["replicas"] is None
    assert all('service="frontend"' in q and q.startswith("avg_over_time((") for q in asked)
    for q in asked:
        promql_parser.parse(q)


# -- the autoscaler's rule ------------------------------------------------------------------------------------------

RULE = {"target_cpu_percent": 60, "min_replicas": 2, "max_replicas": 6}


@pytest.mark.parametrize(("current", "util", "expected"), [
    (2, 0.30, 2),    # half the target: 1, clamped to min 2
    (2, 0.63, 2),    # within the 10 % tolerance
    (2, 1.20, 4),    # twice the target
    (2, 3.00, 6),    # clamped to max
    (6, 0.10, 2),    # idle replicas go
    (3, None, 3),    # no metrics: keep
    (1, None, 2),    # below min: raise to min
])
def test_recommend_is_the_hpa_rule(current: int, util: float | None, expected: int) -> None:
    assert cost.recommend(current, util, RULE) == expected


def test_a_low_target_scales_an_idle_service_to_its_maximum() -> None:
    assert cost.recommend(2, 0.30, {**RULE, "target_cpu_percent": 5}) == 6


def test_scale_down_waits_for_the_stabilisation_window() -> None:
    history: list[tuple[float, int]] = []
    assert cost.stabilised(history, 0.0, 30, 2, 6) == 6          # up at once
    assert cost.stabilised(history, 10.0, 30, 6, 2) == 6         # the 6 of 10 s ago still counts
    assert cost.stabilised(history, 41.0, 30, 6, 2) == 2         # it left the window
    assert history == [(41.0, 2)]                                 # pruned to the window


# -- files ----------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("change", "message"), [
    ({"services": {}}, "services"),
    ({"services": {"frontend": {"target_cpu_percent": 0, "min_replicas": 1, "max_replicas": 2}}}, "target"),
    ({"services": {"frontend": {"target_cpu_percent": 50, "min_replicas": 3, "max_replicas": 2}}}, "above"),
    ({"services": {"frontend": {"target_cpu_percent": 50, "min_replicas": 1}}}, "exactly"),
    ({"services": {"frontend": {**RULE, "min_replicas": True}}}, "min_replicas"),
    ({"interval_seconds": -1}, "interval_seconds"),
])
def test_check_policy_names_the_problem(change: dict[str, Any], message: str) -> None:
    with pytest.raises(cost.PolicyError, match=message):
        cost.check_policy({**POLICY, **change})


def test_policy_and_budgets_round_trip(tmp_path: Path) -> None:
    cost.write_policy(tmp_path / "policy.json", POLICY)
    assert cost.read_policy(tmp_path / "policy.json") == POLICY
    cost.write_budgets(tmp_path / "budget.yml", {"frontend": 0.0073952, "catalog": 0.01})
    assert cost.read_budgets(tmp_path / "budget.yml") == {"frontend": 0.0073952, "catalog": 0.01}
    with pytest.raises(cost.PolicyError):
        cost.write_budgets(tmp_path / "budget.yml", {"frontend": -1.0})
    assert cost.read_budgets(tmp_path / "budget.yml")["frontend"] == 0.0073952  # unchanged by the refusal


def _render(template: str, **variables: Any) -> str:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(ROLE / "templates"), trim_blocks=True,
                             undefined=jinja2.StrictUndefined)
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    return env.get_template(template).render(ansible_managed="managed", opsbench_run_id="r1",
                                             **{**defaults, **variables})


def test_role_budget_file_is_what_the_tools_read(tmp_path: Path) -> None:
    """The deploy writes budgets with a Jinja template, the gateway with cost.budget_rules: both must agree."""
    (tmp_path / "b.yml").write_text(_render("budget_rules.yml.j2", env_shop_finops_budget_values={"frontend": 0.0074}))
    assert cost.read_budgets(tmp_path / "b.yml") == {"frontend": 0.0074}


def test_default_budget_is_min_replicas_times_the_request_cost() -> None:
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    instance = (defaults["env_shop_finops_cpu_request"] * defaults["env_shop_finops_cpu_price"]
                + defaults["env_shop_finops_memory_request"] * defaults["env_shop_finops_memory_price"])
    # The scenarios' ground truth states these figures: keep them in step with the defaults.
    assert round(2 * instance, 7) == 0.0073952
    assert round(2 * defaults["env_shop_finops_cpu_request"] * defaults["env_shop_finops_cpu_price"], 6) == 0.00632


def test_cost_rules_render_to_valid_promql() -> None:
    doc = yaml.safe_load(_render("cost_rules.yml.j2"))
    rules = [r for g in doc["groups"] for r in g["rules"]]
    recorded = {r["record"] for r in rules if "record" in r}
    assert {"opsbench:service_cpu_cost_hourly_usd", "opsbench:service_memory_cost_hourly_usd",
            "opsbench:service_cpu_efficiency", "opsbench:service_memory_efficiency",
            "opsbench:service_replicas"} <= recorded
    for rule in rules:
        promql_parser.parse(rule["expr"])
    alert = next(r for r in rules if r.get("alert") == "CostOverBudget")
    assert "> 0.2" in alert["expr"] and alert["labels"]["signal"] == "cost"
    # Every metric the evaluator and the autoscaler read is recorded here.
    for expr in [*cost.COST_QUERIES.values()]:
        name = expr.split("(", 1)[1].split("{", 1)[0]
        assert name in recorded


def test_topology_is_the_shops_plus_the_cost_entities() -> None:
    shop = yaml.safe_load((paths.ROLES_DIR / "env_shop" / "files" / "topology.yml").read_text())
    mine = yaml.safe_load((ROLE / "files" / "topology.yml").read_text())
    # The shop's graph as its deploy publishes it (the effect models' facts are the generator's, not the graph's).
    def graph(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{k: v for k, v in item.items() if k not in MODEL_FACTS} for item in items]
    assert all(e in mine["entities"] for e in graph(shop["entities"]))
    assert all(e in mine["edges"] for e in graph(shop["edges"]))
    assert {"autoscaler", "budgets"} <= {e["id"] for e in mine["entities"]}


# -- gateway tools --------------------------------------------------------------------------------------------------

@pytest.fixture
def ctx(tmp_path: Path) -> Any:
    env = tmp_path / "env"
    (env / "finops").mkdir(parents=True)
    (env / "config").mkdir()
    cost.write_policy(env / "finops" / "policy.json", POLICY)
    cost.write_budgets(env / "config" / "budget_rules.yml", {"frontend": 0.0073952})
    (env / "finops" / "autoscaler-status.json").write_text(json.dumps(
        {"services": {"frontend": {"replicas": 2, "cpu_utilisation_percent": 31.0, "desired": 2}}}))
    topology = yaml.safe_load((ROLE / "files" / "topology.yml").read_text())
    (tmp_path / "environment.json").write_text(json.dumps({
        "application": "shop_finops", "endpoints": {"prometheus": "http://127.0.0.1:9"}, "topology": topology,
        "cost": {"policy_file": str(env / "finops" / "policy.json"),
                 "status_file": str(env / "finops" / "autoscaler-status.json"),
                 "budget_file": str(env / "config" / "budget_rules.yml"), "budget_variance": "0.2",
                 "cpu_price_per_core_hour": "0.0316"}}))
    return load_context(tmp_path, run_id="r1", control=FakeControl({"frontend": ["frontend-1", "frontend-2"]}))


def _call(ctx: Any, name: str, **args: Any) -> Any:
    tool = gw_tools.BY_NAME[name]
    return tool.run(ctx, tool.args(**args)).result


def test_cost_tools_read_and_change_the_policy(ctx: Any) -> None:
    got = _call(ctx, "get_autoscaler_policy")
    assert got["policy"]["services"]["frontend"]["target_cpu_percent"] == 60
    assert got["last_loop"]["services"]["frontend"]["cpu_utilisation_percent"] == 31.0
    changed = _call(ctx, "set_autoscaler_policy", service="frontend", target_cpu_percent=70)
    assert changed["previous"]["target_cpu_percent"] == 60 and changed["current"]["target_cpu_percent"] == 70
    assert cost.read_policy(ctx.cost["policy_file"])["services"]["frontend"]["target_cpu_percent"] == 70
    with pytest.raises(ToolError, match="no rule for 'cart'"):
        _call(ctx, "set_autoscaler_policy", service="cart", target_cpu_percent=70)
    with pytest.raises(ToolError, match="above max"):
        _call(ctx, "set_autoscaler_policy", service="frontend", min_replicas=9)
    with pytest.raises(ToolError) as refused:
        _call(ctx, "set_autoscaler_policy", service="prometheus", target_cpu_percent=70)
    assert refused.value.code == "denied"


def test_set_budget_rewrites_the_rules_and_reloads_prometheus(ctx: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    posted: list[tuple[str, str]] = []
    monkeypatch.setattr(cost_tools, "post_json", lambda url, path, what: posted.append((url, path)))
    assert _call(ctx, "get_budgets")["budgets_hourly_usd"] == {"frontend": 0.0073952}
    result = _call(ctx, "set_budget", service="frontend", hourly_usd=0.02)
    assert result["previous"] == 0.0073952 and result["current"] == 0.02
    assert cost.read_budgets(ctx.cost["budget_file"]) == {"frontend": 0.02}
    assert posted == [("http://127.0.0.1:9", "/-/reload")]


def test_cost_tools_only_where_the_environment_has_a_cost_section(tmp_path: Path) -> None:
    (tmp_path / "environment.json").write_text(json.dumps({"application": "shop", "endpoints": {}}))
    plain = load_context(tmp_path, run_id="r1", control=FakeControl({"frontend": ["frontend-1"]}))
    with pytest.raises(ToolError) as exc:
        _call(plain, "get_budgets")
    assert exc.value.code == "not_supported"


def test_cost_files_outside_the_run_are_not_served(tmp_path: Path) -> None:
    (tmp_path / "environment.json").write_text(json.dumps({"application": "shop_finops", "endpoints": {}, "cost": {
        "policy_file": "/etc/passwd", "status_file": str(tmp_path / "s"), "budget_file": str(tmp_path / "b")}}))
    assert load_context(tmp_path, run_id="r1").cost is None


# -- the baseline agent ---------------------------------------------------------------------------------------------

class FakeTools:
    def __init__(self, target: float, util: float, replicas: int) -> None:
        self.policy = {"services": {"frontend": {**RULE, "target_cpu_percent": target}}}
        self.status = {"services": {"frontend": {"replicas": replicas, "cpu_utilisation_percent": util}}}
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.next_page = None

    def __call__(self, name: str, **args: Any) -> Any:
        self.calls.append((name, args))
        answers = {
            "get_alerts": {"items": [{"alertname": "CostOverBudget", "labels": {"service": "frontend"}}]},
            "get_autoscaler_policy": {"policy": self.policy, "last_loop": self.status},
            "get_budgets": {"budgets_hourly_usd": {"frontend": 0.0073952}},
            "query_metrics": {"items": [{"metric": {}, "value": [0, "0.0221856"]}]},
        }
        return answers.get(name, {"ok": True})


def test_agent_fixes_a_misconfigured_autoscaler() -> None:
    tools = FakeTools(target=5, util=10.0, replicas=6)
    out = agent.cost_incident(tools, {"diagnose", "mitigate"})  # type: ignore[arg-type]
    root = [e for e in out["entities"] if e.get("root_cause")]
    assert root == [{"id": "autoscaler", "root_cause": True, "layer": "configuration",
                     "fault_type": "scaling_misconfiguration"}]
    assert ("set_autoscaler_policy", {"service": "frontend", "target_cpu_percent": agent.DEFAULT_TARGET}) in tools.calls
    assert ("scale", {"service": "frontend", "replicas": 2}) in tools.calls
    assert not any(name == "set_budget" for name, _ in tools.calls)


def test_agent_updates_a_stale_budget_for_real_load() -> None:
    tools = FakeTools(target=60, util=65.0, replicas=6)
    out = agent.cost_incident(tools, {"diagnose", "mitigate"})  # type: ignore[arg-type]
    assert [e["id"] for e in out["entities"] if e.get("root_cause")] == ["budgets"]
    budget = [args for name, args in tools.calls if name == "set_budget"]
    # 6 replicas cost 0.0221856 USD/h: the budget covers a 7th (the autoscaler's next step up) plus 10 %.
    assert budget == [{"service": "frontend", "hourly_usd": round(0.0221856 / 6 * 7 * 1.1, 6)}]
    assert not any(name in ("scale", "set_autoscaler_policy") for name, _ in tools.calls)


def test_agent_diagnosis_only_changes_nothing() -> None:
    tools = FakeTools(target=5, util=10.0, replicas=6)
    out = agent.cost_incident(tools, {"diagnose"})  # type: ignore[arg-type]
    assert out["incident"] is True and "actions" not in out
    assert {name for name, _ in tools.calls} <= {"get_alerts", "get_autoscaler_policy", "get_budgets", "query_metrics"}


# -- the autoscaler loop (one step at a time, with an in-memory backend) ---------------------------------------------

def test_autoscaler_step_follows_the_policy_it_re_reads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from orchestrator import autoscaler

    (tmp_path / "env" / "finops").mkdir(parents=True)
    (tmp_path / "environment.json").write_text(json.dumps({"control": {"container_prefix": "ob-r1-"}}))
    policy_file = tmp_path / "env" / "finops" / "policy.json"
    cost.write_policy(policy_file, POLICY)
    scaler = autoscaler.Autoscaler(tmp_path, "r1", "http://127.0.0.1:9")
    fake = FakeControl({"frontend": ["frontend-1", "frontend-2"]})
    scaler.control = fake  # type: ignore[assignment]
    load = {"utilisation": 0.30}
    monkeypatch.setattr(autoscaler, "utilisation", lambda prometheus, service: load["utilisation"])

    status = scaler.step()  # 30 % against a 60 % target: stays at the minimum
    assert status["services"]["frontend"] == {"replicas": 2, "cpu_utilisation_percent": 30.0,
                                              "target_cpu_percent": 60, "desired": 2}
    assert fake.actions == []

    bad = json.loads(policy_file.read_text())
    bad["services"]["frontend"]["target_cpu_percent"] = 5
    policy_file.write_text(json.dumps(bad))
    status = scaler.step()  # the misconfigured target: to the maximum at the same load
    assert status["services"]["frontend"]["scaled"] == "2 -> 6" and fake.actions == [("scale", "frontend", "6")]

    policy_file.write_text("{not json")
    status = scaler.step()  # unreadable: the last good policy (target 5) stays in force
    assert "cannot read" in status["policy_error"] and status["services"]["frontend"]["target_cpu_percent"] == 5
    assert json.loads((tmp_path / "env" / "finops" / "autoscaler-status.json").read_text())["policy_error"]

    cost.write_policy(policy_file, POLICY)
    load["utilisation"] = 0.10  # the same work spread over three times the replicas
    status = scaler.step()  # fixed: 6 replicas at 10 % want 1 -> 2, held by the stabilisation window
    assert status["services"]["frontend"]["desired"] == 6
    scaler.history["frontend"] = []  # the window has passed
    status = scaler.step()
    assert status["services"]["frontend"]["scaled"] == "6 -> 2"
