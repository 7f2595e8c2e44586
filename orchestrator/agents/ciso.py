"""Deterministic baseline CISO agent: a fetcher and a policy from templates for the controls it knows.

Reads the manifest ($OPSBENCH_MANIFEST), recognises the requirement of its assess task among the
CIS Debian controls below by keywords of the requirement text, and writes an Ansible fetcher
(playbook.yml) and a Rego checker (policy.rego) into its workspace and into its output
($OPSBENCH_OUTPUT, ciso_output schema). It never looks at the host itself: the evaluator runs
the artifacts. It proves the CISO scenarios solvable (docs/ciso.md).

``--invert`` writes a deliberately wrong policy (the decision negated): the negative control of
the tests. Run: ``opsbench run ciso-sshd-root-login-noncompliant --agent "python -m orchestrator.agents.ciso"``.
"""

from __future__ import annotations

import json
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

PACKAGE = "opsbench.ciso.check"
SSHD_VALUE = ("cat /etc/ssh/sshd_config.d/*.conf /etc/ssh/sshd_config 2>/dev/null"
              " | awk 'tolower($1) == tolower(\"{key}\") {{ print $2; exit }}'")
MODULE_LINES = ("grep -rhE '^[[:space:]]*(install|blacklist)[[:space:]]+{mod}([[:space:]]|$)'"
                " /etc/modprobe.d/ 2>/dev/null; true")

# Rego helpers every policy gets: perm_ok("644", "640") is true when the mode grants no bit the maximum does not.
HELPERS = """
perm_ok(got, max) if {
	g := split(got, "")
	m := split(max, "")
	count(g) == 3
	every i in [0, 1, 2] {
		bits.and(to_number(g[i]), 7 - to_number(m[i])) == 0
	}
}

value(p, probe) := trim_space(p[probe])
"""


@dataclass(frozen=True)
class Control:
    """One control the agent knows: keywords that recognise it, read-only probes, the Rego test of one host."""

    id: str
    keywords: tuple[str, ...]
    probes: dict[str, str]
    rego: str  # body rules of host_ok(p), p = the host's probe outputs


def _sshd(cid: str, key: str, rego: str, *words: str) -> Control:
    return Control(cid, (key.lower(), *words), {"value": SSHD_VALUE.format(key=key)}, rego)


def _perm(cid: str, path: str, mode: str, groups: tuple[str, ...]) -> Control:
    group_set = ", ".join(f'"{g}"' for g in groups)
    return Control(cid, (path, "permission"), {"stat": f"stat -c '%a %U %G' {path}"},
                   f"""host_ok(p) if {{
	parts := split(value(p, "stat"), " ")
	perm_ok(parts[0], "{mode}")
	parts[1] == "root"
	parts[2] in {{{group_set}}}
}}""")


def _module(cid: str, mod: str) -> Control:
    return Control(cid, (mod, "kernel module"), {"lines": MODULE_LINES.format(mod=mod)},
                   f"""host_ok(p) if {{
	lines := [trim_space(l) | some l in split(p.lines, "\\n")]
	some a in lines
	regex.match(`^install\\s+{mod}\\s+/bin/(false|true)$`, a)
	some b in lines
	regex.match(`^blacklist\\s+{mod}$`, b)
}}""")


