"""Live tests of the kubernetes backend. They need a reachable cluster (KUBECONFIG, e.g. a kind
cluster with the shop's images loaded: `make k8s-images`) and run with `make e2e-kubernetes`;
anywhere else they are skipped and say so. NOT run on the development machine (no cluster there):
everything below is validated offline only (tests/unit/test_k8s_offline.py).

Budget on a 4-core kind cluster (estimate, not measured): ~6-10 min for the healthy baseline,
~10-15 min per fault scenario (deploy ~3 min, alerts 1-3 min, agent budget, removal, teardown).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from orchestrator.errors import OpsBenchError
from orchestrator.k8s import require_cluster

pytestmark = pytest.mark.e2e


def _cluster_or_skip() -> None:
    try:
        require_cluster("kubernetes e2e")
    except OpsBenchError as exc:
        pytest.skip(f"not run: no reachable Kubernetes cluster ({exc})")


@pytest.fixture
def cluster() -> None:
    _cluster_or_skip()


def _run(home: Path, scenario: str, *extra: str, timeout: int = 2400) -> dict[str, Any]:
    env = {**os.environ, "OPSBENCH_HOME": str(home)}
    proc = subprocess.run([sys.executable, "-m", "orchestrator.cli", "run", scenario, "--backend", "kubernetes",
                           "--json", "--quiet", *extra], env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.stdout, proc.stderr[-4000:]
    return json.loads(proc.stdout)


@pytest.mark.usefixtures("cluster")
def test_healthy_baseline_deploys_and_tears_down(tmp_path: Path):
    summary = _run(tmp_path, "k8s-shop-healthy-baseline")
    assert summary["status"] == "completed", summary
    assert summary["cleanup"] == "done", summary
    ns = f"ob-{summary['run_id']}"
    out = subprocess.run(["kubectl", "get", "namespace", ns], capture_output=True, text=True)
    assert out.returncode != 0, f"namespace {ns} left behind"


@pytest.mark.usefixtures("cluster")
@pytest.mark.parametrize("scenario", ["k8s-shop-cart-scaled-to-zero", "k8s-shop-shipping-bad-image"])
def test_fault_manifests_and_is_removed(tmp_path: Path, scenario: str):
    summary = _run(tmp_path, scenario)
    assert summary["status"] == "completed", f"{scenario}: {summary}"
    assert summary["cleanup"] == "done", summary
