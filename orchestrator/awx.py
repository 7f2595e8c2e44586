"""Export OpsBench to AWX: one playbook (awx.awx collection) that creates the project, a kubeconfig
credential type, one credential and inventory per cluster, one job template per lifecycle step and
one workflow template per scenario and cluster, and (tag ``launch``) runs a campaign.

AWX runs the same playbooks as the orchestrator, unchanged; everything they need travels as extra
vars. A workflow's own extra_vars carry the scenario (AWX allows Jinja there, so the run id is the
workflow job's id); its nodes carry only the per-step check lists. Failure edges always lead to fault
removal and teardown, as the orchestrator's undo steps do.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from orchestrator import paths
from orchestrator.argspecs import resolve_role_vars
from orchestrator.catalog import find_scenario
from orchestrator.errors import OpsBenchError
from orchestrator.lifecycle import default_agent, scenario_vars
from orchestrator.spec import Scenario, load_scenario, spec_files

# Lifecycle steps: (workflow node identifier, job template step, playbook).
STEPS: list[tuple[str, str, str]] = [
    ("deploy", "deploy", "playbooks/deploy.yml"),
    ("baseline", "check", "playbooks/check.yml"),
    ("inject", "inject", "playbooks/inject.yml"),
    ("manifestation", "check", "playbooks/check.yml"),
    ("handover", "handover", "playbooks/handover.yml"),
    ("agent", "agent", "playbooks/agent.yml"),
    ("collect", "collect", "playbooks/collect.yml"),
    ("evaluate", "evaluate", "playbooks/evaluate.yml"),
    ("revoke", "revoke", "playbooks/revoke.yml"),
    ("remove", "remove", "playbooks/remove.yml"),
    ("recovery", "check", "playbooks/check.yml"),
    ("teardown", "teardown", "playbooks/teardown.yml"),
]
JOB_TEMPLATES = dict.fromkeys(s for _, s, _ in STEPS)  # ordered, unique

# Edges of one scenario's workflow: success, failure, always. Every failure leads to the undo
# steps that are owed (revoke, remove, teardown), as in orchestrator/lifecycle.py.
EDGES: dict[str, dict[str, list[str]]] = {
    "deploy": {"success": ["baseline"], "failure": ["teardown"]},
    "baseline": {"success": ["inject"], "failure": ["teardown"]},
    "inject": {"success": ["manifestation"], "failure": ["remove"]},
    "manifestation": {"success": ["handover"], "failure": ["remove"]},
    "handover": {"success": ["agent"], "failure": ["revoke"]},
    "agent": {"always": ["collect"]},
    "collect": {"success": ["evaluate"], "failure": ["revoke"]},
    "evaluate": {"always": ["revoke"]},
    "revoke": {"always": ["remove"]},
    "remove": {"success": ["recovery"], "failure": ["teardown"]},
    "recovery": {"always": ["teardown"]},
    "teardown": {},
}

CREDENTIAL_TYPE = "OpsBench kubeconfig"


class Unsafe(str):
    """A string the export playbook must hand to AWX verbatim (Jinja that AWX or the job expands)."""


def _unsafe_representer(dumper: yaml.SafeDumper, data: Unsafe) -> yaml.Node:
    return dumper.represent_scalar("!unsafe", str(data))


class _Dumper(yaml.SafeDumper):
    def ignore_aliases(self, data: Any) -> bool:
        return True

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)  # indented sequences, as yamllint expects


_Dumper.add_representer(Unsafe, _unsafe_representer)


@dataclass
class ClusterSpec:
    """One cluster of a campaign: its name, its kubeconfig (read by the export playbook) and its share."""

    name: str
    kubeconfig: str
    scenarios: list[str] = field(default_factory=list)


def _relocate(value: Any, project_dir: str) -> Any:
    """Replace this checkout's absolute paths by the project's path inside AWX's job environment."""
    text = json.dumps(value).replace(str(paths.PROJECT_ROOT), project_dir)
    return json.loads(text)


