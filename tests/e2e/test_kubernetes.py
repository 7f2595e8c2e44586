"""Live tests of the kubernetes backend, on a real cluster: the one `make cluster` starts here (docs/backends.md) or
the one KUBECONFIG names. Marked `k8s`, so `make test` does not collect them:

* `make test-k8s-smoke` (CI runs it after `make test`): cluster up (the build cached by version), the two `smoke`
  tests below, cluster down. There the cluster is required (OPSBENCH_K8S_REQUIRED=1): no cluster fails.
* `make e2e-kubernetes`: every test here, on the cluster that runs; without one they are skipped and say so.

Each run gets its own OPSBENCH_HOME; the cluster's kubeconfig is resolved once, before that (KUBECONFIG, else the
local cluster's), and handed to every run.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from orchestrator import paths
from orchestrator.errors import OpsBenchError
from orchestrator.k8s import kubeconfig_path, require_cluster

pytestmark = [pytest.mark.e2e, pytest.mark.k8s]

KUBECONFIG = str(kubeconfig_path().resolve())
"""The cluster of every test here, fixed before a test moves OPSBENCH_HOME (the local cluster's lives in the
checkout's state dir)."""
SMOKE_SRE = "k8s-shop-checkout-oom-killed"
"""The smoke's SRE scenario: a fault the heuristic baseline localises from the cluster's alerts alone."""


@pytest.fixture
def cluster() -> None:
    try:
        require_cluster("kubernetes e2e")
    except OpsBenchError as exc:
        if os.environ.get("OPSBENCH_K8S_REQUIRED") == "1":
            pytest.fail(f"the smoke needs the cluster it started: {exc}")
        pytest.skip(f"not run: no reachable Kubernetes cluster ({exc})")


def kubectl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["kubectl", "--kubeconfig", KUBECONFIG, *args], capture_output=True, text=True,
                          timeout=120, check=False)


def _run(home: Path, scenario: str, *extra: str, timeout: int = 2400) -> dict[str, Any]:
    env = {**os.environ, "OPSBENCH_HOME": str(home), "KUBECONFIG": KUBECONFIG,
           "PYTHONPATH": str(paths.PROJECT_ROOT)}  # a command agent imports this checkout's package
    proc = subprocess.run([sys.executable, "-m", "orchestrator.cli", "run", scenario, "--backend", "kubernetes",
                           "--json", "--quiet", *extra], env=env, capture_output=True, text=True, timeout=timeout,
                          cwd=paths.PROJECT_ROOT, check=False)
    assert proc.stdout, proc.stderr[-4000:]
    return json.loads(proc.stdout)  # type: ignore[no-any-return]


def assert_nothing_left(summary: dict[str, Any]) -> None:
    """Completed, recovered, undone: the run's namespace is gone and no object carries its label."""
    assert summary["status"] == "completed", summary.get("reason")
    assert summary["cleanup"] == "done", summary.get("cleanup_problems")
    assert summary["recovered"] is not False, summary
    run_id = summary["run_id"]
    assert kubectl("get", "namespace", f"ob-{run_id}").returncode != 0, f"namespace ob-{run_id} left behind"
    left = kubectl("get", "deployments,services,pods,networkpolicies,resourcequotas,secrets,configmaps", "-A",
                   "-l", f"opsbench.run={run_id}", "-o", "name")
    assert left.returncode == 0, left.stderr
    assert left.stdout.strip() == "", f"objects of run {run_id} left: {left.stdout}"


@pytest.mark.smoke
@pytest.mark.usefixtures("cluster")
def test_smoke_sre_scenario_end_to_end_with_the_heuristic(tmp_path: Path) -> None:
    """Deploy the shop, baseline, inject, manifestation through the cluster's Prometheus, the heuristic agent through
    the gateway, evaluate, revoke, remove, recovery, teardown: all on the live API server."""
    summary = _run(tmp_path, SMOKE_SRE)
    assert_nothing_left(summary)
    assert summary["recovered"] is True
    diagnosis = summary["evaluations"]["diagnosis"]
    assert diagnosis["status"] == "scored", diagnosis
    assert diagnosis["fl_pass"] == 1.0, diagnosis


def ciso_agent(*args: str) -> str:
    return " ".join([shlex.quote(sys.executable), "-m", "orchestrator.agents.ciso", *args])


