"""`make cluster`'s host check (roles/k8s_cluster/files/preflight.py): each problem is one sentence naming
the piece and what to do; nothing on the host changes. The live cluster itself is exercised by `make cluster`."""

from __future__ import annotations

import importlib.util
import json
import socket
from pathlib import Path
from types import ModuleType

import pytest

ROLE = Path(__file__).resolve().parents[2] / "roles" / "k8s_cluster"


@pytest.fixture(scope="module")
def preflight() -> ModuleType:
    spec = importlib.util.spec_from_file_location("k8s_cluster_preflight", ROLE / "files" / "preflight.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_taken_port_is_named_with_its_option(preflight):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        errors = preflight.port_errors({"apiserver": port}, "127.0.0.1")
    assert len(errors) == 1
    assert f"port {port} (apiserver) is already in use" in errors[0] and "k8s_cluster_ports.apiserver" in errors[0]


def test_a_free_port_passes(preflight):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    assert preflight.port_errors({"etcd_client": port}, "127.0.0.1") == []


def test_missing_cgroup_controllers_are_named(preflight, monkeypatch, tmp_path):
    (tmp_path / "cpu").mkdir()
    (tmp_path / "cpu" / "cgroup.procs").write_text("")
    monkeypatch.setattr(preflight, "CGROUP", tmp_path)
    flavour, errors = preflight.cgroup_errors(["cpu", "memory", "pids"])
    assert flavour == "v1" and len(errors) == 1
    assert "memory, pids are not mounted" in errors[0]


def test_v2_without_delegated_controllers_is_refused(preflight, monkeypatch, tmp_path):
    (tmp_path / "cgroup.controllers").write_text("cpu io\n")
    monkeypatch.setattr(preflight, "CGROUP", tmp_path)
    flavour, errors = preflight.cgroup_errors(["cpu", "memory"])
    assert flavour == "v2" and len(errors) == 1
    assert errors[0].startswith("no cgroup delegation") and "cpuset, memory, pids" in errors[0]


def test_a_subnet_of_a_podman_network_is_refused(preflight, monkeypatch, tmp_path):
    monkeypatch.setattr(preflight, "host_routes", lambda: [{"dst": "192.0.2.0/24", "dev": "eth0"}])
    (tmp_path / "ob-run.json").write_text(json.dumps({"name": "ob-run", "subnets": [{"subnet": "10.32.0.0/16"}]}))
    errors = preflight.network_errors({"pod_subnet": "10.32.0.0/24", "service_subnet": "10.250.7.0/24"},
                                      "obk8s-test-none", [str(tmp_path)])
    assert errors == [f"k8s_cluster_pod_subnet 10.32.0.0/24 overlaps podman network ob-run (10.32.0.0/16, "
                      f"{tmp_path / 'ob-run.json'}); choose another k8s_cluster_pod_subnet"]


def test_a_subnet_on_a_route_is_refused_but_the_own_bridge_is_not(preflight, monkeypatch, tmp_path):
    monkeypatch.setattr(preflight, "host_routes", lambda: [
        {"dst": "default", "dev": "eth0"}, {"dst": "10.33.0.0/16", "dev": "podman7"},
        {"dst": "10.32.0.0/24", "dev": "obk8s-test"}])
    errors = preflight.network_errors({"pod_subnet": "10.32.0.0/24", "service_subnet": "10.33.0.0/24"},
                                      "obk8s-test", [str(tmp_path)])
    assert errors == ["k8s_cluster_service_subnet 10.33.0.0/24 overlaps the route 10.33.0.0/16 via podman7; "
                      "choose another k8s_cluster_service_subnet"]
