"""Export OpsBench to AWX: one playbook (awx.awx collection) that creates the project, the execution environment,
a kubeconfig credential type, one credential and inventory per cluster, one inventory per podman host, one job
template per lifecycle step and one workflow template per scenario and target (a cluster for kubernetes-backend
scenarios, a host for local-backend ones), and (tag ``launch``) runs a campaign.

AWX runs the same playbooks as the orchestrator, unchanged; everything they need travels as extra
vars. A workflow's own extra_vars carry the scenario (AWX allows Jinja there, so the run id is the
workflow job's id); its nodes carry only the per-step check lists. Failure edges always lead to fault
removal and teardown, as the orchestrator's undo steps do.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from orchestrator import paths
from orchestrator.argspecs import resolve_role_vars
from orchestrator.catalog import find_scenario
from orchestrator.errors import OpsBenchError
from orchestrator.run_vars import default_agent, scenario_vars
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


class IndentedDumper(yaml.SafeDumper):
    def ignore_aliases(self, data: Any) -> bool:
        return True

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)  # indented sequences, as yamllint expects


IndentedDumper.add_representer(Unsafe, _unsafe_representer)


@dataclass
class ClusterSpec:
    """One cluster of a campaign: its name, its kubeconfig (read by the export playbook) and its share."""

    name: str
    kubeconfig: str
    scenarios: list[str] = field(default_factory=list)
    backend = "kubernetes"


@dataclass
class HostSpec:
    """One podman host of a campaign (the local backend): its name, which is also the AWX instance group whose
    execution node runs on it, and its share of the scenarios."""

    name: str
    scenarios: list[str] = field(default_factory=list)
    backend = "local"


Target = ClusterSpec | HostSpec


def _relocate(value: Any, project_dir: str) -> Any:
    """Replace this checkout's absolute paths by the project's path inside AWX's job environment."""
    text = json.dumps(value).replace(str(paths.PROJECT_ROOT), project_dir)
    return json.loads(text)


RUN_ID = "awx-{{ awx_workflow_job_id | default(tower_workflow_job_id) }}"
"""A workflow job's run id: AWX's workflow job id (unique on that AWX), marked so it never looks like the
orchestrator's time-stamped ids in a shared results index."""
RUN_DIR = "{{ opsbench_awx_run_root }}/{{ opsbench_run_id }}"
PROJECT_DIR = "{{ playbook_dir | dirname }}"
"""Where a job's project checkout is (AWX: /runner/project in the execution environment), from the job itself."""
RUN_ROOTS = {"kubernetes": "/runner/opsbench-runs", "local": "/var/lib/opsbench/awx-runs"}
"""Default run directory roots: a ReadWriteMany volume mounted into every job pod (kubernetes backend), a host
directory exposed to the execution environment (local backend). `opsbench_awx_run_root` at launch overrides."""
PORT_BASE = 20000


