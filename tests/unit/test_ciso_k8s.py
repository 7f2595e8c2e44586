"""The offline Kubernetes CISO class (ITBench D.5.2, kubectl + OPA on a recorded cluster state).

Uses the files the roles use: the recorded cluster state of env_ciso_k8s_snapshot, the workloads of
fault_ciso_k8s_workload (merged by the role's own module code), the scenario specs and ground truths,
the baseline agent's fetcher run for real by ansible-playbook, and its policy in the real Rego engine.
Also the bad inputs on this target: a hanging fetcher, a fetcher that changes the cluster state.
About 25 s (a handful of real ansible-playbook runs)."""

from __future__ import annotations

import copy
import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from orchestrator import paths
from orchestrator.agents import ciso as agent
from orchestrator.evaluation import ciso

ROLES = paths.PROJECT_ROOT / "roles"
STATE = ROLES / "env_ciso_k8s_snapshot" / "files" / "cluster-state.json"
WORKLOADS = ROLES / "fault_ciso_k8s_workload" / "files" / "workloads"
K8S_VERSION = "1.30"


def _module(path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


state_module = _module(ROLES / "fault_ciso_k8s_workload" / "library" / "opsbench_k8s_state.py")


def _baseline() -> dict[str, Any]:
    return dict(json.loads(STATE.read_text()))


def _variant(workload: str | None) -> dict[str, Any]:
    """The cluster state as fault_ciso_k8s_workload leaves it (None: the recording itself)."""
    base = _baseline()
    if workload is None:
        return base
    return dict(state_module.merge(base, json.loads((WORKLOADS / f"{workload}.json").read_text())))


def _k8s_scenarios() -> list[tuple[str, str, bool, str]]:
    """(id, goal, expected compliant, injected workload) of every offline Kubernetes scenario."""
    out = []
    for d in sorted(paths.SPECS_DIR.glob("ciso-k8s-*")):
        spec = yaml.safe_load((d / "scenario.yaml").read_text())
        if spec["environment"]["application"] != "ciso_k8s_snapshot":
            continue
        gt = yaml.safe_load((d / "ground_truth.yaml").read_text())
        goal = next(t["goal"] for t in spec["tasks"] if t["kind"] == "assess")
        (fault,) = spec["faults"]
        out.append((d.name, goal, gt["posture"]["compliant"], fault["args"]["workload"]))
    return out


SCENARIOS = _k8s_scenarios()


def test_there_are_offline_scenarios_in_both_postures_for_every_control() -> None:
    assert len(SCENARIOS) >= 8
    for control in agent.K8S_CONTROLS:
        postures = {exp for _, goal, exp, _ in SCENARIOS if agent.recognise_k8s(goal) == control}
        assert postures == {True, False}, control.id


def test_recorded_state_and_workloads_are_valid_kubernetes_objects() -> None:
    objs = list(_baseline()["items"])
    for f in sorted(WORKLOADS.glob("*.json")):
        objs += json.loads(f.read_text())
    assert len(objs) > 30
    for obj in objs:
        # Raises on the first schema error (kubernetes-validate --strict: unknown fields too).
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
    # A broken object is caught, so the check above means something.
    broken = copy.deepcopy(objs[-1])
    broken["spec"]["containers"][0]["securityContext"]["privilegd"] = True
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, K8S_VERSION, strict=True)


def test_the_fault_module_adds_or_replaces_objects_idempotently() -> None:
    once = _variant("privileged")
    objs = json.loads((WORKLOADS / "privileged.json").read_text())
    assert len(once["items"]) == len(_baseline()["items"]) + len(objs)
    assert state_module.merge(once, objs) == once  # applying twice equals once
    changed = copy.deepcopy(objs[0])
    changed["spec"]["replicas"] = 3
    again = state_module.merge(once, [changed])
    assert len(again["items"]) == len(once["items"]) and changed in again["items"]