def workflow_vars(scn: Scenario, agent: str | None, project_dir: str) -> dict[str, Any]:
    """The workflow template's extra_vars: what the orchestrator would pass, for any trial."""
    run_dir = Path("/RUN_DIR")
    sv = scenario_vars(scn, "RUN_ID", run_dir)
    env = scn.environment
    ev: dict[str, Any] = {
        "opsbench_run_id": "{{ awx_workflow_job_id | default(tower_workflow_job_id) }}",
        "opsbench_run_dir": "{{ opsbench_awx_run_root }}/{{ opsbench_run_id }}",
        "opsbench_awx_run_root": "/runner/opsbench-runs",
        "opsbench_port_base": 20000,
        "opsbench_scenario": scn.id,
        "opsbench_environment": {"name": "environment", "role": scn.environment_role,
                                 "vars": _awx_env_vars(resolve_role_vars(scn.environment_role, "deploy",
                                                                         env["args"]))},
        "opsbench_faults": sv["faults"],
        "opsbench_manifest": sv["manifest"],
        "opsbench_tool_profile": "full",
        "opsbench_evaluators": sv["evaluators"],
        "opsbench_ground_truth": sv["ground_truth"],
        "opsbench_agent_command": agent or default_agent(scn),
        "opsbench_agent_budget": int(scn.data["budget"]["wallClockSeconds"]),
    }
    ev = _relocate(ev, project_dir)
    text = json.dumps(ev).replace("/RUN_DIR", "{{ opsbench_run_dir }}").replace("RUN_ID", "{{ opsbench_run_id }}")
    # The two templates above must keep naming AWX's variable, not themselves.
    out: dict[str, Any] = json.loads(text)
    out["opsbench_run_id"] = "{{ awx_workflow_job_id | default(tower_workflow_job_id) }}"
    out["opsbench_run_dir"] = "{{ opsbench_awx_run_root }}/{{ opsbench_run_id }}"
    return out


def _awx_env_vars(resolved: dict[str, Any]) -> dict[str, Any]:
    """AWX jobs run in pods (container groups) and do not share processes: no port forwards, cluster DNS."""
    if "env_k8s_shop_endpoints" in resolved:
        resolved = {**resolved, "env_k8s_shop_endpoints": "cluster-dns"}
    return resolved


def workflow_nodes(scn: Scenario, prefix: str, cluster: str, project_dir: str) -> list[dict[str, Any]]:
    sv = scenario_vars(scn, "RUN_ID", Path("/RUN_DIR"))
    nodes = []
    for ident, step, _ in STEPS:
        node: dict[str, Any] = {
            "identifier": ident,
            "unified_job_template": {"name": f"{prefix} {step}", "type": "job_template",
                                     "organization": {"name": "{{ opsbench_awx_organization }}"}},
            "inventory": {"name": f"{prefix} {cluster}", "organization": {"name": "{{ opsbench_awx_organization }}"}},
            "credentials": [{"name": f"{prefix} {cluster} kubeconfig",
                             "organization": {"name": "{{ opsbench_awx_organization }}"}}],
            "related": {kind + "_nodes": [{"identifier": t} for t in targets]
                        for kind, targets in EDGES[ident].items()},
        }
        if step == "check":
            node["extra_data"] = {"opsbench_checks": _relocate(sv["checks"][ident], project_dir)}
        nodes.append(node)
    return nodes