def workflow_vars(scn: Scenario, agent: str | None, slot: int = 0) -> dict[str, Any]:
    """The workflow template's extra_vars: what the orchestrator would pass, for any trial. `slot`: the workflow's
    place among the workflows of its host, which gets it a port block of its own (local backend: environments on
    one host side by side, as campaigns run them)."""
    from orchestrator.ports import PORT_BLOCK

    run_dir = Path("/RUN_DIR")
    sv = scenario_vars(scn, "RUN_ID", run_dir)
    env = scn.environment
    ev: dict[str, Any] = {
        "opsbench_run_id": RUN_ID,
        "opsbench_run_dir": RUN_DIR,
        "opsbench_awx_run_root": RUN_ROOTS[scn.backend],
        "opsbench_project_dir": PROJECT_DIR,
        "opsbench_port_base": PORT_BASE + slot * PORT_BLOCK,
        "opsbench_scenario": scn.id,
        "opsbench_scenario_spec": str(scn.path.resolve()),
        "opsbench_environment": {"name": "environment", "role": scn.environment_role,
                                 "vars": _awx_env_vars(resolve_role_vars(scn.environment_role, "deploy",
                                                                         env["args"]))},
        "opsbench_faults": sv["faults"],
        "opsbench_manifest": sv["manifest"],
        "opsbench_tool_profile": "full",
        "opsbench_evaluators": sv["evaluators"],
        "opsbench_ground_truth": sv["ground_truth"],
        "opsbench_agent_command": _portable_agent(agent or default_agent(scn)),
        "opsbench_agent_budget": int(scn.data["budget"]["wallClockSeconds"]),
    }
    ev = _relocate(ev, "{{ opsbench_project_dir }}")
    text = json.dumps(ev).replace("/RUN_DIR", "{{ opsbench_run_dir }}").replace("RUN_ID", "{{ opsbench_run_id }}")
    # The templates above must keep naming AWX's variables and the job's own directory, not themselves.
    out: dict[str, Any] = json.loads(text)
    out.update(opsbench_run_id=RUN_ID, opsbench_run_dir=RUN_DIR, opsbench_project_dir=PROJECT_DIR)
    return out


def _portable_agent(command: str) -> str:
    """An agent command run with this machine's Python runs with the job's (the execution environment's)."""
    if command == sys.executable or command.startswith(sys.executable + " "):
        return "{{ ansible_playbook_python }}" + command[len(sys.executable):]
    return command


def _awx_env_vars(resolved: dict[str, Any]) -> dict[str, Any]:
    """AWX jobs run in pods (container groups) and do not share processes: no port forwards, cluster DNS."""
    if "env_k8s_shop_endpoints" in resolved:
        resolved = {**resolved, "env_k8s_shop_endpoints": "cluster-dns"}
    return resolved


def workflow_nodes(scn: Scenario, prefix: str, target: Target) -> list[dict[str, Any]]:
    """The workflow's nodes: one per lifecycle step, its edges, its inventory and credentials (a cluster's
    kubeconfig; nothing for a podman host, whose jobs run on it) and, on a host, its instance group."""
    sv = scenario_vars(scn, "RUN_ID", Path("/RUN_DIR"))
    org = {"name": "{{ opsbench_awx_organization }}"}
    nodes = []
    for ident, step, _ in STEPS:
        related: dict[str, Any] = {kind + "_nodes": [{"identifier": t} for t in targets]
                                   for kind, targets in EDGES[ident].items()}
        node: dict[str, Any] = {
            "identifier": ident,
            "unified_job_template": {"name": f"{prefix} {step}", "type": "job_template", "organization": org},
            "inventory": {"name": f"{prefix} {target.name}", "organization": org},
        }
        if isinstance(target, ClusterSpec):
            related["credentials"] = [{"name": f"{prefix} {target.name} kubeconfig", "organization": org}]
        else:
            related["instance_groups"] = [{"name": target.name}]
        node["related"] = related
        if step == "check":
            # AWX follows a job's success or failure: a check that is not ok must fail its job.
            node["extra_data"] = {"opsbench_checks": _relocate(sv["checks"][ident], "{{ opsbench_project_dir }}"),
                                  "opsbench_checks_required": True}
        nodes.append(node)
    return nodes