CONTROLS = (
    _sshd("CIS Debian 5.2.10", "PermitRootLogin", 'host_ok(p) if lower(value(p, "value")) == "no"', "root"),
    _sshd("CIS Debian 5.2.7", "MaxAuthTries",
          'host_ok(p) if {\n\tv := value(p, "value")\n\tv != ""\n\tto_number(v) <= 4\n}'),
    _sshd("CIS Debian 5.2.22", "LoginGraceTime",
          'host_ok(p) if {\n\tv := value(p, "value")\n\tregex.match(`^[0-9]+$`, v)\n'
          '\tto_number(v) >= 1\n\tto_number(v) <= 60\n}'),
    _sshd("CIS Debian 5.2.11", "PermitEmptyPasswords",
          'host_ok(p) if lower(value(p, "value")) in {"no", ""}'),
    _sshd("CIS Debian 5.2.12", "X11Forwarding", 'host_ok(p) if lower(value(p, "value")) in {"no", ""}'),
    _perm("CIS Debian 6.1.1", "/etc/passwd", "644", ("root",)),
    _perm("CIS Debian 6.1.5", "/etc/shadow", "640", ("root", "shadow")),
    _perm("CIS Debian 5.2.1", "/etc/ssh/sshd_config", "600", ("root",)),
    Control("CIS Debian 5.5.1.2", ("pass_max_days",),
            {"value": "awk '$1 == \"PASS_MAX_DAYS\" { print $2 }' /etc/login.defs"},
            'host_ok(p) if {\n\tv := value(p, "value")\n\tv != ""\n\tto_number(v) <= 365\n\tto_number(v) > 0\n}'),
    Control("CIS Debian 5.5.1.1", ("pass_min_days",),
            {"value": "awk '$1 == \"PASS_MIN_DAYS\" { print $2 }' /etc/login.defs"},
            'host_ok(p) if {\n\tv := value(p, "value")\n\tv != ""\n\tto_number(v) >= 1\n}'),
    Control("CIS Debian 5.1.8", ("cron.allow", "cron"),
            {"allow": "test -f /etc/cron.allow && echo present || echo absent",
             "deny": "test -e /etc/cron.deny && echo present || echo absent"},
            'host_ok(p) if {\n\tvalue(p, "allow") == "present"\n\tvalue(p, "deny") == "absent"\n}'),
    _module("CIS Debian 1.1.1.1", "cramfs"),
    _module("CIS Debian 1.1.1.2", "freevxfs"),
    _module("CIS Debian 1.1.1.4", "hfs"),
    _module("CIS Debian 1.1.10", "usb-storage"),
    Control("CIS Debian 1.1.21", ("sticky bit", "world-writable"),
            {"dirs": "find / -xdev -type d -perm -0002 ! -perm -1000 2>/dev/null; true"},
            'host_ok(p) if value(p, "dirs") == ""'),
    Control("CIS Debian 5.3.3", ("sudo", "logfile"),
            {"lines": "grep -rhE '^[[:space:]]*Defaults[[:space:]].*logfile[[:space:]]*=' "
                      "/etc/sudoers /etc/sudoers.d/ 2>/dev/null; true"},
            'host_ok(p) if value(p, "lines") != ""'),
    Control("CIS Debian 6.1.11", ("owner", "group", "without an existing"),
            {"files": "find / -xdev \\( -nouser -o -nogroup \\) 2>/dev/null; true"},
            'host_ok(p) if value(p, "files") == ""'),
)


# -- Kubernetes (ITBench D.5.2, kubectl + OPA): one fetcher for every control, a Rego test per control ----------
K8S_KINDS = "namespaces,serviceaccounts,services,deployments,statefulsets,daemonsets,jobs,cronjobs,pods"
# Workload kinds -> where their pod spec lives; namespaces the requirements leave out.
K8S_POD_SPEC = r"""
pod_spec(obj) := obj.spec if obj.kind == "Pod"

pod_spec(obj) := obj.spec.template.spec if obj.kind in {"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"}

pod_spec(obj) := obj.spec.jobTemplate.spec.template.spec if obj.kind == "CronJob"

containers(spec) := array.concat(object.get(spec, "containers", []),
	array.concat(object.get(spec, "initContainers", []), object.get(spec, "ephemeralContainers", [])))

in_scope(obj) if not object.get(obj.metadata, "namespace", "") in {"kube-system"}

workload_violations contains sprintf("%s/%s/%s", [obj.kind, obj.metadata.namespace, obj.metadata.name]) if {
	some obj in input.items
	in_scope(obj)
	spec := pod_spec(obj)
	bad_spec(spec)
}
"""


@dataclass(frozen=True)
class K8sControl:
    """A CIS Kubernetes control: keywords and the Rego rules that define ``violations``."""

    id: str
    keywords: tuple[str, ...]
    rego: str


