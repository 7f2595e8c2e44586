"""The AWX contract, executed (issue 24): `opsbench awx export`'s local-backend workflows run node by node the way AWX
runs them (tests/e2e/awx_contract.py: ansible-runner jobs in AWX's private data dir layout, AWX's extra-vars
precedence and artifacts, edges by outcome), on loopweb, and a failing node that must still reach removal and
teardown (the shop: test_awx_contract_shop.py, in the time-bound group). Each run is recorded in the results index
like the orchestrator's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from orchestrator import paths, store

from .awx_checks import ALL_NODES, HOST, assert_back_at_baseline, launch
from .awx_contract import Contract, Export, inject_credential, job_extra_vars, record
from .conftest import run_cli, run_json
from .probing import assert_refused_everything, prober


def test_loopweb_workflow_runs_as_awx_runs_it(awx_contract: Contract, awx_home: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The whole workflow, with the probing agent first (issue 19's, then loopweb's baseline agent): the AWX agent
    step must contain it as the orchestrator's does, refused every way out, and the run still scores."""
    with prober(awx_home, then="orchestrator.agents.probe") as (agent, agent_env):
        for key, value in agent_env.items():
            monkeypatch.setenv(key, value)  # the job's environment (AWX: the EE's or a credential's variables)
        # The run root the prober watches (it writes its targets once the run is deployed there).
        wf = awx_contract.launch(f"opsbench loopweb-web-down @ {HOST}",
                                 {"opsbench_awx_run_root": str(awx_home / "runs"), "opsbench_agent_command": agent})
    assert wf.ran == ALL_NODES, [(j.identifier, j.status, j.failures) for j in wf.jobs]
    assert all(j.ok for j in wf.jobs), [(j.identifier, j.failures) for j in wf.jobs if not j.ok]
    run_dir = awx_home / "runs" / f"awx-{wf.id}"
    agent_job = wf.job("agent")
    assert agent_job is not None
    assert_refused_everything(run_dir, {"agent": agent_job.artifacts["opsbench"]["agent"]}, {
        "read log web", "write log web", "read log gateway", "read control gateway_conf",
        "write control gateway_conf", "read control supervisor_conf", "write control supervisor_conf"})
    # Every job had AWX's layout and AWX's variables: the workflow's run id, the check node's extra_data under the
    # workflow's vars, the artifacts of earlier nodes (set_stats) merged in.
    baseline = wf.job("baseline")
    assert baseline is not None
    extravars = json.loads((baseline.private_data_dir / "env" / "extravars").read_text())
    assert extravars["opsbench_run_id"] == "awx-{{ awx_workflow_job_id | default(tower_workflow_job_id) }}"
    assert extravars["awx_workflow_job_id"] == wf.id and extravars["opsbench_checks_required"] is True
    assert [c["role"] for c in extravars["opsbench_checks"]] == ["check_http"]
    evaluate = wf.job("evaluate")
    assert evaluate is not None
    later = json.loads((evaluate.private_data_dir / "env" / "extravars").read_text())
    assert later["opsbench"]["collect"], "the collect node's artifacts reach the nodes after it"
    assert (baseline.private_data_dir / "project" / "ansible.cfg").is_file()
    # The agent ran contained, as the orchestrator runs it, and was scored.
    agent = wf.job("agent")
    assert agent is not None
    assert agent.artifacts["opsbench"]["agent"]["status"] == "exited"
    assert agent.artifacts["opsbench"]["agent"]["isolation"]["sandbox"] == "namespaces"
    scores = evaluate.artifacts["opsbench"]["evaluations"]["diagnosis"]
    assert scores["status"] == "scored" and scores["fl_pass"] == 1.0
    assert_back_at_baseline(awx_home, wf, run_root="runs")
    # Recorded like the orchestrator's runs: the index, `runs`, `results`.
    summary = record(wf, paths.SPECS_DIR / "loopweb-web-down" / "scenario.yaml")
    assert summary["status"] == "completed" and summary["recovered"] is True and summary["cleanup"] == "done"
    row = store.get_run(summary["run_id"])
    assert row is not None and row["status"] == "completed"
    rc, results = run_json(awx_home, "results", "--scenario", "loopweb-web-down")
    assert rc == 0, results
    [cell] = [c for c in results["scenarios"] if c["scenario"] == "loopweb-web-down"]
    assert cell["n"] == 1 and cell["ntam_fl"] == 1.0, cell


