"""The four mechanisms of issue 34's fourth part, offline: what their effect models derive (a periodic job's lock on
PostgreSQL, a wrong route at the gateway, a caller whose resolver does not answer, an open-file limit too low), the
environment bounds `opsbench validate` puts on their arguments (including the cross-argument and pattern limits they
brought), the container overrides they need (`dns`, `dns_options`, `ulimits`), the batch job's schedule, run by
sh against a stand-in psql, and their distractor and noise variants (a scripted agent that blames the distractor scores
lower)."""

from __future__ import annotations

import ast
import errno
import importlib.util
import itertools
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import jinja2
import pytest
import yaml

from orchestrator import paths
from orchestrator.arglimits import limit_problems, load_limits
from orchestrator.generation.effects import Topology, derive, load_effect_model
from orchestrator.role_topology import load_topology
from tests.unit.test_harder_mechanisms import check_blaming_the_distractor_scores_lower, distractor_scenarios

TOPO_DATA = load_topology("shop") or {}
TOPO = Topology(TOPO_DATA)
NEW_ROLES = ("fault_postgres_batch_job", "fault_config_gateway_route", "fault_network_resolver_down",
             "fault_container_fd_limit")


def truth(role: str, args: dict[str, Any]) -> dict[str, Any]:
    model = load_effect_model(role)
    return derive(model, model.target_in(args), TOPO, args.get(model.source_arg) if model.source_arg else None, args)


def alerts(d: dict[str, Any]) -> set[tuple[str, str]]:
    return {(a["name"], a["entity"]) for a in d["alerts"]}


def test_a_batch_jobs_lock_blames_postgres_which_raises_nothing() -> None:
    d = truth("fault_postgres_batch_job", {})
    root = d["entities"][0]
    assert (root["id"], root["faultType"], root["layer"]) == ("postgres", "batch_job_lock", "datastore")
    assert [(p["source"], p["target"]) for p in d["propagations"]][:1] == [("postgres", "catalog")]
    assert not any(a["entity"].startswith("postgres") for a in d["alerts"])
    assert ("ServiceErrorRateHigh", "catalog") in alerts(d)


@pytest.mark.parametrize("upstream", ["cart", "checkout"])
def test_a_wrong_route_blames_the_gateway_and_spares_the_upstream(upstream: str) -> None:
    d = truth("fault_config_gateway_route", {"path": "/api/cart", "upstream": upstream})
    root = d["entities"][0]
    assert (root["id"], root["faultType"], root["layer"], root["rootCause"]) == (
        "gateway", "wrong_route", "configuration", True)
    assert [(p["source"], p["target"]) for p in d["propagations"]] == [("gateway", upstream)]
    assert alerts(d) == {("CustomerErrorsHigh", "gateway")}, "404s: only the users' alert"


@pytest.mark.parametrize("target", ["checkout", "frontend"])
def test_a_silent_resolver_blames_the_caller_not_what_it_cannot_reach(target: str) -> None:
    d = truth("fault_network_resolver_down", {"target": target})
    root = d["entities"][0]
    assert (root["id"], root["faultType"], root["layer"]) == (target, "resolver_down", "network")
    assert alerts(d) == {("ServiceErrorRateHigh", target)}


@pytest.mark.parametrize("target", ["frontend", "checkout"])
def test_an_open_file_limit_blames_the_limited_service(target: str) -> None:
    d = truth("fault_container_fd_limit", {"target": target, "nofile": 8})
    root = d["entities"][0]
    assert (root["id"], root["faultType"], root["layer"]) == (target, "fd_limit", "runtime")
    assert alerts(d) == {("ServiceErrorRateHigh", target)}, "partial errors: only the target's alert is sure"


def test_the_open_file_limit_targets_only_services_that_call_others_on_every_request() -> None:
    """The catalog needs ten descriptors to open its pool at start and then cannot accept at ten; above that its
    normal load never reached the limit live. The recommendation caches the catalog. Neither is a target."""
    spec = yaml.safe_load((paths.ROLES_DIR / "fault_container_fd_limit" / "meta" / "argument_specs.yml").read_text())
    options = spec["argument_specs"]["inject"]["options"]
    assert options["fault_container_fd_limit_target"]["choices"] == ["frontend", "checkout"]
    defaults = yaml.safe_load((paths.ROLES_DIR / "fault_container_fd_limit" / "defaults" / "main.yml").read_text())
    assert defaults == {"fault_container_fd_limit_target": "frontend", "fault_container_fd_limit_nofile": 8}
    assert options["fault_container_fd_limit_nofile"]["default"] == 8


def problems(role: str, args: dict[str, Any]) -> list[str]:
    return [f"{p.path}: {p.message}" for p in limit_problems("spec.yaml", 0, role, args, TOPO_DATA, {})]