K8S_CONTROLS = (
    K8sControl("CIS Kubernetes 5.2.2", ("privileged",),
               "violations := workload_violations\n\nbad_spec(spec) if {\n\tsome c in containers(spec)\n"
               "\tc.securityContext.privileged == true\n}"),
    K8sControl("CIS Kubernetes 5.2.3-5.2.5", ("host", "namespace", "network"),
               "violations := workload_violations\n\nbad_spec(spec) if spec.hostNetwork == true\n\n"
               "bad_spec(spec) if spec.hostPID == true\n\nbad_spec(spec) if spec.hostIPC == true"),
    K8sControl("CIS Kubernetes 5.2.6", ("privilege escalation",),
               "violations := workload_violations\n\nbad_spec(spec) if {\n\tsome c in containers(spec)\n"
               "\tnot c.securityContext.allowPrivilegeEscalation == false\n}"),
    K8sControl("CIS Kubernetes 5.7.4", ("default namespace",),
               'violations contains sprintf("%s/%s", [obj.kind, obj.metadata.name]) if {\n'
               "\tsome obj in input.items\n\tobject.get(obj.metadata, \"namespace\", \"\") == \"default\"\n"
               "\tnot builtin_default(obj)\n}\n\n"
               'builtin_default(obj) if {\n\tobj.kind == "Service"\n\tobj.metadata.name == "kubernetes"\n}\n\n'
               'builtin_default(obj) if {\n\tobj.kind == "ServiceAccount"\n\tobj.metadata.name == "default"\n}\n\n'
               'builtin_default(obj) if obj.kind in {"Endpoints", "EndpointSlice"}'),
)


def k8s_fetcher(control: K8sControl, group: str) -> str:
    """Reads the recorded cluster state (host var cluster_state) or runs kubectl (host var kubeconfig)."""
    return f"""---
# Fetcher for {control.id}: the cluster's objects, read-only (recorded state or kubectl get).
- name: Collect evidence for {control.id}
  hosts: {group}
  gather_facts: false
  tasks:
    - name: Read the recorded cluster state
      ansible.builtin.set_fact:
        ciso_state: "{{{{ lookup('ansible.builtin.file', cluster_state) | from_json }}}}"
      when: cluster_state is defined

    - name: Ask the cluster (kubectl get, read-only)
      ansible.builtin.command:
        argv: [kubectl, --kubeconfig, "{{{{ kubeconfig }}}}", get, "{K8S_KINDS}", -A, -o, json]
      register: ciso_kubectl
      changed_when: false
      when: cluster_state is not defined

    - name: Write the evidence on the controller
      ansible.builtin.copy:
        dest: "{{{{ evidence_path }}}}"
        mode: "0644"
        content: >-
          {{{{ {{'control': '{control.id}',
               'items': (ciso_state if cluster_state is defined else ciso_kubectl.stdout | from_json)['items']}}
             | to_json }}}}
      delegate_to: localhost
      run_once: true
"""


def k8s_policy(control: K8sControl, invert: bool = False) -> str:
    decision = "compliant if not cluster_ok" if invert else "compliant if cluster_ok"
    return f"""# Checker for {control.id}: compliant when the cluster's objects hold no violation.
package {PACKAGE}

import rego.v1

default compliant := false

{decision}

cluster_ok if {{
	count(input.items) > 0
	count(violations) == 0
}}

{control.rego}
{K8S_POD_SPEC}"""


def recognise_k8s(goal: str) -> K8sControl | None:
    text = goal.lower()
    hits = [c for c in K8S_CONTROLS if all(k in text for k in c.keywords)]
    hits.sort(key=lambda c: -sum(len(k) for k in c.keywords))
    return hits[0] if hits else None


# -- Kubernetes with Kyverno (ITBench D.5.1 new policy, D.5.4 policy update) -------------------------------
def _each_container(inner: dict[str, Any]) -> dict[str, Any]:
    return {"=(ephemeralContainers)": [inner], "=(initContainers)": [inner], "containers": [inner]}


