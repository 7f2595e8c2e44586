"""The effect-model shapes issue 34's mechanisms added: the caller effect `rejections` (4xx passed on: no 5xx alert on
the way, the users' error alert at the entry) and a target that is one instance of a replicated service (a canary)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from orchestrator.errors import SpecInvalid
from orchestrator.generation import effects
from orchestrator.generation.effects import Topology, derive, load_effect_model
from orchestrator.role_topology import load_topology

TOPO = Topology(load_topology("shop") or {})


def test_rejections_raise_only_the_entrys_customer_alert() -> None:
    model = load_effect_model("fault_config_rate_limit")
    assert model.alert_names() == {"CustomerErrorsHigh"}
    d = derive(model, "catalog", TOPO, None, {"target": "catalog"})
    assert [(a["name"], a["entity"]) for a in d["alerts"]] == [("CustomerErrorsHigh", "gateway")]
    assert [(p["source"], p["target"]) for p in d["propagations"]] == [("catalog", "frontend"), ("frontend", "gateway")]
    assert d["entities"][0] | {"aliases": []} == {"id": "catalog", "aliases": [], "rootCause": True,
                                                  "layer": "configuration", "faultType": "rate_limited"}


def test_a_canary_instance_is_the_root_cause_and_its_service_carries_the_chain() -> None:
    model = load_effect_model("fault_app_bad_canary")
    d = derive(model, "catalog-2", TOPO, None, {"instance": "catalog-2"})
    assert d["entities"][0]["id"] == "catalog-2" and d["entities"][0]["faultType"] == "bad_release"
    assert ("ServiceErrorRateHigh", "catalog") in [(a["name"], a["entity"]) for a in d["alerts"]]
    pairs = [(p["source"], p["target"]) for p in d["propagations"]]
    assert pairs[0] == ("catalog-2", "frontend") and ("frontend", "gateway") in pairs
    assert "catalog-2 runs a release" in d["propagations"][0]["condition"]


def test_a_service_target_derives_as_before() -> None:
    """The instance shape changes nothing for a service target: the catalog's two instances, the service as the
    root cause of the slow-response flag."""
    d = derive(load_effect_model("fault_app_slow_response"), "catalog", TOPO)
    assert d["entities"][0]["id"] == "catalog"
    assert ("catalog", "frontend") in [(p["source"], p["target"]) for p in d["propagations"]]


def test_an_unknown_caller_effect_is_refused_with_the_known_ones(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    role = tmp_path / "fault_x"
    (role / "meta").mkdir(parents=True)
    data = yaml.safe_load((effects.effects_file("fault_config_rate_limit")).read_text())
    data["caller_effects"] = ["refusals"]
    (role / "meta" / "effects.yml").write_text(yaml.safe_dump(data))
    monkeypatch.setattr(effects, "role_dir", lambda name: tmp_path / name)
    with pytest.raises(SpecInvalid) as exc:
        load_effect_model("fault_x")
    assert [(p.path, p.message) for p in exc.value.problems] == [
        ("$.caller_effects", "a list of errors, latency, rejections")]