@pytest.mark.parametrize(("sid", "goal", "expected", "workload"), SCENARIOS, ids=[s[0] for s in SCENARIOS])
def test_agent_policy_decides_each_scenario_and_inverted_fails(sid: str, goal: str, expected: bool,
                                                               workload: str) -> None:
    control = agent.recognise_k8s(goal)
    assert control is not None, goal
    evidence = {"control": control.id, "items": _variant(workload)["items"]}
    for invert in (False, True):
        policy = agent.k8s_policy(control, invert)
        package = ciso.package_of(policy)
        assert package
        result = ciso.rego_child(policy, f"data.{package}.compliant", json.dumps(evidence))
        assert result == {"ok": True, "defined": True, "value": expected != invert}, (sid, invert, result)
    # The recording is compliant for every control, and an empty cluster is not evidence of compliance.
    policy = agent.k8s_policy(control)
    for items, want in ((_baseline()["items"], True), ([], False)):
        result = ciso.rego_child(policy, "data.opsbench.ciso.check.compliant", json.dumps({"items": items}))
        assert result["value"] is want


def _target(tmp_path: Path, workload: str | None) -> tuple[Path, Path]:
    """An offline target as env_ciso_k8s_snapshot deploys it: the state file and the fetchers' inventory."""
    state = tmp_path / "cluster" / "state.json"
    state.parent.mkdir(parents=True)
    state.write_text(json.dumps(_variant(workload), indent=1) + "\n")
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(yaml.safe_dump({"all": {"children": {"target": {"hosts": {"cluster": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable,
        "cluster_state": str(state)}}}}}}))
    return state, inventory


def _output(tmp_path: Path, playbook: str, policy: str) -> Path:
    out = tmp_path / "output.json"
    out.write_text(json.dumps({"schema": "opsbench/ciso/v1", "artifacts": [
        {"name": "playbook.yml", "kind": "ansible_playbook", "content": playbook},
        {"name": "policy.rego", "kind": "rego", "content": policy}]}))
    return out


def _assess(tmp_path: Path, workload: str | None, expected: bool, playbook: str, policy: str,
            fetcher_timeout: float = 60) -> tuple[dict[str, Any], Path, bytes]:
    state, inventory = _target(tmp_path, workload)
    before = state.read_bytes()
    scores = ciso.assess(_output(tmp_path, playbook, policy), {"posture": {"compliant": expected}}, inventory,
                         ciso.guard_for({"files": [str(state)]}, tmp_path / "eval"), tmp_path / "eval",
                         {"agent": {"started_at": 10.0, "ended_at": 12.5}}, fetcher_timeout=fetcher_timeout)
    return scores, state, before


@pytest.mark.parametrize(("workload", "expected"), [("host-network", False), ("default-namespace", True)])
def test_agent_fetcher_runs_for_real_on_the_recorded_state(tmp_path: Path, workload: str, expected: bool) -> None:
    control = agent.recognise_k8s(next(g for _, g, _, w in SCENARIOS if w == "host-network"))
    assert control is not None
    scores, state, before = _assess(tmp_path, workload, expected, agent.k8s_fetcher(control, "target"),
                                    agent.k8s_policy(control))
    assert (scores["iec"], scores["ipa"], scores["ce"], scores["sap"], scores["ciso_pass"]) == (1, 1, 1, 1, 1), scores
    assert scores["host_changed"] is False and state.read_bytes() == before
    assert scores["time_to_process"] == 2.5
    evidence = json.loads((tmp_path / "eval" / "evidence.json").read_text())
    assert len(evidence["items"]) == len(_variant(workload)["items"])


HANGING = """---
- name: A fetcher that never finishes
  hosts: target
  gather_facts: false
  tasks:
    - name: Wait forever
      ansible.builtin.command: sleep 613
      changed_when: false
"""

WRITER = """---
- name: A fetcher that changes what it should only read
  hosts: target
  gather_facts: false
  tasks:
    - name: Empty the cluster
      ansible.builtin.copy:
        dest: "{{ cluster_state }}"
        content: '{"apiVersion": "v1", "kind": "List", "items": []}'
        mode: "0644"
    - name: Write evidence
      ansible.builtin.copy:
        dest: "{{ evidence_path }}"
        content: '{"items": []}'
        mode: "0644"
"""