# Control id -> (policy name, rule name, kinds, the right pattern, a deliberately wrong one for --invert).
POD = ["Pod"]
KYVERNO_RULES: dict[str, tuple[str, str, list[str], dict[str, Any], dict[str, Any]]] = {
    "CIS Kubernetes 5.2.2": ("disallow-privileged-containers", "privileged-containers", POD,
                             {"spec": _each_container({"=(securityContext)": {"=(privileged)": "false"}})},
                             {"spec": {"containers": [{"securityContext": {"privileged": "true"}}]}}),
    "CIS Kubernetes 5.2.3-5.2.5": ("disallow-host-namespaces", "host-namespaces", POD,
                                   {"spec": {"=(hostPID)": "false", "=(hostIPC)": "false", "=(hostNetwork)": "false"}},
                                   {"spec": {"hostNetwork": "true"}}),
    "CIS Kubernetes 5.2.6": ("disallow-privilege-escalation", "privilege-escalation", POD,
                             {"spec": _each_container({"securityContext": {"allowPrivilegeEscalation": "false"}})},
                             {"spec": {"containers": [{"securityContext": {"allowPrivilegeEscalation": "true"}}]}}),
    "CIS Kubernetes 5.7.4": ("disallow-default-namespace", "default-namespace",
                             ["Pod", "Deployment", "StatefulSet", "DaemonSet", "Job", "CronJob"],
                             {"metadata": {"namespace": "!default"}}, {"metadata": {"namespace": "default"}}),
}


def kyverno_rule(control: K8sControl, invert: bool = False) -> dict[str, Any]:
    _, rule, kinds, right, wrong = KYVERNO_RULES[control.id]
    return {"name": rule, "match": {"any": [{"resources": {"kinds": kinds}}]},
            "exclude": {"any": [{"resources": {"namespaces": ["kube-system"]}}]},
            "validate": {"message": f"{control.id}: {rule} is not allowed.", "pattern": wrong if invert else right}}


def kyverno_policy(control: K8sControl, invert: bool = False, existing: str | None = None) -> str:
    """A ClusterPolicy for the control; with ``existing`` (an update task) that policy with the rule added."""
    if existing:
        doc = yaml.safe_load(existing)
        rules = [r for r in doc["spec"]["rules"] if r.get("name") != KYVERNO_RULES[control.id][1]]
        doc["spec"]["rules"] = [*rules, kyverno_rule(control, invert)]
        doc["metadata"] = {k: v for k, v in doc["metadata"].items() if k in ("name", "annotations")}
    else:
        doc = {"apiVersion": "kyverno.io/v1", "kind": "ClusterPolicy",
               "metadata": {"name": KYVERNO_RULES[control.id][0],
                            "annotations": {"policies.kyverno.io/title": control.id,
                                            "pod-policies.kyverno.io/autogen-controllers":
                                                "none" if len(KYVERNO_RULES[control.id][2]) > 1
                                                else "DaemonSet,Deployment,Job,StatefulSet,CronJob"}},
               "spec": {"validationFailureAction": "Audit", "background": True,
                        "rules": [kyverno_rule(control, invert)]}}
    return f"# Kyverno policy for {control.id}\n" + yaml.safe_dump(doc, sort_keys=False)


def recognise(goal: str) -> Control | None:
    """The known control whose keywords all occur in the requirement (the most specific match wins)."""
    text = goal.lower()
    hits = [c for c in CONTROLS if all(re.search(re.escape(k), text) for k in c.keywords)]
    hits.sort(key=lambda c: -sum(len(k) for k in c.keywords))
    return hits[0] if hits else None


def fetcher(control: Control, group: str) -> str:
    probes = json.dumps(control.probes, indent=None)
    return f"""---
# Fetcher for {control.id}: read-only probes on every target host, evidence written on the controller.
- name: Collect evidence for {control.id}
  hosts: {group}
  gather_facts: false
  vars:
    ciso_probes: {probes}
  tasks:
    - name: Run the read-only probes
      ansible.builtin.shell: "{{{{ item.value }}}}"
      loop: "{{{{ ciso_probes | dict2items }}}}"
      register: ciso_probe
      changed_when: false
      failed_when: false
      check_mode: false

    - name: Keep each probe's output
      ansible.builtin.set_fact:
        ciso_evidence: >-
          {{{{ dict(ciso_probe.results | map(attribute='item.key')
                   | zip(ciso_probe.results | map(attribute='stdout'))) }}}}

    - name: Write the evidence on the controller
      ansible.builtin.copy:
        dest: "{{{{ evidence_path }}}}"
        mode: "0644"
        content: >-
          {{{{ {{'control': '{control.id}',
               'hosts': dict(ansible_play_hosts | zip(ansible_play_hosts | map('extract', hostvars, 'ciso_evidence')))}}
             | to_json }}}}
      delegate_to: localhost
      run_once: true
"""