@pytest.mark.smoke
@pytest.mark.usefixtures("cluster")
@pytest.mark.parametrize(("scenario", "agent_args", "passes"), [
    ("ciso-k8s-opa-privileged-noncompliant", (), True),
    ("ciso-k8s-opa-privileged-compliant", ("--invert",), False),
])
def test_smoke_ciso_cluster_class_scored_against_the_live_api(tmp_path: Path, scenario: str,
                                                              agent_args: tuple[str, ...], passes: bool) -> None:
    """kubectl + OPA on the live cluster: the fault's Deployment is applied for real, the agent's fetcher reads the
    API server, a real OPA decides; the right policy passes, the inverted one fails SAP; the cluster guard saw no
    change and the run's workloads are gone."""
    summary = _run(tmp_path, scenario, "--agent", ciso_agent(*agent_args), timeout=900)
    assert summary["status"] == "completed", summary.get("reason")
    assert summary["cleanup"] == "done", summary.get("cleanup_problems")
    ciso = summary["evaluations"]["ciso"]
    assert (ciso["iec"], ciso["ipa"], ciso["ce"]) == (1, 1, 1), ciso
    assert ciso["sap"] == ciso["ciso_pass"] == int(passes), ciso
    left = kubectl("get", "deployments", "-A", "-l", f"opsbench.run={summary['run_id']}", "-o", "name")
    assert left.returncode == 0 and left.stdout.strip() == "", left.stdout + left.stderr


@pytest.mark.usefixtures("cluster")
def test_healthy_baseline_deploys_and_tears_down(tmp_path: Path) -> None:
    summary = _run(tmp_path, "k8s-shop-healthy-baseline")
    assert_nothing_left(summary)
    assert summary["evaluations"]["diagnosis"]["false_positives"] == 0


@pytest.mark.usefixtures("cluster")
@pytest.mark.parametrize("scenario", ["k8s-shop-cart-scaled-to-zero", "k8s-shop-shipping-bad-image"])
def test_fault_manifests_and_is_removed(tmp_path: Path, scenario: str) -> None:
    assert_nothing_left(_run(tmp_path, scenario))


@pytest.mark.usefixtures("cluster")
def test_awx_workflow_of_a_k8s_scenario_runs_as_awx_runs_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`opsbench awx export --cluster` for this cluster, its workflow run node by node as AWX runs it
    (tests/e2e/awx_contract.py): the kubeconfig reaches the jobs through the exported credential type's injectors
    (a file under the job's env/, K8S_AUTH_KUBECONFIG and opsbench_kubeconfig), every node succeeds, the run is
    scored and its namespace is gone."""
    from orchestrator.awx import STEPS

    from .awx_contract import Contract, Export, record

    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("OPSBENCH_HOME", str(home))
    monkeypatch.delenv("KUBECONFIG", raising=False)  # the jobs get it from the credential only
    out = home / "opsbench_awx.yml"
    proc = subprocess.run([sys.executable, "-m", "orchestrator.cli", "awx", "export", "-o", str(out), "--cluster",
                           f"here={KUBECONFIG}:{SMOKE_SRE}"], capture_output=True, text=True,
                          cwd=paths.PROJECT_ROOT, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    contract = Contract(Export.load(out), home / "awx")
    # AWX runs a cluster's jobs in pods (container groups), so the export gives the steps the Services' cluster DNS
    # names; this harness runs them on the host, outside the cluster, where those names do not resolve: the launch
    # asks for port forwards instead, as a user whose execution node sits outside the cluster would.
    wf = contract.launch(f"opsbench {SMOKE_SRE} @ here", {"opsbench_awx_run_root": str(home / "awx-runs"),
                                                           "env_k8s_shop_endpoints": "port-forward"})
    assert wf.ran == [n for n, _, _ in STEPS], [(j.identifier, j.status, j.failures) for j in wf.jobs]
    assert all(j.ok for j in wf.jobs), [(j.identifier, j.failures) for j in wf.jobs if not j.ok]
    deploy = wf.job("deploy")
    assert deploy is not None
    extravars = json.loads((deploy.private_data_dir / "env" / "extravars").read_text())
    assert Path(extravars["opsbench_kubeconfig"]).parent == deploy.private_data_dir / "env"
    evaluate = wf.job("evaluate")
    assert evaluate is not None
    scores = evaluate.artifacts["opsbench"]["evaluations"]["diagnosis"]
    assert scores["status"] == "scored" and scores["fl_pass"] == 1.0, scores
    summary = record(wf, paths.SPECS_DIR / SMOKE_SRE / "scenario.yaml")
    assert summary["status"] == "completed" and summary["cleanup"] == "done", summary
    namespaces = kubectl("get", "namespaces", "-o", "name")
    assert f"namespace/ob-awx-{wf.id}" not in namespaces.stdout.split(), namespaces.stdout
