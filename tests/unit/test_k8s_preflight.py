"""`make scenario NAME=<k8s scenario> BACKEND=kubernetes` without a reachable cluster fails fast and says why."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from click.testing import CliRunner

from orchestrator import cli
from orchestrator.errors import OpsBenchError
from orchestrator.k8s import kubeconfig_path, require_cluster

SCENARIO = "k8s-shop-cart-scaled-to-zero"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again when the with block ends


def _kubeconfig(tmp_path: Path, port: int) -> Path:
    f = tmp_path / "kubeconfig"
    f.write_text(f"""apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {{server: "https://127.0.0.1:{port}", insecure-skip-tls-verify: true}}
contexts:
- name: kind-opsbench
  context: {{cluster: c, user: u}}
current-context: kind-opsbench
users:
- name: u
  user: {{token: not-a-secret}}
""")
    return f


def test_kubeconfig_path_follows_kubeconfig(monkeypatch, tmp_path):
    monkeypatch.setenv("OPSBENCH_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("KUBECONFIG", f"{tmp_path}/a:{tmp_path}/b")
    assert kubeconfig_path() == tmp_path / "a"
    monkeypatch.delenv("KUBECONFIG")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert kubeconfig_path() == tmp_path / ".kube" / "config"


def test_kubeconfig_path_takes_the_local_cluster_while_it_runs(monkeypatch, tmp_path):
    """`make cluster` writes <state>/cluster/kubeconfig (removed by `make cluster-down`): used when KUBECONFIG is
    unset, before ~/.kube/config; an explicit KUBECONFIG still wins."""
    monkeypatch.setenv("OPSBENCH_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    local = tmp_path / "state" / "cluster" / "kubeconfig"
    local.parent.mkdir(parents=True)
    local.write_text("apiVersion: v1\n")
    assert kubeconfig_path() == local
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "mine"))
    assert kubeconfig_path() == tmp_path / "mine"
    monkeypatch.delenv("KUBECONFIG")
    local.unlink()
    assert kubeconfig_path() == tmp_path / ".kube" / "config"


def test_missing_kubeconfig_is_named(monkeypatch, tmp_path):
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "nope"))
    with pytest.raises(OpsBenchError) as err:
        require_cluster(SCENARIO)
    msg = str(err.value)
    assert "no kubeconfig" in msg and str(tmp_path / "nope") in msg and "KUBECONFIG" in msg
    assert "make cluster" in msg and "kind create cluster" in msg and "docs/backends.md" in msg


def test_unreachable_cluster_is_named(monkeypatch, tmp_path):
    port = _closed_port()
    monkeypatch.setenv("KUBECONFIG", str(_kubeconfig(tmp_path, port)))
    with pytest.raises(OpsBenchError) as err:
        require_cluster(SCENARIO, timeout=2)
    msg = str(err.value)
    assert f"https://127.0.0.1:{port}" in msg and "context kind-opsbench" in msg and "does not answer" in msg


def test_run_fails_before_creating_any_run(monkeypatch, tmp_path):
    monkeypatch.setenv("KUBECONFIG", str(_kubeconfig(tmp_path, _closed_port())))
    monkeypatch.setenv("OPSBENCH_HOME", str(tmp_path / "home"))
    result = CliRunner().invoke(cli.main, ["run", SCENARIO, "--backend", "kubernetes", "--quiet"])
    assert result.exit_code == 2, result.output
    assert "does not answer" in result.output and "KUBECONFIG" in result.output
    assert not (tmp_path / "home" / "runs").exists() or not any((tmp_path / "home" / "runs").iterdir())


def test_backend_mismatch_is_refused(monkeypatch, tmp_path):
    monkeypatch.setenv("OPSBENCH_HOME", str(tmp_path / "home"))
    result = CliRunner().invoke(cli.main, ["run", "shop-cart-down", "--backend", "kubernetes", "--quiet"])
    assert result.exit_code == 2
    assert "runs on the local backend, not kubernetes" in result.output
