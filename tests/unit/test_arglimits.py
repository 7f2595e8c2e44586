"""Bounds the environment puts on fault arguments (roles/<role>/meta/limits.yml): `opsbench validate` refuses a
mechanism whose arguments exceed the environment with a located error (issue 34), and a malformed limits file is
reported against that file."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from orchestrator import paths
from orchestrator.arglimits import limit_problems, load_limits
from orchestrator.role_topology import load_topology
from orchestrator.validate import validate_scenario_file

TOPO = load_topology("shop")


def problems(role: str, args: dict[str, Any], env_args: dict[str, Any] | None = None) -> list[str]:
    return [f"{p.path}: {p.message}" for p in limit_problems("spec.yaml", 2, role, args, TOPO, env_args or {})]


@pytest.mark.parametrize(("role", "args", "env_args", "where", "says"), [
    ("fault_config_rate_limit", {"rps": 5000.0}, {}, "$.faults[2].args.rps", "above the environment's maximum 1000"),
    ("fault_config_rate_limit", {"rps": 0.01}, {}, "$.faults[2].args.rps", "below the environment's minimum 0.1"),
    ("fault_app_bad_canary", {"instance": "catalog-2"}, {"replicas": {"catalog": 1}}, "$.faults[2].args.instance",
     "catalog runs 1 instance(s) in this environment, fewer than 2"),
    ("fault_app_bad_canary", {"instance": "frontend-2"}, {}, "$.faults[2].args.instance",
     "'frontend-2' belongs to frontend, not to catalog"),
    ("fault_app_bad_canary", {"instance": "catalog-9"}, {}, "$.faults[2].args.instance",
     "'catalog-9' is not an entity of the environment's topology"),
    ("fault_network_stale_dns", {"source": "frontend", "name": "payment"}, {}, "$.faults[2].args.name",
     "frontend does not call payment in this environment"),
    ("fault_network_stale_dns", {"address_of": "currency-1"}, {}, "$.faults[2].args.address_of",
     "'currency-1' is an instance of currency, which argument name names"),
    ("fault_network_stale_dns", {"address_of": "ads"}, {}, "$.faults[2].args.address_of",
     "'ads' is a service, not a instance"),
    ("fault_container_clock_skew", {"offset_s": 120}, {}, "$.faults[2].args.offset_s",
     "is 120, but its size must be at least 301"),
    ("fault_container_clock_skew", {"offset_s": -900000}, {}, "$.faults[2].args.offset_s",
     "below the environment's minimum -86400"),
    ("fault_http_path_degrade", {"source": "cart", "target": "catalog"}, {}, "$.faults[2].args.target",
     "cart does not call catalog in this environment"),
    ("fault_http_path_degrade", {"path_re": "(["}, {}, "$.faults[2].args.path_re", "is not a regular expression"),
    ("fault_http_path_degrade", {"delay_ms": 120000}, {}, "$.faults[2].args.delay_ms", "above the environment's"),
    ("fault_config_client_timeout", {"target": "recommendation"}, {}, "$.faults[2].args.target",
     "recommendation calls no service per request in this environment (only through a cache: catalog)"),
    ("fault_config_client_timeout", {"target": "ads"}, {}, "$.faults[2].args.target",
     "ads calls no service per request in this environment ("),
])
def test_arguments_beyond_the_environment_are_refused_where_they_are(role: str, args: dict[str, Any],
                                                                     env_args: dict[str, Any], where: str,
                                                                     says: str) -> None:
    found = problems(role, args, env_args)
    assert len(found) == 1 and found[0].startswith(f"{where}: ") and says in found[0], found
    assert found[0].endswith(")"), "every refusal says why the environment sets the limit"


@pytest.mark.parametrize("role", ["fault_config_rate_limit", "fault_app_bad_canary", "fault_network_stale_dns",
                                  "fault_container_clock_skew", "fault_http_path_degrade",
                                  "fault_config_client_timeout"])
def test_the_roles_defaults_fit_the_environment(role: str) -> None:
    limits, bad = load_limits(role)
    assert limits and not bad
    assert problems(role, {}) == []


@pytest.mark.parametrize("target", ["frontend", "checkout"])
def test_a_timeout_on_a_caller_that_calls_per_request_is_accepted(target: str) -> None:
    assert problems("fault_config_client_timeout", {"target": target}) == []


def test_a_role_without_limits_has_none() -> None:
    assert load_limits("fault_container_stop") == ([], [])
    assert problems("fault_container_stop", {"target": "cart"}) == []


def test_a_malformed_limits_file_is_reported_against_itself(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    roles = tmp_path / "roles"
    shutil.copytree(paths.ROLES_DIR / "fault_config_rate_limit", roles / "fault_config_rate_limit")
    limits = roles / "fault_config_rate_limit" / "meta" / "limits.yml"
    monkeypatch.setattr(paths, "ROLES_DIR", roles)
    import orchestrator.argspecs as argspecs
    monkeypatch.setattr(argspecs, "role_dir", lambda role: roles / role)
    import orchestrator.arglimits as arglimits
    monkeypatch.setattr(arglimits, "role_dir", lambda role: roles / role)
    for body, where, says in [
        ({"limits": {"arg": "rps"}}, "$.limits", "a list of limits"),
        ({"limits": [{"arg": "rps", "max": 5, "why": "w", "maxx": 1}]}, "$.limits[0]", "unknown key(s) maxx"),
        ({"limits": [{"arg": "rps", "max": "5", "why": "w"}]}, "$.limits[0]", "are numbers"),
        ({"limits": [{"arg": "rps", "max": 5}]}, "$.limits[0].why", "say why"),
        ({"limits": [{"why": "w"}]}, "$.limits[0]", "either arg"),
        ({"limits": [{"calls": {"source": "a"}, "why": "w"}]}, "$.limits[0].calls", "source and target"),
    ]:
        limits.write_text(yaml.safe_dump(body))
        found = limit_problems("spec.yaml", 0, "fault_config_rate_limit", {}, TOPO, {})
        assert [(p.file, p.path) for p in found] == [(str(limits), where)] and says in found[0].message, found


def test_validate_reports_the_limit_with_the_spec_file(tmp_path: Path) -> None:
    src = paths.SPECS_DIR / "shop-catalog-rate-limit-too-low"
    spec = yaml.safe_load((src / "scenario.yaml").read_text())
    spec["faults"][0]["args"]["rps"] = 5000.0
    dst = tmp_path / "shop-catalog-rate-limit-too-low"
    dst.mkdir()
    (dst / "scenario.yaml").write_text(yaml.safe_dump(spec))
    shutil.copy(src / "ground_truth.yaml", dst / "ground_truth.yaml")
    found = [p for p in validate_scenario_file(dst / "scenario.yaml") if p.path.startswith("$.faults")]
    assert [(p.file, p.path) for p in found] == [(str(dst / "scenario.yaml"), "$.faults[0].args.rps")], found