def export_playbook(scenarios: list[Scenario], targets: list[Target], trials: int = 1,
                    prefix: str = "opsbench", agent: str | None = None,
                    scm_url: str = "https://github.com/example/opsbench.git", scm_branch: str = "main") -> str:
    """The AWX export playbook as YAML text. Each target runs the scenarios of its backend (its share, by
    default all of them)."""
    by_id = {s.id: s for s in scenarios}
    for t in targets:
        t.scenarios = t.scenarios or [s.id for s in scenarios if s.backend == t.backend]
        unknown = sorted(set(t.scenarios) - set(by_id))
        if unknown:
            raise ValueError(f"{t.backend} target {t.name}: scenarios not exported: {', '.join(unknown)}")
        wrong = sorted(i for i in t.scenarios if by_id[i].backend != t.backend)
        if wrong:
            raise ValueError(f"{t.backend} target {t.name}: not {t.backend}-backend scenarios: {', '.join(wrong)}")
    clusters = [t for t in targets if isinstance(t, ClusterSpec)]
    org = "{{ opsbench_awx_organization }}"
    setup_tasks: list[dict[str, Any]] = [
        {"name": "Create the project",
         "awx.awx.project": {"name": prefix, "organization": org,
                             "scm_type": "git", "scm_url": "{{ opsbench_awx_scm_url }}",
                             "scm_branch": "{{ opsbench_awx_scm_branch }}", "scm_update_on_launch": False,
                             "state": "present"}},
        {"name": "Create the execution environment",
         "awx.awx.execution_environment": {"name": prefix, "organization": org, "image": "{{ opsbench_awx_ee_image }}",
                                           "pull": "missing", "state": "present",
                                           "description": "Built from playbooks/execution-environment.yml"}},
    ]
    if clusters:
        setup_tasks += [
            {"name": "Create the kubeconfig credential type",
             "awx.awx.credential_type": {
                 "name": CREDENTIAL_TYPE, "kind": "cloud", "state": "present",
                 "description": "A kubeconfig file for the kubernetes backend (opsbench_kubeconfig).",
                 "inputs": {"fields": [{"id": "kubeconfig", "type": "string", "label": "Kubeconfig",
                                        "secret": True, "multiline": True}], "required": ["kubeconfig"]},
                 "injectors": {"file": {"template.kubeconfig": Unsafe("{{ kubeconfig }}")},
                               "env": {"K8S_AUTH_KUBECONFIG": Unsafe("{{ tower.filename.kubeconfig }}")},
                               "extra_vars": {"opsbench_kubeconfig": Unsafe("{{ tower.filename.kubeconfig }}")}}}},
            {"name": "Create one kubeconfig credential per cluster",
             "awx.awx.credential": {"name": prefix + " {{ item.name }} kubeconfig", "organization": org,
                                    "credential_type": CREDENTIAL_TYPE,
                                    "inputs": {"kubeconfig": "{{ lookup('ansible.builtin.file', item.kubeconfig) }}"},
                                    "state": "present"},
             "loop": "{{ opsbench_awx_clusters }}", "loop_control": {"label": "{{ item.name }}"}, "no_log": True},
        ]
    setup_tasks += [
        {"name": "Create one inventory per cluster and podman host",
         "awx.awx.inventory": {"name": prefix + " {{ item.name }}", "organization": org,
                               "description": "{{ item.description }}", "state": "present"},
         "loop": "{{ opsbench_awx_targets }}", "loop_control": {"label": "{{ item.name }}"}},
        # localhost with the local connection: a cluster's jobs act through its kubeconfig; a host's jobs run on
        # the host itself (its instance group's execution node), where podman, the ports and the run root are.
        {"name": "Use the project's inventory as each inventory's source",
         "awx.awx.inventory_source": {"name": prefix + " {{ item.name }} localhost",
                                      "inventory": prefix + " {{ item.name }}", "organization": org,
                                      "source": "scm", "source_project": prefix,
                                      "source_path": INVENTORY_SOURCE, "overwrite": True,
                                      "update_on_launch": True, "state": "present"},
         "loop": "{{ opsbench_awx_targets }}", "loop_control": {"label": "{{ item.name }}"}},
        {"name": "Create one job template per lifecycle step",
         "awx.awx.job_template": {"name": prefix + " {{ item.key }}", "organization": org,
                                  "project": prefix, "playbook": "{{ item.value }}", "job_type": "run",
                                  "execution_environment": prefix,
                                  "ask_inventory_on_launch": True, "ask_credential_on_launch": True,
                                  "ask_variables_on_launch": True, "ask_instance_groups_on_launch": True,
                                  "state": "present"},
         "loop": "{{ opsbench_awx_job_templates | dict2items }}", "loop_control": {"label": "{{ item.key }}"}},
    ]
    workflows: list[dict[str, Any]] = []
    for t in targets:
        for slot, sid in enumerate(t.scenarios):
            scn = by_id[sid]
            workflows.append({
                "name": f"Create the workflow of {sid} on {t.name}",
                "awx.awx.workflow_job_template": {
                    "name": f"{prefix} {sid} @ {t.name}", "organization": org,
                    "description": scn.data["metadata"]["name"],
                    # Trials of one workflow run one at a time (AWX queues them): its port block is its own.
                    "allow_simultaneous": False,
                    "extra_vars": {k: Unsafe(v) if isinstance(v, str) and "{{" in v else v
                                   for k, v in _unsafe_nested(workflow_vars(scn, agent, slot)).items()},
                    "workflow_nodes": workflow_nodes(scn, prefix, t),
                    "destroy_current_nodes": True, "state": "present"}})
    launch_tasks: list[dict[str, Any]] = [
        {"name": "Launch the campaign's trials",
         "awx.awx.workflow_launch": {"name": prefix + " {{ item.0 }} @ {{ item.1 }}", "organization": org,
                                     "wait": "{{ opsbench_awx_wait | bool }}", "timeout": 7200},
         "loop": "{{ opsbench_awx_trials }}", "loop_control": {"label": "{{ item.0 }} @ {{ item.1 }}"},
         "tags": ["never", "launch"]},
    ]
    # Trials as in ITBench's experiments file: each target runs its scenario list `trials` times;
    # the launch order interleaves targets so they work in parallel while each runs its trials in turn.
    order: list[list[str]] = []
    for _ in range(trials):
        for i in range(max((len(t.scenarios) for t in targets), default=0)):
            order.extend([t.scenarios[i], t.name] for t in targets if i < len(t.scenarios))
    play = {
        "name": "Create OpsBench's AWX objects" + (" and launch a campaign" if order else ""),
        "hosts": "localhost", "gather_facts": False,
        "vars": {
            "opsbench_awx_organization": "Default",
            "opsbench_awx_scm_url": scm_url,
            "opsbench_awx_scm_branch": scm_branch,
            "opsbench_awx_ee_image": EE_IMAGE,
            "opsbench_awx_wait": False,
            **({"opsbench_awx_clusters": [{"name": c.name, "kubeconfig": c.kubeconfig} for c in clusters]}
               if clusters else {}),
            "opsbench_awx_targets": [
                {"name": t.name, "backend": t.backend,
                 "description": (f"The controller-side host of cluster {t.name} (jobs act through its kubeconfig)"
                                 if isinstance(t, ClusterSpec) else
                                 f"Podman host {t.name}: jobs run on it (instance group {t.name})")}
                for t in targets],
            "opsbench_awx_job_templates": {step: pb for _, step, pb in STEPS if step in JOB_TEMPLATES},
            "opsbench_awx_trials": order,
        },
        "tasks": setup_tasks + workflows + launch_tasks,
    }
    header = ("---\n# Generated by `opsbench awx export` (orchestrator/awx.py); regenerate rather than edit.\n"
              "# Controller access: CONTROLLER_HOST plus CONTROLLER_OAUTH_TOKEN (or USERNAME/PASSWORD).\n"
              "# Create the objects: ansible-playbook THIS_FILE; launch the campaign too: --tags all,launch\n")
    return header + yaml.dump([play], Dumper=IndentedDumper, sort_keys=False, width=120, allow_unicode=True)


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
DEFAULT_HOST = "local"
INVENTORY_SOURCE = "inventories/local/hosts.yml"
EE_IMAGE = "localhost/opsbench-ee:latest"
"""The image `ansible-builder build` makes from execution-environment.yml (docs/awx.md)."""


