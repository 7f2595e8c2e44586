"""CISO Kyverno classes (ITBench D.5.1 new policy, D.5.4 policy update) on a Kubernetes cluster.

The agent submits a Kyverno policy (artifact kind ``kyverno``, ``policy.yaml``). The evaluator
(``roles/evaluate_ciso_kyverno``) checks it, applies it to the cluster in Audit mode, waits for
Kyverno's background scan to write PolicyReports for the run's namespaces, removes the policy, and
scores from the reports:

- ``ipa``: the policy is a well-formed Kyverno ClusterPolicy/Policy (the structural check below:
  the Kyverno CRDs are not in kubernetes-validate's schemas) and the cluster accepted it.
- ``ce``: PolicyReports with results of this policy came back within the time limit.
- ``sap``: the posture the reports give (no failing workload = compliant) equals the ground truth's,
  and the workloads (Deployments, StatefulSets, DaemonSets, Jobs, CronJobs: Kyverno's auto-generated
  rules report them) that fail are exactly the ground truth's ``posture.violations``.
- ``ciso_pass`` = ``sap``; ``time_to_process`` as in ``orchestrator.evaluation.ciso``.

Pure functions: the role does the cluster calls. No cluster is reachable on the development
machines, so this is unit-tested on recorded-format PolicyReports only (docs/ciso.md).
"""

from __future__ import annotations

import copy
import json
from typing import Any

import yaml

from orchestrator.evaluation.ciso import agent_time, expected_posture

KYVERNO_API = ("kyverno.io/v1", "kyverno.io/v2beta1", "kyverno.io/v2")
POLICY_KINDS = ("ClusterPolicy", "Policy")
RULE_ACTIONS = ("validate", "mutate", "generate", "verifyImages")
VALIDATE_BODIES = ("pattern", "anyPattern", "deny", "foreach", "podSecurity", "cel", "manifests", "assert")
# Top-level workloads only: a ReplicaSet or Pod a Deployment owns is reported through its Deployment.
WORKLOAD_KINDS = ("Deployment", "StatefulSet", "DaemonSet", "Job", "CronJob")


def pick_policy(output: dict[str, Any]) -> str | None:
    """The Kyverno policy among the output's artifacts (kind ``kyverno``, else a YAML named policy.yaml/yml)."""
    arts = output.get("artifacts")
    if not isinstance(arts, list):
        return None
    for want in ("kind", "name"):
        for art in arts:
            if not isinstance(art, dict) or not isinstance(art.get("content"), str):
                continue
            if (want == "kind" and art.get("kind") == "kyverno") or \
               (want == "name" and str(art.get("name", "")) in ("policy.yaml", "policy.yml")):
                return str(art["content"])
    return None


def check_policy(text: str | None) -> tuple[dict[str, Any] | None, list[str]]:
    """Structural check of a Kyverno policy: (the document, problems). Problems empty means well-formed."""
    if not text or not text.strip():
        return None, ["no Kyverno policy submitted"]
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        return None, [f"the policy is not YAML: {' '.join(str(exc).split())[:200]}"]
    if len(docs) != 1 or not isinstance(docs[0], dict):
        return None, [f"the policy must be one YAML document (found {len(docs)})"]
    doc = docs[0]
    problems = []
    if doc.get("apiVersion") not in KYVERNO_API:
        problems.append(f"apiVersion must be one of {', '.join(KYVERNO_API)}")
    if doc.get("kind") not in POLICY_KINDS:
        problems.append("kind must be ClusterPolicy or Policy")
    meta = doc.get("metadata")
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta["name"]:
        problems.append("metadata.name is missing")
    spec = doc.get("spec")
    rules = spec.get("rules") if isinstance(spec, dict) else None
    if not isinstance(rules, list) or not rules:
        problems.append("spec.rules must be a non-empty list")
        rules = []
    for i, rule in enumerate(rules):
        where = f"spec.rules[{i}]"
        if not isinstance(rule, dict):
            problems.append(f"{where} is not a mapping")
            continue
        if not isinstance(rule.get("name"), str) or not rule["name"]:
            problems.append(f"{where}.name is missing")
        match = rule.get("match")
        if not isinstance(match, dict) or not ({"any", "all", "resources"} & set(match)):
            problems.append(f"{where}.match needs any, all or resources")
        actions = [a for a in RULE_ACTIONS if a in rule]
        if len(actions) != 1:
            problems.append(f"{where} needs exactly one of {', '.join(RULE_ACTIONS)}")
        elif actions == ["validate"]:
            body = rule["validate"]
            if not isinstance(body, dict) or not [b for b in VALIDATE_BODIES if b in body]:
                problems.append(f"{where}.validate needs one of {', '.join(VALIDATE_BODIES)}")
    return doc, problems