@pytest.mark.parametrize(("role", "args", "where", "says"), [
    ("fault_postgres_batch_job", {"hold_s": 3}, "$.faults[0].args.hold_s", "below the environment's minimum 4"),
    ("fault_postgres_batch_job", {"hold_s": 20, "period_s": 20}, "$.faults[0].args.hold_s",
     "is 20, not below period_s (20)"),
    ("fault_postgres_batch_job", {"hold_s": 25}, "$.faults[0].args.hold_s", "is 25, not below period_s (20)"),
    ("fault_postgres_batch_job", {"period_s": 5, "hold_s": 4}, "$.faults[0].args.period_s",
     "below the environment's minimum 10"),
    ("fault_config_gateway_route", {"upstream": "redis"}, "$.faults[0].args.upstream", "is a datastore, not a service"),
    ("fault_config_gateway_route", {"upstream": "billing"}, "$.faults[0].args.upstream",
     "'billing' is not an entity of the environment's topology"),
    ("fault_network_resolver_down", {"timeout_s": 9}, "$.faults[0].args.timeout_s",
     "above the environment's maximum 4"),
    ("fault_network_resolver_down", {"resolver": "dns.example"}, "$.faults[0].args.resolver",
     "'dns.example' does not match"),
    ("fault_container_fd_limit", {"nofile": 6}, "$.faults[0].args.nofile", "below the environment's minimum 7"),
    ("fault_container_fd_limit", {"nofile": 12}, "$.faults[0].args.nofile", "above the environment's maximum 9"),
])
def test_arguments_beyond_the_environment_are_refused(role: str, args: dict[str, Any], where: str, says: str) -> None:
    found = problems(role, args)
    assert any(p.startswith(where) and says in p for p in found), found


def test_the_default_arguments_are_within_the_environment() -> None:
    for role in NEW_ROLES:
        assert problems(role, {}) == [], role


def test_a_malformed_cross_argument_or_pattern_limit_is_reported_against_the_limits_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    role = tmp_path / "fault_x"
    (role / "meta").mkdir(parents=True)
    (role / "meta" / "limits.yml").write_text(yaml.safe_dump({"limits": [
        {"arg": "a", "less_than": 3, "why": "w"}, {"arg": "b", "pattern": "(", "why": "w"}]}))
    monkeypatch.setattr("orchestrator.arglimits.role_dir", lambda _name: role)
    limits, found = load_limits("fault_x")
    assert limits == []
    assert [(p.path, p.message) for p in found] == [
        ("$.limits[0].less_than", "the name of another argument"),
        ("$.limits[1].pattern", "a regular expression that compiles")]


def _podman() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "opsbench_podman_more", paths.ROLES_DIR / "podman_control" / "module_utils" / "opsbench_podman.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_container_overrides_set_the_resolver_and_the_open_file_limit() -> None:
    podman = _podman()
    spec = {"id": "checkout-1", "service": "checkout", "image": "localhost/opsbench-shop:current"}
    common = {"prefix": "ob-r1", "network": "ob-r1", "memory": "256m"}
    plain = podman.run_args(spec, common)
    assert not {"--dns", "--dns-option", "--ulimit"} & set(plain)
    overrides = {"dns": ["192.0.2.53"], "dns_options": ["timeout:1", "attempts:1"], "ulimits": ["nofile=12:12"]}
    args = podman.run_args(podman.apply_overrides(spec, overrides), common)
    pairs = list(itertools.pairwise(args))
    assert ("--dns", "192.0.2.53") in pairs and ("--ulimit", "nofile=12:12") in pairs
    assert [b for a, b in pairs if a == "--dns-option"] == ["timeout:1", "attempts:1"]
    assert args[-1] == "localhost/opsbench-shop:current", "options come before the image"


def _job_command() -> list[str]:
    tasks = yaml.safe_load((paths.ROLES_DIR / "fault_postgres_batch_job" / "tasks" / "inject.yml").read_text())
    start = next(t for t in tasks if t.get("name") == "Start the job")
    return [str(c) for c in start["containers.podman.podman_container"]["command"]]


@pytest.mark.skipif(shutil.which("sh") is None, reason="needs sh")
def test_the_batch_job_runs_its_locking_transaction_on_schedule(tmp_path: Path) -> None:
    """The job's shell loop, as the role starts it, against a psql that records its arguments: each run is one
    transaction that takes the ACCESS EXCLUSIVE lock and holds it hold_s; a failed run is logged and the schedule
    goes on."""
    calls = tmp_path / "calls"
    psql = tmp_path / "psql"
    psql.write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> {calls}\n[ -e {tmp_path}/fail ] && exit 2\nexit 0\n')
    psql.chmod(0o755)
    cmd = _job_command()
    assert cmd[:2] == ["sh", "-c"]
    script = cmd[2]
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}", "PGAPPNAME": "stock-resync"}
    (tmp_path / "fail").touch()
    proc = subprocess.Popen(["sh", "-c", script, "products", "1", "2"], env=env, stdout=subprocess.PIPE, text=True)
    try:
        for _ in range(100):
            if calls.exists() and len(calls.read_text().splitlines()) >= 2:
                break
            time.sleep(0.05)
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=10)
    runs = calls.read_text().splitlines()
    assert len(runs) >= 2, "the job stopped after a failed run"
    assert "BEGIN; LOCK TABLE products IN ACCESS EXCLUSIVE MODE;" in runs[0]
    assert "SELECT pg_sleep(1); COMMIT;" in runs[0]
    assert "stock-resync: run started (table products, lock held 1 s)" in out
    assert "stock-resync: run failed" in out