def parse_cluster(text: str) -> ClusterSpec:
    """A ``--cluster`` argument: NAME=KUBECONFIG[:ID,ID...]."""
    name, sep, rest = text.partition("=")
    if not sep or not name or not rest:
        raise OpsBenchError(f"--cluster {text}: expected NAME=KUBECONFIG[:ID,ID...]")
    kubeconfig, _, ids = rest.partition(":")
    return ClusterSpec(name, kubeconfig, [i for i in ids.split(",") if i])


def parse_host(text: str) -> HostSpec:
    """A ``--host`` argument: NAME[:ID,ID...] (NAME is also the host's AWX instance group)."""
    name, _, ids = text.partition(":")
    if not name or not all(c.isalnum() or c in "-_." for c in name):
        raise OpsBenchError(f"--host {text}: expected NAME[:ID,ID...] (NAME: letters, digits, - _ .)")
    return HostSpec(name, [i for i in ids.split(",") if i])


def export_scenarios(ids: Iterable[str], backends: Iterable[str]) -> list[Scenario]:
    """The scenarios to export: these ids (validated), by default every scenario of the given backends."""
    wanted = list(ids)
    if wanted:
        return [find_scenario(s) for s in wanted]
    chosen = set(backends)
    return [s for s in map(load_scenario, spec_files()) if s.backend in chosen]