def test_a_failing_node_still_reaches_removal_and_teardown(awx_contract: Contract, awx_home: Path) -> None:
    """The manifestation checks replaced (launch variables outrank a node's extra_data) by the baseline's: the fault
    is injected, manifestation fails, and the failure edges take the run through remove, recovery, teardown."""
    spec = yaml.safe_load((paths.SPECS_DIR / "loopweb-web-down" / "scenario.yaml").read_text())
    healthy = awx_contract.export.workflow(f"opsbench loopweb-web-down @ {HOST}")["workflow_nodes"][1]["extra_data"]
    assert [c["name"] for c in healthy["opsbench_checks"]] == [c["name"] for c in spec["checks"]["baseline"]]
    wf = launch(awx_contract, awx_home, "loopweb-web-down", opsbench_checks=healthy["opsbench_checks"])
    assert wf.ran == ["deploy", "baseline", "inject", "manifestation", "remove", "recovery", "teardown"], wf.ran
    manifestation = wf.job("manifestation")
    assert manifestation is not None and manifestation.status == "failed"
    assert any("checks not ok" in f and "gateway-serves" in f for f in manifestation.failures), manifestation.failures
    assert all(j.ok for j in wf.jobs if j.identifier != "manifestation")
    assert set(wf.not_run) == {"handover", "agent", "collect", "evaluate", "revoke"}
    assert_back_at_baseline(awx_home, wf)
    summary = record(wf, paths.SPECS_DIR / "loopweb-web-down" / "scenario.yaml")
    assert summary["status"] == "invalid" and summary["cleanup"] == "done" and summary["evaluations"] == {}


def test_credentials_are_injected_as_awx_injects_them(tmp_path: Path) -> None:
    """The kubeconfig credential type of a cluster export: its file, environment and extra-var injectors."""
    out = tmp_path / "export.yml"
    kubeconfig = tmp_path / "kube.yaml"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\n")
    proc = run_cli(tmp_path, "awx", "export", "-o", str(out), "--cluster", f"kind={kubeconfig}")
    assert proc.returncode == 0, proc.stderr
    export = Export.load(out)
    cred = export.get("credential", "opsbench kind kubeconfig")
    assert cred["inputs"]["kubeconfig"] == kubeconfig.read_text()  # the export playbook's file lookup
    ctype = export.get("credential_type", cred["credential_type"])
    env, extra = inject_credential(ctype, cred["inputs"], tmp_path / "job" / "env")
    path = Path(env["K8S_AUTH_KUBECONFIG"])
    assert path.parent == tmp_path / "job" / "env" and path.read_text() == kubeconfig.read_text()
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    assert extra == {"opsbench_kubeconfig": str(path)}


def test_extra_vars_merge_with_awxs_precedence() -> None:
    """One key set at every level: each level beats the ones below it (AWX's WorkflowJobNode.get_job_kwargs)."""
    levels = ["template", "extra_data", "artifacts", "workflow", "credentials"]
    values = [{"k": name, **{f"from_{n}": True for n in levels[:i + 1]}} for i, name in enumerate(levels)]
    merged = job_extra_vars(*values, meta={"workflow_job_id": 7})
    assert merged["k"] == "credentials" and all(merged[f"from_{n}"] for n in levels)
    assert merged["awx_workflow_job_id"] == merged["tower_workflow_job_id"] == 7
    # Without the higher levels, the next one down wins: the workflow's vars outrank its nodes' artifacts.
    assert job_extra_vars({"k": "t"}, {"k": "n"}, {"k": "a", "_ansible_no_log": True}, {}, {}, {})["k"] == "a"
    assert "_ansible_no_log" not in job_extra_vars({}, {}, {"_ansible_no_log": True}, {}, {}, {})
    assert job_extra_vars({}, {"k": "n"}, {"k": "a"}, {"k": "w"}, {}, {})["k"] == "w"