def policy(control: Control, invert: bool = False) -> str:
    decision = ("compliant if not all_hosts_ok" if invert else "compliant if all_hosts_ok")
    return f"""# Checker for {control.id}: compliant when every host's evidence satisfies the control.
package {PACKAGE}

import rego.v1

default compliant := false

{decision}

all_hosts_ok if {{
	count(input.hosts) > 0
	every _, p in input.hosts {{
		host_ok(p)
	}}
}}

{control.rego}
{HELPERS}"""


def write_kyverno(out_path: Path, control: K8sControl, policy_yaml: str, invert: bool) -> int:
    workspace = out_path.parent / "workspace"
    workspace.mkdir(parents=True, exist_ok=True)
    (workspace / "policy.yaml").write_text(policy_yaml)
    out_path.write_text(json.dumps({
        "schema": "opsbench/ciso/v1",
        "artifacts": [{"name": "policy.yaml", "kind": "kyverno", "content": policy_yaml}],
        "posture": {"compliant": None, "controls": [{"id": control.id, "status": "unknown",
                                                     "reason": "decided by Kyverno's reports on the cluster"}]},
        "explanation": f"recognised {control.id}; Kyverno policy from a template"
                       + (" (deliberately wrong pattern)" if invert else ""),
    }, indent=2))
    return 0


def main(argv: list[str]) -> int:
    invert = "--invert" in argv
    manifest = json.loads(Path(os.environ["OPSBENCH_MANIFEST"]).read_text())
    out_path = Path(os.environ["OPSBENCH_OUTPUT"])
    task = next((t for t in manifest["tasks"] if t["kind"] == "assess"), None)
    group = (manifest.get("targets") or {}).get("group", "all")
    targets = manifest.get("targets") or {}
    control: Control | K8sControl | None
    if targets.get("platform") == "kubernetes":
        control = recognise_k8s(task["goal"]) if task else None
    else:
        control = recognise(task["goal"]) if task else None
    if control is None:
        out_path.write_text(json.dumps({"schema": "opsbench/ciso/v1", "artifacts": [
            {"name": "README", "kind": "other", "content": "no known control matches the requirement"}],
            "posture": {"compliant": None}, "explanation": "requirement not recognised"}))
        return 0
    if isinstance(control, K8sControl) and task and "kyverno" in task["goal"].lower():
        existing = next((text for name, text in (targets.get("policies") or {}).items() if name in task["goal"]), None)
        return write_kyverno(out_path, control, kyverno_policy(control, invert, existing), invert)
    if isinstance(control, K8sControl):
        playbook, rego = k8s_fetcher(control, group), k8s_policy(control, invert)
    else:
        playbook, rego = fetcher(control, group), policy(control, invert)
    workspace = out_path.parent / "workspace"
    workspace.mkdir(parents=True, exist_ok=True)
    (workspace / "playbook.yml").write_text(playbook)
    (workspace / "policy.rego").write_text(rego)
    out_path.write_text(json.dumps({
        "schema": "opsbench/ciso/v1",
        "artifacts": [{"name": "playbook.yml", "kind": "ansible_playbook", "content": playbook},
                      {"name": "policy.rego", "kind": "rego", "content": rego}],
        "posture": {"compliant": None, "controls": [{"id": control.id, "status": "unknown",
                                                     "reason": "decided by the evaluator running the artifacts"}]},
        "explanation": f"recognised {control.id}; fetcher and checker from templates"
                       + (" (policy deliberately inverted)" if invert else ""),
    }, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