def audit_mode(doc: dict[str, Any], run_id: str) -> dict[str, Any]:
    """The policy as the evaluator applies it: Audit (reports, never blocks), background scan on, labelled
    with the run; a namespaced Policy goes to each namespace separately (the role sets the namespace)."""
    out = copy.deepcopy(doc)
    out.setdefault("metadata", {}).setdefault("labels", {})["opsbench.run"] = run_id
    out["metadata"].pop("namespace", None)
    spec = out.setdefault("spec", {})
    spec["background"] = True
    if "validationFailureAction" in spec or not any(
            isinstance(r, dict) and isinstance(r.get("validate"), dict) and "failureAction" in r["validate"]
            for r in spec.get("rules", [])):
        spec["validationFailureAction"] = "Audit"
    for rule in spec.get("rules", []):
        if isinstance(rule, dict) and isinstance(rule.get("validate"), dict) and "failureAction" in rule["validate"]:
            rule["validate"]["failureAction"] = "Audit"
    return out


def read_output(text: str | None) -> tuple[str, str | None, list[str]]:
    """(status, policy text, problems) from the agent's output file's text (None: no file)."""
    if text is None:
        return "no_submission", None, ["the agent submitted no output"]
    try:
        output = json.loads(text)
    except ValueError as exc:
        return "malformed", None, [f"the output is not JSON: {exc}"]
    return "scored", pick_policy(output if isinstance(output, dict) else {}), []


def _resources(report: dict[str, Any], result: dict[str, Any]) -> list[dict[str, Any]]:
    """A result's resources: its own list (reports before Kyverno 1.10) or the report's scope."""
    res = result.get("resources")
    if isinstance(res, list) and res:
        return [r for r in res if isinstance(r, dict)]
    scope = report.get("scope")
    return [scope] if isinstance(scope, dict) else []


def _stale(result: dict[str, Any], since: int) -> bool:
    """A result written before the submitted policy was applied: an update task's policy keeps its name, so the old
    version's results are in the reports until Kyverno scans again (found live)."""
    stamp = result.get("timestamp")
    return since > 0 and isinstance(stamp, dict) and int(stamp.get("seconds") or 0) < since


def results_of(reports: list[dict[str, Any]], policy: str, namespaces: list[str],
               since: int = 0) -> dict[str, dict[str, str]]:
    """Kind/namespace/name -> {rule: result} for every resource of the run's namespaces that ``policy`` reported on
    (only results written at or after ``since``, epoch seconds, when it is set)."""
    seen: dict[str, dict[str, str]] = {}
    for report in reports:
        ns = (report.get("metadata") or {}).get("namespace", "")
        for result in report.get("results") or []:
            if not isinstance(result, dict) or result.get("policy") != policy or _stale(result, since):
                continue
            for res in _resources(report, result):
                rns = res.get("namespace", ns)
                if namespaces and rns not in namespaces:
                    continue
                key = f"{res.get('kind')}/{rns}/{res.get('name')}"
                seen.setdefault(key, {})[str(result.get("rule", ""))] = str(result.get("result", ""))
    return seen


def failing_workloads(seen: dict[str, dict[str, str]]) -> list[str]:
    return sorted(k for k, rules in seen.items()
                  if k.split("/")[0] in WORKLOAD_KINDS and any(r in ("fail", "error") for r in rules.values()))


def score(*, status: str, policy_problems: list[str], applied: bool, apply_error: str,
          reports: list[dict[str, Any]] | None, policy_name: str, namespaces: list[str],
          ground_truth: dict[str, Any], timeline: dict[str, Any], since: int = 0) -> dict[str, Any]:
    """The scores of one Kyverno submission from what the role found on the cluster (results from ``since`` on)."""
    expected = expected_posture(ground_truth)
    want = sorted((ground_truth.get("posture") or {}).get("violations") or [])
    reasons = list(policy_problems)
    ipa = not policy_problems and applied
    if not policy_problems and not applied:
        reasons.append(f"the cluster refused the policy: {apply_error}" if apply_error
                       else "the policy was not applied")
    seen = results_of(reports or [], policy_name, namespaces, since) if ipa else {}
    ce = ipa and bool(seen)
    if ipa and not seen:
        reasons.append("no PolicyReport result of the policy for the run's namespaces within the time limit")
    failing = failing_workloads(seen)
    decided = (not failing) if ce else None
    sap = bool(ce and expected is not None and decided == expected and failing == want)
    if expected is None:
        reasons.append("the ground truth has no expected posture")
    elif decided is not None and decided != expected:
        reasons.append(f"the policy found the cluster {'compliant' if decided else 'non-compliant'}, "
                       f"it is {'compliant' if expected else 'non-compliant'}")
    elif ce and failing != want:
        reasons.append(f"the policy fails {failing}, the non-compliant workloads are {want}")
    return {"status": status, "ipa": int(ipa), "ce": int(ce), "sap": int(sap), "ciso_pass": int(sap),
            "posture": None if decided is None else ("compliant" if decided else "noncompliant"),
            "expected": None if expected is None else ("compliant" if expected else "noncompliant"),
            "failing": failing, "violations": want, "reported_resources": len(seen),
            "time_to_process": agent_time(timeline), "reasons": reasons}
