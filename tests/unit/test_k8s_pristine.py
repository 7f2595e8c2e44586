"""env_k8s_shop's `pristine` entry point through the real playbooks, against a `kubectl` that serves a recorded
namespace: the reference the deploy takes (objects_state.yml) compared with the namespace after a fault was removed.

What a fault can leave is reported, by object: one it created (a NetworkPolicy), one it deleted, a spec or data it
changed (a Service's target port, a Secret's value). What an agent or Kubernetes may legitimately change is not: a
rollout restart's annotation, a Deployment's status, service-account token Secrets, object metadata.
About 10 s (two ansible-playbook runs)."""

from __future__ import annotations

import copy
import json
import stat
from pathlib import Path
from typing import Any

import pytest

from orchestrator.runner import run_playbook


def _deployment(name: str, image: str) -> dict[str, Any]:
    return {"kind": "Deployment", "metadata": {"name": name, "resourceVersion": "100", "generation": 1},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name},
                                               "annotations": {"opsbench.io/scrape-job": name}},
                                  "spec": {"containers": [{"name": name, "image": image}]}}},
            "status": {"readyReplicas": 1}}


def _namespace() -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "List", "items": [
        _deployment("cart", "shop:1"),
        _deployment("payment", "shop:1"),
        {"kind": "Service", "metadata": {"name": "payment"},
         "spec": {"ports": [{"port": 8080, "targetPort": 8080}], "selector": {"app": "payment"}}},
        {"kind": "ConfigMap", "metadata": {"name": "shop-config"}, "data": {"CATALOG_ADDR": "catalog:8080"}},
        {"kind": "Secret", "type": "Opaque", "metadata": {"name": "redis"}, "data": {"password": "c2VjcmV0"}},
        {"kind": "Secret", "type": "kubernetes.io/service-account-token", "metadata": {"name": "default-token"},
         "data": {"token": "dG9rZW4x"}},
    ]}


@pytest.fixture()
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A `kubectl` first on PATH that answers `get ... -o json` with namespace.json (and logs its arguments)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    state = tmp_path / "namespace.json"
    state.write_text(json.dumps(_namespace()))
    kubectl = bin_dir / "kubectl"
    kubectl.write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> {tmp_path}/kubectl.log\ncat {state}\n')
    kubectl.chmod(kubectl.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}:{Path('/usr/bin')}:{Path('/bin')}")
    return tmp_path


def _extravars(run_dir: Path) -> dict[str, Any]:
    return {"opsbench_run_id": "r1", "opsbench_run_dir": str(run_dir), "opsbench_port_base": 41000,
            "opsbench_environment": {"name": "environment", "role": "env_k8s_shop",
                                     "vars": {"env_k8s_shop_namespace": "ob-test"}}}


def _take_reference(cluster: Path, run_dir: Path) -> None:
    """The deploy's last steps (objects_state.yml, then the reference file), without a cluster to deploy to."""
    play = cluster / "reference.yml"
    play.write_text(json.dumps([{
        "name": "Take the reference", "hosts": "localhost", "gather_facts": False,
        "vars": {"env_k8s_shop_namespace": "ob-test"},
        "tasks": [
            {"name": "Read the namespace", "ansible.builtin.include_role": {
                "name": "env_k8s_shop", "tasks_from": "objects_state", "public": True}},
            {"name": "Write it", "ansible.builtin.copy": {
                "content": "{{ env_k8s_shop_objects_state | to_nice_json }}",
                "dest": "{{ env_k8s_shop_dir }}/objects_state.json", "mode": "0600"}},
        ]}]))
    (run_dir / "env").mkdir(parents=True)
    result = run_playbook("reference", str(play), _extravars(run_dir), cluster / "steps" / "reference",
                          job_timeout=120, idle_timeout=100)
    assert result.ok, result.failures


def _pristine(cluster: Path, run_dir: Path, namespace: dict[str, Any]) -> list[str]:
    (cluster / "namespace.json").write_text(json.dumps(namespace))
    result = run_playbook("pristine", "pristine.yml", _extravars(run_dir), cluster / "steps" / "pristine",
                          job_timeout=120, idle_timeout=100)
    assert result.ok, result.failures
    return list(result.stats["leftovers"])


def test_pristine_reports_what_a_fault_left_and_nothing_else(cluster: Path) -> None:
    run_dir = cluster / "run"
    _take_reference(cluster, run_dir)
    reference = json.loads((run_dir / "env" / "objects_state.json").read_text())
    # Kind/name -> a digest; the service-account token is not part of the state.
    assert sorted(reference) == ["ConfigMap/shop-config", "Deployment/cart", "Deployment/payment",
                                 "Secret/redis", "Service/payment"]
    assert "-n ob-test get Deployment,Service,ConfigMap,Secret" in (cluster / "kubectl.log").read_text()

    # What an agent's mitigation or Kubernetes itself changes is not a leftover.
    benign = _namespace()
    cart = benign["items"][0]
    cart["spec"]["template"]["metadata"]["annotations"]["kubectl.kubernetes.io/restartedAt"] = "2026-11-28T07:00:00Z"
    cart["metadata"]["resourceVersion"], cart["metadata"]["generation"] = "187", 2
    cart["status"] = {"readyReplicas": 0}
    benign["items"][5]["data"] = {"token": "cm90YXRlZA=="}
    assert _pristine(cluster, run_dir, benign) == []

    # What faults leave is, each named.
    left = copy.deepcopy(_namespace())
    items = left["items"]
    items[2]["spec"]["ports"][0]["targetPort"] = 9999  # a Service on the wrong port
    items[4]["data"]["password"] = "d3Jvbmc="  # a corrupted Secret
    del items[1]  # a deleted Deployment
    items.append({"kind": "NetworkPolicy", "metadata": {"name": "opsbench-fault-deny"},
                  "spec": {"podSelector": {}, "policyTypes": ["Ingress"]}})
    items[0]["spec"]["replicas"] = 0  # scaled to zero
    assert _pristine(cluster, run_dir, left) == [
        "NetworkPolicy/opsbench-fault-deny was created and is still there",
        "Deployment/cart differs from the deployed one",
        "Deployment/payment was deleted",
        "Secret/redis differs from the deployed one",
        "Service/payment differs from the deployed one",
    ]
