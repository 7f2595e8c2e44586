"""Idempotence of the roles, live (issue 11, item 6): run twice in a row, the second run changes nothing.

Design that stays affordable: one environment per application, deployed twice (the second deploy must report
changed=0); then, for every fault role the application's scenarios use (with the scenario's own arguments), inject
twice (second: changed=0) and remove twice (second: changed=0), and finally teardown twice. Each step is the real
lifecycle step (`Run.step`: the playbook through ansible-runner, with the run's extra vars); the changed count is
the `playbook_on_stats` recap of that invocation, and a failure names the tasks that reported a change.

Which tests `make test` runs and which are under `make reliability` (the split is by cost on the 2-core dev machine;
each playbook run costs 2.5-5 s through ansible-runner, so it is the number of steps and the environment that count):
- in `make test`: loopweb (nginx + Python on loopback, 2 faults; about 3 min); ciso_k8s_snapshot (the environment is
  files, 4 workloads of fault_ciso_k8s_workload; 54 s); ciso_host with each of the 8 fault_cis_* roles
  once, with the first argument set its scenarios give it (one container; 129 s); finops_data, whose
  scenarios have no faults, deployed twice and torn down twice per store (the file store and the PostgreSQL store:
  different tasks; 43 s). Measured 20:08-20:11 UTC on the 2-core dev machine, other helpers' tests
  running.
- under `make reliability`: ciso_host with all 18 argument sets (every module, file, sshd option, login.defs key;
  244 s);
  shop_finops (the shop plus the FinOps autoscaler: env_shop_finops's deploy runs finops_autoscaler's start, its
  teardown the stop; fault_autoscaler_policy and fault_load_flood; 103-122 s); the shop (every fault role of the 33
  shop scenarios on one environment, 62 steps; 675 s at 20:44-20:55 UTC).
OPSBENCH_IDEMPOTENCE_SCENARIOS=id,id,... restricts the faults to those scenarios' (to re-check a fix quickly).
Kubernetes scenarios (k8s-shop-*, ciso-k8s-kyverno/opa-*) need a cluster and are left out here.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from orchestrator.catalog import find_scenario
from orchestrator.lifecycle import Run
from orchestrator.spec import Scenario, load_scenario, spec_files
from orchestrator.trials import use_scenario

pytestmark = pytest.mark.e2e


def changed_tasks(artifact_dir: Path | None) -> tuple[int, list[str]]:
    """(changed count of the recap, names of the tasks that reported a change) of one ansible-runner invocation."""
    assert artifact_dir is not None
    total, tasks = 0, []
    for file in sorted((artifact_dir / "job_events").glob("*.json")):
        event = json.loads(file.read_text())
        data = event.get("event_data", {})
        if event.get("event") == "playbook_on_stats":
            total = sum((data.get("changed") or {}).values())
        elif event.get("event") == "runner_on_ok" and (data.get("res") or {}).get("changed"):
            tasks.append(f"{data.get('role', '')}: {data.get('task', '')}")
    return total, tasks


def step_twice(run: Run, step: str, what: str) -> list[str]:
    """Run `step` twice; the problems (failed runs, changes on the second run)."""
    problems = []
    for attempt in (1, 2):
        result = run.step(step, attempt, 2, cleanup=step in ("remove", "teardown"))
        if not result.ok:
            problems.append(f"{what}: {step} #{attempt} {result.status}: {'; '.join(result.failures)[:300]}")
            return problems
        if attempt == 2:
            changed, tasks = changed_tasks(result.artifact_dir)
            if changed:
                problems.append(f"{what}: second {step} changed {changed}: {tasks}")
    return problems


def at_least(steps: int) -> int:
    """The steps a full audit checks; 2 (deploy, teardown) when OPSBENCH_IDEMPOTENCE_SCENARIOS narrows it."""
    return 2 if os.environ.get("OPSBENCH_IDEMPOTENCE_SCENARIOS") else steps


def local_scenarios(application: str) -> list[Scenario]:
    scenarios = [load_scenario(p) for p in spec_files()]
    # Kubernetes scenarios (k8s-shop-*, ciso-k8s-kyverno/opa-*) need a cluster: tests/e2e/test_kubernetes.py.
    return [s for s in scenarios if s.data["environment"]["application"] == application and s.backend == "local"]


def audit_application(home: Path, monkeypatch: pytest.MonkeyPatch, application: str, *,
                      every_environment: bool = False, one_argument_set_per_role: bool = False
                      ) -> tuple[int, list[str]]:
    """(steps checked, problems) for the environment role and every fault role of the application's scenarios.

    By default one environment (the first scenario's environment arguments) takes every fault. With
    `every_environment`, each distinct set of environment arguments is deployed twice and torn down twice with the
    faults of its own scenarios (for environments whose arguments change what the role does, e.g. the FinOps
    dataset's file or PostgreSQL store). With `one_argument_set_per_role`, each fault role is run with the first
    argument set its scenarios give it only."""
    monkeypatch.setenv("OPSBENCH_HOME", str(home))
    scenarios = local_scenarios(application)
    assert scenarios, application
    only = [s for s in os.environ.get("OPSBENCH_IDEMPOTENCE_SCENARIOS", "").split(",") if s]
    if only:  # re-check a fix on a few scenarios' faults only (the environment is still deployed twice)
        scenarios = [s for s in scenarios if s.id in only or not s.faults]
    variants: dict[str, list[Scenario]] = {}
    for scn in scenarios:
        key = json.dumps(scn.data["environment"].get("args", {}), sort_keys=True) if every_environment else ""
        variants.setdefault(key, []).append(scn)
    checked, problems = 0, []
    seen: set[tuple[str, str]] = set()
    for key, group in variants.items():
        what = f"env_{application}{' ' + key if key else ''}"
        run = Run.create(find_scenario(group[0].id), agent=None, purpose="verify")  # the harness checking itself
        try:
            problems += step_twice(run, "deploy", what)
            checked += 1
            for scn in (s for s in group if s.faults):
                roles = [(f["role"], json.dumps(f["args"], sort_keys=True)) for f in scn.faults]
                if one_argument_set_per_role:
                    roles = [(r, "") for r, _ in roles]
                if all(r in seen for r in roles):
                    continue  # the same roles (with the same arguments) were already checked
                seen.update(roles)
                use_scenario(run, scn)
                problems += step_twice(run, "inject", scn.id)
                problems += step_twice(run, "remove", scn.id)
                checked += 2
        finally:
            problems += step_twice(run, "teardown", what)
            checked += 1
    return checked, problems


def test_loopweb_roles_are_idempotent(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    checked, problems = audit_application(home, monkeypatch, "loopweb")
    print(f"idempotence loopweb: {checked} steps run twice, problems: {problems}")
    assert checked >= at_least(4) and problems == [], problems


def test_ciso_k8s_snapshot_roles_are_idempotent(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    checked, problems = audit_application(home, monkeypatch, "ciso_k8s_snapshot")
    print(f"idempotence ciso_k8s_snapshot: {checked} steps run twice, problems: {problems}")
    assert checked >= at_least(2 + 2 * 4) and problems == [], problems  # the four workloads of fault_ciso_k8s_workload


def test_ciso_host_roles_are_idempotent_once_per_role(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    checked, problems = audit_application(home, monkeypatch, "ciso_host", one_argument_set_per_role=True)
    print(f"idempotence ciso_host (one argument set per role): {checked} steps run twice, problems: {problems}")
    assert checked >= at_least(2 + 2 * 8) and problems == [], problems  # every fault_cis_* role


def test_finops_data_roles_are_idempotent(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    checked, problems = audit_application(home, monkeypatch, "finops_data", every_environment=True)
    print(f"idempotence finops_data (file and PostgreSQL stores): {checked} steps run twice, problems: {problems}")
    assert checked >= at_least(4) and problems == [], problems


@pytest.mark.reliability
def test_ciso_host_roles_are_idempotent(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    checked, problems = audit_application(home, monkeypatch, "ciso_host")
    print(f"idempotence ciso_host (every argument set): {checked} steps run twice, problems: {problems}")
    assert checked >= at_least(2 + 2 * 18) and problems == [], problems


@pytest.mark.reliability
def test_shop_finops_roles_are_idempotent(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    checked, problems = audit_application(home, monkeypatch, "shop_finops")
    print(f"idempotence shop_finops: {checked} steps run twice, problems: {problems}")
    assert checked >= at_least(2 + 2 * 2) and problems == [], problems  # fault_autoscaler_policy, fault_load_flood


@pytest.mark.reliability
def test_shop_roles_are_idempotent(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    checked, problems = audit_application(home, monkeypatch, "shop")
    print(f"idempotence shop: {checked} steps run twice, problems: {problems}")
    assert checked >= at_least(20) and problems == [], problems