@pytest.mark.parametrize("scenario", ["shop-postgres-stock-resync-job", "shop-gateway-cart-route-misrouted",
                                      "shop-checkout-dns-resolver-unreachable", "shop-frontend-open-file-limit"])
def test_each_mechanism_has_an_issue_34_scenario(scenario: str) -> None:
    data = yaml.safe_load((paths.SPECS_DIR / scenario / "scenario.yaml").read_text())
    assert "issue-34" in data["metadata"]["tags"]
    assert data["faults"][0]["role"] in NEW_ROLES


def _start_command(nofile: int) -> list[str]:
    """The start command the role gives the target's containers, rendered as Ansible would."""
    tasks = yaml.safe_load((paths.ROLES_DIR / "fault_container_fd_limit" / "tasks" / "inject.yml").read_text())
    redeploy = next(t for t in tasks if "podman_control_overrides" in (t.get("vars") or {}))
    template = redeploy["vars"]["podman_control_overrides"]["command"]
    role_vars = yaml.safe_load((paths.ROLES_DIR / "fault_container_fd_limit" / "vars" / "main.yml").read_text())
    rendered = jinja2.Environment().from_string(template).render(fault_container_fd_limit_nofile=nofile, **role_vars)
    command = ast.literal_eval(rendered)
    assert isinstance(command, list)
    return [str(c) for c in command]


@pytest.mark.skipif(shutil.which("sh") is None, reason="needs sh")
def test_the_start_command_lowers_the_open_file_limit_and_runs_the_service_command() -> None:
    """podman's --ulimit cannot go below what runc needs to start a container (11): the role lowers the limit in the
    start command instead. Run it with the service's command replaced by a probe: the process it execs (the same pid)
    has the limit, soft and hard, and gets EMFILE on the descriptor past it."""
    command = _start_command(8)
    role_vars = yaml.safe_load((paths.ROLES_DIR / "fault_container_fd_limit" / "vars" / "main.yml").read_text())
    service = role_vars["fault_container_fd_limit_service_command"]
    assert command[:2] == ["sh", "-c"] and command[-len(service):] == service == ["python3", "-m", "shop"]
    probe = ("import os, resource\n"
             "print(*resource.getrlimit(resource.RLIMIT_NOFILE))\n"
             "fds = []\n"
             "try:\n"
             "    while True: fds.append(os.open('/dev/null', os.O_RDONLY))\n"
             "except OSError as exc: print(exc.errno, 3 + len(fds))\n")
    out = subprocess.run([*command[:-len(service)], sys.executable, "-c", probe], capture_output=True, text=True,
                         timeout=30, check=True).stdout.split()
    assert out[:2] == ["8", "8"]
    assert out[2] == str(errno.EMFILE) and int(out[3]) <= 8


def _variants() -> list[str]:
    """The scenarios over these mechanisms that carry a distractor."""
    return distractor_scenarios(set(NEW_ROLES))


def test_each_mechanism_has_a_distractor_and_noise_variant() -> None:
    covered = set()
    for scenario in _variants():
        data = yaml.safe_load((paths.SPECS_DIR / scenario / "scenario.yaml").read_text())
        assert data["noise"], f"{scenario}: no noise while the agent works"
        assert {"distractor", "noise", "issue-34"} <= set(data["metadata"]["tags"]), scenario
        causes = [f for f in data["faults"] if not f.get("distractor")]
        assert len(causes) == 1 and causes[0]["role"] in NEW_ROLES, scenario
        covered.add(causes[0]["role"])
    assert covered == set(NEW_ROLES)


def test_the_retired_catalog_scenario_is_gone_and_its_id_never_reused() -> None:
    registry = yaml.safe_load(paths.ID_REGISTRY.read_text())["ids"]
    assert registry["shop-catalog-open-file-limit"].get("retired") is True
    assert not (paths.SPECS_DIR / "shop-catalog-open-file-limit").exists()


@pytest.mark.parametrize("scenario", _variants())
def test_naming_the_distractor_as_the_cause_scores_lower(scenario: str, tmp_path: Path) -> None:
    """A scripted agent that blames the distractor instead of the true cause loses localisation and counts a false
    positive; one that names the true cause does not."""
    check_blaming_the_distractor_scores_lower(scenario, tmp_path)
