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
    assert str(paths.PROJECT_ROOT) not in text and ".venv" not in text
    # The ground truth inside the job's own project checkout (AWX: /runner/project), which the job finds itself.
    assert "'{{ opsbench_project_dir }}/scenario_specs/" in text
    assert "opsbench_project_dir: !unsafe '{{ playbook_dir | dirname }}'" in text
    assert "opsbench_agent_command: !unsafe '{{ ansible_playbook_python }} -m orchestrator.agents." in text


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
    assert {k: v for k, v in nodes["inject"]["related"].items() if k.endswith("_nodes")} == {
        "success_nodes": [{"identifier": "manifestation"}], "failure_nodes": [{"identifier": "remove"}]}
    assert nodes["baseline"]["extra_data"]["opsbench_checks"][0]["role"] == "check_promql"
    # AWX follows a job's outcome: the check nodes make a check that is not ok fail the job.
    assert nodes["baseline"]["extra_data"]["opsbench_checks_required"] is True
    assert nodes["deploy"]["related"]["credentials"] == [
        {"name": "opsbench kind-a kubeconfig", "organization": {"name": "{{ opsbench_awx_organization }}"}}]


def test_local_backend_scenarios_go_to_podman_hosts(tmp_path: Path):
    out = tmp_path / "awx.yml"
    result = CliRunner().invoke(main, ["awx", "export", "-o", str(out), "--host", "podman-a:loopweb-web-down,"
                                       "shop-cart-down", "--host", "podman-b:shop-cart-down", "--trials", "2"])
    assert result.exit_code == 0, result.output
    assert "2 scenario(s), 0 cluster(s), 2 podman host(s), 3 workflow(s)" in result.output
    play = _play(out)
    wfs = {t["awx.awx.workflow_job_template"]["name"]: t["awx.awx.workflow_job_template"] for t in play["tasks"]
           if "awx.awx.workflow_job_template" in t}
    assert set(wfs) == {"opsbench loopweb-web-down @ podman-a", "opsbench shop-cart-down @ podman-a",
                        "opsbench shop-cart-down @ podman-b"}
    # Workflows sharing a host get port blocks of their own; one workflow's trials are queued (AWX's default).
    ports = [wfs[f"opsbench {s} @ podman-a"]["extra_vars"]["opsbench_port_base"] for s in ("loopweb-web-down",
                                                                                         "shop-cart-down")]
    assert ports == [20000, 20010] and wfs["opsbench shop-cart-down @ podman-b"]["extra_vars"][
        "opsbench_port_base"] == 20000
    assert all(wf["allow_simultaneous"] is False for wf in wfs.values())
    node = wfs["opsbench shop-cart-down @ podman-b"]["workflow_nodes"][0]
    assert node["inventory"]["name"] == "opsbench podman-b"
    assert node["related"]["instance_groups"] == [{"name": "podman-b"}] and "credentials" not in node["related"]
    assert "awx.awx.credential_type" not in {k for t in play["tasks"] for k in t}  # no cluster, no kubeconfig
    assert [t["name"] for t in play["vars"]["opsbench_awx_targets"]] == ["podman-a", "podman-b"]
    assert play["vars"]["opsbench_awx_trials"] == [["loopweb-web-down", "podman-a"], ["shop-cart-down", "podman-b"],
                                                   ["shop-cart-down", "podman-a"]] * 2


@pytest.mark.parametrize(("args", "message"), [
    (["--cluster", "kind=/k.yaml", "--scenario", "loopweb-web-down"],
     "no target for local-backend scenarios (loopweb-web-down): give --host"),
    (["--host", "h1:k8s-shop-cart-scaled-to-zero"],
     "podman host (--host) h1 runs local-backend scenarios; these are not: k8s-shop-cart-scaled-to-zero"),
    (["--host", "a", "--cluster", "a=/k.yaml"], "--cluster/--host names must differ"),
    (["--host", "bad/name"], "--host bad/name: expected NAME[:ID,ID...]"),
])
def test_bad_targets_are_clear_errors(tmp_path: Path, args: list[str], message: str):
    result = CliRunner().invoke(main, ["awx", "export", "-o", str(tmp_path / "awx.yml"), *args])
    assert result.exit_code != 0 and message in result.output, result.output
    assert not (tmp_path / "awx.yml").exists()


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


def test_execution_environment_file_is_generated_from_pyproject():
    from orchestrator.awx_ee import EE_FILE, render

    committed = paths.PROJECT_ROOT / EE_FILE
    assert committed.read_text() == render(), f"{EE_FILE} is stale: run `opsbench awx ee`"


def test_ansible_builder_creates_the_build_context(tmp_path: Path):
    """`ansible-builder create` accepts the definition; the context installs exactly the project's dependencies.
    (Building the image needs the base image from a registry this machine cannot pull: not done here.)"""
    import tomllib

    from orchestrator.awx_ee import BASE_IMAGE, EE_FILE, SYSTEM_PACKAGES

    context = tmp_path / "context"
    proc = subprocess.run([str(BIN / "ansible-builder"), "create", "-f", str(paths.PROJECT_ROOT / EE_FILE),
                           "-c", str(context), "--output-filename", "Containerfile"],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    deps = tomllib.loads((paths.PROJECT_ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    requirements = (context / "_build" / "requirements.txt").read_text().split("\n")
    assert sorted(filter(None, requirements)) == sorted(d for d in deps if not d.startswith(("ansible-core",
                                                                                              "ansible-runner")))
    bindep = (context / "_build" / "bindep.txt").read_text()
    assert all(f"{pkg} [platform:rpm]" in bindep for pkg in SYSTEM_PACKAGES)
    containerfile = (context / "Containerfile").read_text()
    assert f'ARG EE_BASE_IMAGE="{BASE_IMAGE}"' in containerfile
    assert "ansible-core>=" in containerfile and "ansible-runner>=" in containerfile
    final = containerfile[containerfile.index("FROM base AS final"):]
    assert "ENV PYTHONPATH=/runner/project" in final and "ENV CONTAINERS_CONF=${OPSBENCH_HOST_STATE}" in final
    assert final.rstrip().split("\n").index("USER 0") > final.rstrip().split("\n").index(
        "ENV PYTHONPATH=/runner/project")
