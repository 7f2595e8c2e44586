"""Effect models beyond the templates: every fixed single-fault SRE scenario of the local shop whose fault role has
an effect model agrees with what the model derives (templates or not), and the model shapes that are not one
target's own failure (a role acting on one entity, a traffic source as the root cause, a healthy dependency that
the target's configuration breaks) derive what they say."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from orchestrator import paths
from orchestrator.catalog import find_scenario
from orchestrator.errors import SpecInvalid
from orchestrator.generation import effects
from orchestrator.generation.effects import Topology, derive, has_effect_model, is_benign, load_effect_model
from orchestrator.generation.instances import generate
from orchestrator.generation.templates import load_template
from orchestrator.role_topology import load_topology
from orchestrator.spec import spec_files


def _fixed_single_fault() -> list[str]:
    """SRE scenarios of the local shop with one fault whose role has a root-cause effect model (CUJ scenarios
    aside: their ground truth is about a journey's steps; the distractor's control scenario aside: it has no cause)."""
    out = []
    for f in spec_files():
        data = yaml.safe_load(f.read_text())
        env = data.get("environment", {})
        faults = data.get("faults") or []
        if (data["metadata"].get("domain") == "SRE" and env.get("application") == "shop"
                and env.get("backend", "local") == "local" and "-cuj-" not in data["metadata"]["id"]
                and len(faults) == 1 and has_effect_model(faults[0]["role"])
                and not is_benign(faults[0]["role"])):  # a distractor's model derives no ground truth to compare
            out.append(data["metadata"]["id"])
    return sorted(out)


SCENARIOS = _fixed_single_fault()
TOPO = Topology(load_topology("shop") or {})


def test_every_role_with_an_effect_model_has_a_fixed_scenario_here() -> None:
    roles = {r.parent.parent.name for r in (paths.PROJECT_ROOT / "roles").glob("fault_*/meta/effects.yml")
             if not is_benign(r.parent.parent.name)}  # a distractor's model derives no ground truth to compare
    covered = {find_scenario(s).faults[0]["role"] for s in SCENARIOS}
    assert roles <= covered, f"effect models no fixed scenario checks: {sorted(roles - covered)}"


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_effect_model_agrees_with_the_fixed_scenario(scenario: str) -> None:
    """As test_generation's template check, for every fixed single-fault scenario: the root cause, its fault type
    and layer, a chain inside the hand-written one, and only alerts the hand-written ground truth expects."""
    scn = find_scenario(scenario)
    fault = scn.faults[0]
    model = load_effect_model(fault["role"])
    args: dict[str, Any] = fault.get("args") or {}
    source = args.get(model.source_arg) if model.source_arg else None
    derived = derive(model, model.target_in(args), TOPO, source, args)
    fixed = yaml.safe_load(scn.ground_truth_path.read_text())
    root = next(e for e in fixed["entities"] if e.get("rootCause"))
    mine = derived["entities"][0]
    assert (mine["id"], mine["faultType"], mine["layer"]) == (root["id"], root["faultType"], root["layer"])
    pairs = {(p["source"], p["target"]) for p in derived["propagations"]}
    assert pairs and pairs <= {(p["source"], p["target"]) for p in fixed["propagations"]}
    assert {(a["name"], a["entity"]) for a in derived["alerts"]} <= {(a["name"], a["entity"]) for a in fixed["alerts"]}
    assert derived["alerts"], "the model expects no alert: nothing would show the incident"


def test_a_role_acting_on_one_entity_draws_only_its_arguments(tmp_path: Path) -> None:
    """A fixed-target template: every draw is the same target, the varied argument changes, and no target
    argument the role does not take is written into the instance."""
    t = load_template(find_scenario("shop-catalog-slow-responses"))
    assert t.model.target_arg is None and {v.target for v in t.variations} == {"catalog"}
    assert sorted({v.args[0][2] for v in t.variations}) == [1200, 1400, 1600, 1800, 2000]
    out = generate([t], "fixed-target", len(t.variations))
    slow = [f for i in out.instances for f in i.spec["faults"] if f["role"] == "fault_app_slow_response"]
    assert [set(f["args"]) for f in slow] == [{"delay_ms"}] * len(t.variations)
    assert {i.ground_truth["entities"][0]["id"] for i in out.instances} == {"catalog"}


def test_a_traffic_source_is_the_root_cause_of_the_overload() -> None:
    truth = derive(load_effect_model("fault_load_flood"), "catalog", TOPO)
    assert truth["entities"][0]["id"] == "loadgen" and truth["faults"][0]["entity"] == "loadgen"
    assert [(p["source"], p["target"]) for p in truth["propagations"]] == [
        ("loadgen", "catalog"), ("catalog", "frontend"), ("frontend", "gateway")]
    assert {"name": "ServiceErrorRateHigh", "entity": "catalog"} in truth["alerts"]
    assert truth["propagation_length"] == 4  # loadgen, catalog, frontend, gateway


@pytest.mark.parametrize(("value", "dependency"), [("catalog:8081", "catalog"), ("http://cart:9/x", "cart"),
                                                  ("currency", "currency")])
def test_a_wrong_address_names_the_healthy_dependency(value: str, dependency: str) -> None:
    model = load_effect_model("fault_config_env")
    truth = derive(model, "frontend", TOPO, args={"target": "frontend", "variable": "X_ADDR", "value": value})
    assert truth["propagations"][0]["source"] == "frontend" and truth["propagations"][0]["target"] == dependency
    assert dependency in {e["id"] for e in truth["entities"][1:]}
    assert not any(a["entity"] in (dependency, f"{dependency}-1") for a in truth["alerts"])


def test_an_address_that_names_no_entity_adds_no_dependency() -> None:
    model = load_effect_model("fault_config_env")
    truth = derive(model, "frontend", TOPO, args={"target": "frontend", "variable": "X", "value": "catalgo:8080"})
    assert [(p["source"], p["target"]) for p in truth["propagations"]] == [("frontend", "gateway")]


def test_a_configured_dependency_raises_no_alert_and_the_client_is_the_root_cause() -> None:
    truth = derive(load_effect_model("fault_config_redis_password"), "cart", TOPO)
    assert truth["entities"][0]["id"] == "cart-1"
    assert (truth["propagations"][0]["source"], truth["propagations"][0]["target"]) == ("cart-1", "redis")
    assert not any(a["entity"].startswith("redis") for a in truth["alerts"])


@pytest.mark.parametrize(("edit", "words"), [
    ({"target": "ads"}, "either target_arg"),  # both
    ({"target_arg": None}, "either target_arg"),  # neither
    ({"dependency": "redis", "dependency_arg": "value"}, "either dependency or dependency_arg"),
])
def test_an_effect_model_with_an_ambiguous_target_or_dependency_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, edit: dict[str, Any], words: str) -> None:
    data = yaml.safe_load(effects.effects_file("fault_container_stop").read_text())
    data.update(edit)
    data = {k: v for k, v in data.items() if v is not None}
    role = tmp_path / "fault_x"
    (role / "meta").mkdir(parents=True)
    (role / "meta" / "effects.yml").write_text(yaml.safe_dump(data))
    monkeypatch.setattr(effects, "role_dir", lambda name: tmp_path / name)
    with pytest.raises(SpecInvalid) as err:
        load_effect_model("fault_x")
    assert any(words in p.message and p.file.endswith("fault_x/meta/effects.yml") for p in err.value.problems)