def write_export(output: Path, scenario_ids: Iterable[str], clusters: Iterable[str], hosts: Iterable[str] = (),
                 trials: int = 1, agent: str | None = None,
                 scm_url: str = "https://github.com/example/opsbench.git", scm_branch: str = "main") -> str:
    """Write the export playbook to ``output`` (``opsbench awx export``); returns what was written, in words.
    No --cluster and no --host: one cluster `kind` (~/.kube/config) and one host `local`."""
    clusters, hosts = list(clusters), list(hosts)
    if not clusters and not hosts:
        clusters, hosts = [DEFAULT_CLUSTER], [DEFAULT_HOST]
    targets: list[Target] = [*map(parse_cluster, clusters), *map(parse_host, hosts)]
    names = [t.name for t in targets]
    if len(set(names)) != len(names):
        raise OpsBenchError(f"--cluster/--host names must differ: {', '.join(sorted(names))}")
    for t in targets:
        wrong = sorted(i for i in t.scenarios if find_scenario(i).backend != t.backend)
        if wrong:
            kind = "cluster (--cluster)" if t.backend == "kubernetes" else "podman host (--host)"
            raise OpsBenchError(f"{kind} {t.name} runs {t.backend}-backend scenarios; these are not: "
                                f"{', '.join(wrong)}")
    scns = export_scenarios(scenario_ids, {t.backend for t in targets})
    uncovered = sorted({s.backend for s in scns} - {t.backend for t in targets})
    if uncovered:
        need = {"kubernetes": "--cluster", "local": "--host"}
        raise OpsBenchError("no target for " + ", ".join(
            f"{b}-backend scenarios ({', '.join(s.id for s in scns if s.backend == b)}): give {need.get(b, 'a target')}"
            for b in uncovered))
    # A target given its share keeps it; the others run every exported scenario of their backend.
    picked = [s for s in scns if any(s.backend == t.backend for t in targets)]
    try:
        text = export_playbook(picked, targets, trials=trials, agent=agent, scm_url=scm_url, scm_branch=scm_branch)
    except ValueError as exc:
        raise OpsBenchError(str(exc)) from exc
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(text)
    workflows = sum(len(t.scenarios) for t in targets)
    exported = len({sid for t in targets for sid in t.scenarios})
    return (f"wrote {output}: {exported} scenario(s), {len(clusters)} cluster(s), {len(hosts)} podman host(s), "
            f"{workflows} workflow(s), {trials} trial(s) each")