def export_playbook(scenarios: list[Scenario], clusters: list[ClusterSpec], trials: int = 1,
                    prefix: str = "opsbench", agent: str | None = None,
                    scm_url: str = "https://github.com/example/opsbench.git", scm_branch: str = "main",
                    project_dir: str = "/runner/project") -> str:
    """The AWX export playbook as YAML text."""
    by_id = {s.id: s for s in scenarios}
    for c in clusters:
        c.scenarios = c.scenarios or list(by_id)
        unknown = sorted(set(c.scenarios) - set(by_id))
        if unknown:
            raise ValueError(f"cluster {c.name}: scenarios not exported: {', '.join(unknown)}")
    setup_tasks: list[dict[str, Any]] = [
        {"name": "Create the kubeconfig credential type",
         "awx.awx.credential_type": {
             "name": CREDENTIAL_TYPE, "kind": "cloud", "state": "present",
             "description": "A kubeconfig file for the kubernetes backend (opsbench_kubeconfig).",
             "inputs": {"fields": [{"id": "kubeconfig", "type": "string", "label": "Kubeconfig",
                                    "secret": True, "multiline": True}], "required": ["kubeconfig"]},
             "injectors": {"file": {"template.kubeconfig": Unsafe("{{ kubeconfig }}")},
                           "env": {"K8S_AUTH_KUBECONFIG": Unsafe("{{ tower.filename.kubeconfig }}")},
                           "extra_vars": {"opsbench_kubeconfig": Unsafe("{{ tower.filename.kubeconfig }}")}}}},
        {"name": "Create the project",
         "awx.awx.project": {"name": prefix, "organization": "{{ opsbench_awx_organization }}",
                             "scm_type": "git", "scm_url": "{{ opsbench_awx_scm_url }}",
                             "scm_branch": "{{ opsbench_awx_scm_branch }}", "scm_update_on_launch": False,
                             "state": "present"}},
        {"name": "Create one kubeconfig credential per cluster",
         "awx.awx.credential": {"name": prefix + " {{ item.name }} kubeconfig",
                                "organization": "{{ opsbench_awx_organization }}",
                                "credential_type": CREDENTIAL_TYPE,
                                "inputs": {"kubeconfig": "{{ lookup('ansible.builtin.file', item.kubeconfig) }}"},
                                "state": "present"},
         "loop": "{{ opsbench_awx_clusters }}", "loop_control": {"label": "{{ item.name }}"}, "no_log": True},
        {"name": "Create one inventory per cluster",
         "awx.awx.inventory": {"name": prefix + " {{ item.name }}", "organization": "{{ opsbench_awx_organization }}",
                               "description": "The controller-side host of cluster {{ item.name }} (jobs act "
                                              "through its kubeconfig)",
                               "state": "present"},
         "loop": "{{ opsbench_awx_clusters }}", "loop_control": {"label": "{{ item.name }}"}},
        {"name": "Use the project's inventory as each inventory's source",
         "awx.awx.inventory_source": {"name": prefix + " {{ item.name }} localhost",
                                      "inventory": prefix + " {{ item.name }}",
                                      "organization": "{{ opsbench_awx_organization }}",
                                      "source": "scm", "source_project": prefix,
                                      "source_path": "inventories/local/hosts.yml", "overwrite": True,
                                      "update_on_launch": True, "state": "present"},
         "loop": "{{ opsbench_awx_clusters }}", "loop_control": {"label": "{{ item.name }}"}},
        {"name": "Create one job template per lifecycle step",
         "awx.awx.job_template": {"name": prefix + " {{ item.key }}", "organization": "{{ opsbench_awx_organization }}",
                                  "project": prefix, "playbook": "{{ item.value }}", "job_type": "run",
                                  "ask_inventory_on_launch": True, "ask_credential_on_launch": True,
                                  "ask_variables_on_launch": True, "state": "present"},
         "loop": "{{ opsbench_awx_job_templates | dict2items }}", "loop_control": {"label": "{{ item.key }}"}},
    ]
    workflows: list[dict[str, Any]] = []
    for c in clusters:
        for sid in c.scenarios:
            scn = by_id[sid]
            workflows.append({
                "name": f"Create the workflow of {sid} on {c.name}",
                "awx.awx.workflow_job_template": {
                    "name": f"{prefix} {sid} @ {c.name}", "organization": "{{ opsbench_awx_organization }}",
                    "description": scn.data["metadata"]["name"],
                    "extra_vars": {k: Unsafe(v) if isinstance(v, str) and "{{" in v else v
                                   for k, v in _unsafe_nested(workflow_vars(scn, agent, project_dir)).items()},
                    "workflow_nodes": workflow_nodes(scn, prefix, c.name, project_dir),
                    "destroy_current_nodes": True, "state": "present"}})
    launch_tasks: list[dict[str, Any]] = [
        {"name": "Launch the campaign's trials",
         "awx.awx.workflow_launch": {"name": prefix + " {{ item.0 }} @ {{ item.1 }}",
                                     "organization": "{{ opsbench_awx_organization }}",
                                     "wait": "{{ opsbench_awx_wait | bool }}", "timeout": 7200},
         "loop": "{{ opsbench_awx_trials }}", "loop_control": {"label": "{{ item.0 }} @ {{ item.1 }}"},
         "tags": ["never", "launch"]},
    ]
    # Trials as in ITBench's experiments file: each cluster runs its scenario list `trials` times;
    # the launch order interleaves clusters so they work in parallel while each runs its trials in turn.
    order: list[list[str]] = []
    for _ in range(trials):
        for i in range(max((len(c.scenarios) for c in clusters), default=0)):
            order.extend([c.scenarios[i], c.name] for c in clusters if i < len(c.scenarios))
    play = {
        "name": "Create OpsBench's AWX objects" + (" and launch a campaign" if order else ""),
        "hosts": "localhost", "gather_facts": False,
        "vars": {
            "opsbench_awx_organization": "Default",
            "opsbench_awx_scm_url": scm_url,
            "opsbench_awx_scm_branch": scm_branch,
            "opsbench_awx_wait": False,
            "opsbench_awx_clusters": [{"name": c.name, "kubeconfig": c.kubeconfig} for c in clusters],
            "opsbench_awx_job_templates": {step: pb for _, step, pb in STEPS if step in JOB_TEMPLATES},
            "opsbench_awx_trials": order,
        },
        "tasks": setup_tasks + workflows + launch_tasks,
    }
    header = ("---\n# Generated by `opsbench awx export` (orchestrator/awx.py); regenerate rather than edit.\n"
              "# Controller access: CONTROLLER_HOST plus CONTROLLER_OAUTH_TOKEN (or USERNAME/PASSWORD).\n"
              "# Create the objects: ansible-playbook THIS_FILE; launch the campaign too: --tags all,launch\n")
    return header + yaml.dump([play], Dumper=_Dumper, sort_keys=False, width=120, allow_unicode=True)


