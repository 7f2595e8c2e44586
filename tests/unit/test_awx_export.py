"""`opsbench awx export`: the AWX objects playbook is generated, syntax-checked and linted, and every
scenario workflow's failure edges reach fault removal and teardown."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from orchestrator import paths
from orchestrator.awx import EDGES, STEPS
from orchestrator.cli import main
from orchestrator.runner import ansible_env

BIN = Path(sys.executable).parent
K8S_SCENARIOS = sorted(p.parent.name for p in paths.SPECS_DIR.glob("*/scenario.yaml")
                       if yaml.safe_load(p.read_text())["environment"]["backend"] == "kubernetes")
"""Every scenario for the kubernetes backend (the shop's k8s-shop-* and the CISO Kyverno/OPA cluster classes)."""


class _Loader(yaml.SafeLoader):
    pass


_Loader.add_constructor("!unsafe", lambda loader, node: ("UNSAFE", loader.construct_scalar(node)))


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("awx") / "opsbench_awx.yml"
    result = CliRunner().invoke(main, [
        "awx", "export", "-o", str(out), "--trials", "2",
        "--cluster", "kind-a=/clusters/a.kubeconfig",
        "--cluster", f"kind-b=/clusters/b.kubeconfig:{K8S_SCENARIOS[0]},{K8S_SCENARIOS[1]}"])
    assert result.exit_code == 0, result.output
    return out


def _play(path: Path) -> dict[str, Any]:
    return yaml.load(path.read_text(), Loader=_Loader)[0]  # type: ignore[no-any-return]


def test_awx_collection_is_installed():
    import ansible_collections.awx.awx  # noqa: F401 - bundled with the `ansible` package


def test_every_kubernetes_scenario_gets_a_workflow_per_cluster(exported: Path):
    play = _play(exported)
    names = [t["awx.awx.workflow_job_template"]["name"] for t in play["tasks"]
             if "awx.awx.workflow_job_template" in t]
    assert len([s for s in K8S_SCENARIOS if s.startswith("k8s-shop-")]) >= 12
    assert {f"opsbench {s} @ kind-a" for s in K8S_SCENARIOS} <= set(names)
    assert {n for n in names if n.endswith("@ kind-b")} == {f"opsbench {s} @ kind-b" for s in K8S_SCENARIOS[:2]}
    # Trials x scenario list per cluster, as in ITBench's experiments file.
    trials = play["vars"]["opsbench_awx_trials"]
    assert len(trials) == 2 * (len(K8S_SCENARIOS) + 2)
    assert sum(1 for t in trials if t == [K8S_SCENARIOS[0], "kind-b"]) == 2


def test_one_job_template_per_step_and_kubeconfig_credential_type(exported: Path):
    play = _play(exported)
    assert set(play["vars"]["opsbench_awx_job_templates"]) == {s for _, s, _ in STEPS}
    for playbook in play["vars"]["opsbench_awx_job_templates"].values():
        assert (paths.PROJECT_ROOT / playbook).is_file(), playbook
    ctype = next(t["awx.awx.credential_type"] for t in play["tasks"] if "awx.awx.credential_type" in t)
    assert ctype["injectors"]["extra_vars"]["opsbench_kubeconfig"] == ("UNSAFE", "{{ tower.filename.kubeconfig }}")


def test_workflow_vars_have_no_local_paths(exported: Path):
    text = exported.read_text()
    assert "env_k8s_shop_endpoints: cluster-dns" in text  # no port forwards between AWX jobs
    assert str(paths.PROJECT_ROOT) not in text
    assert "/runner/project/scenario_specs/" in text  # the ground truth, inside AWX's project checkout


def _reach(start: str, kinds: tuple[str, ...]) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        node = todo.pop()
        for kind in kinds:
            for nxt in EDGES[node].get(kind, []):
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
    return seen


@pytest.mark.parametrize("node", [n for n, _, _ in STEPS if n != "teardown"])
def test_failure_always_reaches_removal_and_teardown(node):
    # Whatever fails at `node` (then whatever happens after), teardown follows; removal follows
    # any failure once injection may have started.
    after_failure = {n for first in EDGES[node].get("failure", []) + EDGES[node].get("always", [])
                     for n in {first} | _reach(first, ("failure", "always"))}
    assert "teardown" in after_failure, node
    order = [n for n, _, _ in STEPS]
    if order.index(node) >= order.index("inject") and node not in ("remove", "recovery"):
        assert "remove" in after_failure, node


def test_nodes_carry_the_edges(exported: Path):
    play = _play(exported)
    wf = next(t["awx.awx.workflow_job_template"] for t in play["tasks"] if "awx.awx.workflow_job_template" in t
              and t["awx.awx.workflow_job_template"]["name"].startswith("opsbench k8s-shop-"))
    nodes = {n["identifier"]: n for n in wf["workflow_nodes"]}
    assert list(nodes) == [n for n, _, _ in STEPS]
    assert nodes["inject"]["related"] == {"success_nodes": [{"identifier": "manifestation"}],
                                          "failure_nodes": [{"identifier": "remove"}]}
    assert nodes["baseline"]["extra_data"]["opsbench_checks"][0]["role"] == "check_promql"


def test_export_passes_syntax_check(exported: Path):
    proc = subprocess.run([str(BIN / "ansible-playbook"), "--syntax-check", str(exported)],
                          env=ansible_env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_export_passes_ansible_lint(exported: Path, tmp_path: Path):
    # Linted where it lives (outside the project), with the production profile, as `make lint` does.
    env = {**os.environ, **ansible_env(), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    proc = subprocess.run([str(BIN / "ansible-lint"), "--offline", "--profile", "production", "-q", "--nocolor",
                           exported.name], cwd=exported.parent, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
