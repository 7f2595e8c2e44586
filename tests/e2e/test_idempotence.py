"""Idempotence of the roles, live (issue 11, item 6): run twice in a row, the second run changes nothing.

Design that stays affordable: one environment per application, deployed twice (the second deploy must report
changed=0); then, for every fault role the application's scenarios use (with the scenario's own arguments), inject
twice (second: changed=0) and remove twice (second: changed=0), and finally teardown twice. Each step is the real
lifecycle step (`Run._step`: the playbook through ansible-runner, with the run's extra vars); the changed count is
the `playbook_on_stats` recap of that invocation, and a failure names the tasks that reported a change.

`test_loopweb_roles_are_idempotent` runs in `make test` (about 3 min). The shop (every shop fault on one
environment) is under `make reliability` (about 10 min).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.lifecycle import Run
from orchestrator.spec import find_scenario, load_scenario, spec_files

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
        result = run._step(step, attempt, 2, cleanup=step in ("remove", "teardown"))
        if not result.ok:
            problems.append(f"{what}: {step} #{attempt} {result.status}: {'; '.join(result.failures)[:300]}")
            return problems
        if attempt == 2:
            changed, tasks = changed_tasks(result.artifact_dir)
            if changed:
                problems.append(f"{what}: second {step} changed {changed}: {tasks}")
    return problems


def audit_application(home: Path, monkeypatch: pytest.MonkeyPatch, application: str) -> tuple[int, list[str]]:
    """(steps checked, problems) for every fault role of the application's scenarios, on one environment."""
    monkeypatch.setenv("OPSBENCH_HOME", str(home))
    scenarios = [load_scenario(p) for p in spec_files()]
    scenarios = [s for s in scenarios if s.data["environment"]["application"] == application and s.faults
                 and s.backend == "local"]  # the kubernetes shop (k8s-shop-*) needs a cluster: not here
    assert scenarios, application
    first = find_scenario(scenarios[0].id)
    run = Run.create(first, agent=None)
    checked, problems = 0, []
    try:
        problems += step_twice(run, "deploy", f"env_{application}")
        checked += 1
        seen: set[str] = set()
        for scn in scenarios:
            roles = tuple((f["role"], json.dumps(f["args"], sort_keys=True)) for f in scn.faults)
            if all(r in seen for r in roles):
                continue  # the same roles with the same arguments were already checked
            seen.update(roles)
            run.use_scenario(scn)
            problems += step_twice(run, "inject", scn.id)
            problems += step_twice(run, "remove", scn.id)
            checked += 2
    finally:
        problems += step_twice(run, "teardown", f"env_{application}")
        checked += 1
    return checked, problems


def test_loopweb_roles_are_idempotent(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    checked, problems = audit_application(home, monkeypatch, "loopweb")
    print(f"idempotence loopweb: {checked} steps run twice, problems: {problems}")
    assert checked >= 4 and problems == [], problems


@pytest.mark.reliability
def test_shop_roles_are_idempotent(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    checked, problems = audit_application(home, monkeypatch, "shop")
    print(f"idempotence shop: {checked} steps run twice, problems: {problems}")
    assert checked >= 20 and problems == [], problems