def _unsafe_nested(value: Any) -> Any:
    """Mark every string holding Jinja as !unsafe, at any depth (AWX or the job expands it, not the export)."""
    if isinstance(value, dict):
        return {k: _unsafe_nested(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unsafe_nested(v) for v in value]
    if isinstance(value, str) and "{{" in value:
        return Unsafe(value)
    return value


DEFAULT_CLUSTER = "kind=~/.kube/config"


def parse_cluster(text: str) -> ClusterSpec:
    """A ``--cluster`` argument: NAME=KUBECONFIG[:ID,ID...]."""
    name, sep, rest = text.partition("=")
    if not sep or not name or not rest:
        raise OpsBenchError(f"--cluster {text}: expected NAME=KUBECONFIG[:ID,ID...]")
    kubeconfig, _, ids = rest.partition(":")
    return ClusterSpec(name, kubeconfig, [i for i in ids.split(",") if i])


def export_scenarios(ids: Iterable[str]) -> list[Scenario]:
    """The scenarios to export: these ids (validated), by default every kubernetes-backend scenario."""
    wanted = list(ids)
    if wanted:
        return [find_scenario(s) for s in wanted]
    return [s for s in map(load_scenario, spec_files()) if s.backend == "kubernetes"]


def write_export(output: Path, scenario_ids: Iterable[str], clusters: Iterable[str], trials: int = 1,
                 agent: str | None = None, scm_url: str = "https://github.com/example/opsbench.git",
                 scm_branch: str = "main") -> str:
    """Write the export playbook to ``output`` (``opsbench awx export``); returns what was written, in words."""
    scns = export_scenarios(scenario_ids)
    specs = [parse_cluster(c) for c in list(clusters) or [DEFAULT_CLUSTER]]
    try:
        text = export_playbook(scns, specs, trials=trials, agent=agent, scm_url=scm_url, scm_branch=scm_branch)
    except ValueError as exc:
        raise OpsBenchError(str(exc)) from exc
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(text)
    return f"wrote {output}: {len(scns)} scenario(s), {len(specs)} cluster(s), {trials} trial(s) each"