def test_a_hanging_fetcher_is_stopped_and_scored_as_a_failed_task(tmp_path: Path) -> None:
    control = agent.K8S_CONTROLS[0]
    scores, state, before = _assess(tmp_path, "privileged", False, HANGING, agent.k8s_policy(control),
                                    fetcher_timeout=4)
    assert scores["status"] == "scored" and scores["fetcher_timed_out"] is True
    assert (scores["iec"], scores["ipa"], scores["ce"], scores["sap"]) == (1, 1, 0, 0), scores
    assert any("exceeded its time limit" in r for r in scores["reasons"]), scores["reasons"]
    assert state.read_bytes() == before
    # Its whole session was stopped: no `sleep 600` of it is left.
    procs = [p for p in Path("/proc").iterdir() if p.name.isdigit()]
    cmdlines = []
    for p in procs:
        try:
            cmdlines.append((p / "cmdline").read_bytes())
        except OSError:
            continue
    assert b"sleep\x00613\x00" not in cmdlines


def test_a_fetcher_that_changes_the_cluster_state_fails_ce_and_is_reverted(tmp_path: Path) -> None:
    control = agent.K8S_CONTROLS[0]
    scores, state, before = _assess(tmp_path, "privileged", False, WRITER, agent.k8s_policy(control))
    assert (scores["iec"], scores["ipa"], scores["ce"], scores["sap"]) == (1, 1, 0, 0), scores
    assert scores["host_changed"] is True and scores["host_restored"] is True
    assert scores["host_changes"] == [f"changed {state}"]
    assert state.read_bytes() == before


@pytest.mark.parametrize(("policy", "field", "reason"), [
    ("package p\n\ncompliant if {", "ipa", "does not compile"),
    ("package opsbench.ciso.check\n\nimport rego.v1\n\ncompliant if input.nothing == 1\n", "sap",
     "returned no result"),
])
def test_bad_policies_on_the_offline_target_fail_with_a_reason(tmp_path: Path, policy: str, field: str,
                                                               reason: str) -> None:
    control = agent.K8S_CONTROLS[0]
    scores, state, before = _assess(tmp_path, None, True, agent.k8s_fetcher(control, "target"), policy)
    assert scores[field] == 0 and scores["sap"] == 0 and scores["iec"] == 1, scores
    assert any(reason in r for r in scores["reasons"]), scores["reasons"]
    assert state.read_bytes() == before


def test_a_fetcher_that_does_not_parse_is_never_run(tmp_path: Path) -> None:
    scores, _state, _before = _assess(tmp_path, None, True, "- hosts: [\n", agent.k8s_policy(agent.K8S_CONTROLS[0]))
    assert (scores["iec"], scores["ce"], scores["sap"]) == (0, 0, 0)
    assert "fetcher_rc" not in scores and any("does not parse" in r for r in scores["reasons"])


def test_cluster_guard_sees_desired_state_changes_not_status(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The guard of the live kubectl+OPA class, with a stand-in kubectl that prints a recorded List."""
    listing = tmp_path / "objects.json"
    kubectl = tmp_path / "bin" / "kubectl"
    kubectl.parent.mkdir()
    kubectl.write_text(f"#!/bin/sh\nexec cat {listing}\n")
    kubectl.chmod(0o755)
    monkeypatch.setenv("PATH", f"{kubectl.parent}:{os.environ['PATH']}")
    state = _variant(None)
    listing.write_text(json.dumps(state))
    guard = ciso.guard_for({"kubeconfig": "/nonexistent/kubeconfig"}, tmp_path)
    assert isinstance(guard, ciso.ClusterGuard)
    guard.start()
    pods = [o for o in state["items"] if o["kind"] == "Pod"]
    pods[0]["status"]["phase"] = "Succeeded"  # the cluster's own doing
    listing.write_text(json.dumps(state))
    assert guard.finish() == ([], {})
    deps = [o for o in state["items"] if o["kind"] == "Deployment"]
    deps[0]["spec"]["replicas"] = 0  # a fetcher that scaled a workload down
    listing.write_text(json.dumps(state))
    changes, extra = guard.finish()
    assert changes == [f"changed Deployment/{deps[0]['metadata']['namespace']}/{deps[0]['metadata']['name']}"]
    assert extra["host_restored"] is False
