"""The Kyverno CISO classes (ITBench D.5.1 new policy, D.5.4 update) without a cluster.

No kube-apiserver or Kyverno can run on the development machines, so:
- the manifests the roles apply (baseline workloads, fault workloads) are checked against the Kubernetes
  OpenAPI schemas with kubernetes-validate; Kyverno's CRDs are not in those schemas, so policies get
  the structural check of orchestrator.evaluation.ciso_kyverno;
- the scoring is tested on PolicyReports in Kyverno's format (1.10+: one report per resource, ``scope``)
  produced by ``emulate`` below, a small emulation of the part of Kyverno's pattern language the
  templates use (conditional anchors, ``!`` negation, lists, Pod-rule autogen for Deployments). It is
  NOT Kyverno: it shows the templates and the scoring agree, not that Kyverno agrees. Fast (< 2 s).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from test_ciso_k8s import K8S_VERSION, _variant

from orchestrator import paths
from orchestrator.agents import ciso as agent
from orchestrator.evaluation import ciso_kyverno as kv

ROLES = paths.PROJECT_ROOT / "roles"
POLICIES = ROLES / "env_ciso_k8s_cluster" / "files" / "policies"
NAMESPACES = ["shop", "payments", "default"]


# -- a small emulation of Kyverno's validate.pattern (test only) ------------------------------------------
def _match(pattern: Any, value: Any) -> bool:
    if isinstance(pattern, dict):
        if not isinstance(value, dict):
            return False
        for key, sub in pattern.items():
            if key.startswith("=(") and key.endswith(")"):
                name = key[2:-1]
                if name in value and not _match(sub, value[name]):
                    return False
            elif key not in value or not _match(sub, value[key]):
                return False
        return True
    if isinstance(pattern, list):
        return isinstance(value, list) and all(_match(pattern[0], v) for v in value)
    text = str(value).lower() if isinstance(value, bool) else str(value)
    if isinstance(pattern, str) and pattern.startswith("!"):
        return text != pattern[1:]
    return text == str(pattern)


def _rule_applies(rule: dict[str, Any], obj: dict[str, Any], autogen: bool) -> tuple[bool, dict[str, Any]]:
    """Whether the rule matches obj, and what its pattern is checked against (a Deployment's pod template)."""
    kinds = [k for a in rule["match"]["any"] for k in a["resources"]["kinds"]]
    excluded = [n for a in (rule.get("exclude") or {}).get("any", []) for n in a["resources"].get("namespaces", [])]
    if obj["metadata"].get("namespace") in excluded:
        return False, obj
    if obj["kind"] in kinds:
        return True, obj
    if autogen and kinds == ["Pod"] and obj["kind"] == "Deployment":
        return True, obj["spec"]["template"]
    return False, obj


def emulate(policy_yaml: str, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """PolicyReports (one per resource, Kyverno 1.10+ layout) of a ClusterPolicy over a cluster's objects."""
    doc = yaml.safe_load(policy_yaml)
    autogen = (doc["metadata"].get("annotations") or {}).get("pod-policies.kyverno.io/autogen-controllers") != "none"
    reports = []
    for obj in items:
        if obj["kind"] not in ("Pod", "Deployment") or obj["metadata"].get("namespace") not in NAMESPACES:
            continue
        results = []
        for rule in doc["spec"]["rules"]:
            applies, target = _rule_applies(rule, obj, autogen)
            if applies:
                ok = _match(rule["validate"]["pattern"], target)
                results.append({"policy": doc["metadata"]["name"], "rule": rule["name"],
                                "result": "pass" if ok else "fail"})
        if results:
            reports.append({"apiVersion": "wgpolicyk8s.io/v1alpha2", "kind": "PolicyReport",
                            "metadata": {"namespace": obj["metadata"]["namespace"], "name": obj["metadata"]["uid"]},
                            "scope": {"apiVersion": obj["apiVersion"], "kind": obj["kind"],
                                      "namespace": obj["metadata"]["namespace"], "name": obj["metadata"]["name"]},
                            "results": results})
    return reports


# -- the scenarios --------------------------------------------------------------------------------------
def _kyverno_scenarios() -> list[dict[str, Any]]:
    out = []
    for d in sorted(paths.SPECS_DIR.glob("ciso-k8s-kyverno-*")):
        spec = yaml.safe_load((d / "scenario.yaml").read_text())
        gt = yaml.safe_load((d / "ground_truth.yaml").read_text())
        (fault,) = spec["faults"]
        out.append({"id": d.name, "goal": spec["tasks"][0]["goal"], "gt": gt, "workload": fault["args"]["workload"],
                    "policies": (spec["environment"].get("args") or {}).get("policies", []),
                    "class": spec["metadata"]["class"]})
    return out


KYVERNO_SCENARIOS = _kyverno_scenarios()


def _agent_output(tmp_path: Path, scenario: dict[str, Any], *argv: str,
                  monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps({
        "tasks": [{"id": "assess", "kind": "assess", "goal": scenario["goal"]}],
        "targets": {"platform": "kubernetes", "mode": "cluster", "group": "target",
                    "policies": {name: (POLICIES / f"{name}.yaml").read_text() for name in scenario["policies"]}}}))
    out = tmp_path / "output.json"
    monkeypatch.setenv("OPSBENCH_MANIFEST", str(manifest))
    monkeypatch.setenv("OPSBENCH_OUTPUT", str(out))
    assert agent.main(list(argv)) == 0
    return dict(json.loads(out.read_text()))


def _score(policy_yaml: str | None, scenario: dict[str, Any]) -> dict[str, Any]:
    doc, problems = kv.check_policy(policy_yaml)
    reports = emulate(policy_yaml, _variant(scenario["workload"])["items"]) if doc and not problems else []
    return kv.score(status="scored", policy_problems=problems, applied=not problems, apply_error="",
                    reports=reports, policy_name=(doc or {}).get("metadata", {}).get("name", ""),
                    namespaces=NAMESPACES, ground_truth=scenario["gt"],
                    timeline={"agent": {"started_at": 1.0, "ended_at": 2.0}})


def test_kyverno_scenarios_cover_new_and_update_classes_in_both_postures() -> None:
    classes = {(s["class"], s["gt"]["posture"]["compliant"]) for s in KYVERNO_SCENARIOS}
    assert classes == {(c, p) for c in ("cis-k8s-kyverno", "cis-k8s-kyverno-update") for p in (True, False)}
    for s in KYVERNO_SCENARIOS:
        violations = s["gt"]["posture"]["violations"]
        assert (violations == []) is s["gt"]["posture"]["compliant"], s["id"]


@pytest.mark.parametrize("scenario", KYVERNO_SCENARIOS, ids=[s["id"] for s in KYVERNO_SCENARIOS])
def test_baseline_kyverno_policy_passes_and_the_wrong_one_fails(tmp_path: Path, scenario: dict[str, Any],
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    right = _agent_output(tmp_path, scenario, monkeypatch=monkeypatch)
    (art,) = right["artifacts"]
    assert art["kind"] == "kyverno" and art["name"] == "policy.yaml"
    scores = _score(art["content"], scenario)
    assert (scores["ipa"], scores["ce"], scores["sap"], scores["ciso_pass"]) == (1, 1, 1, 1), scores
    assert scores["failing"] == scenario["gt"]["posture"]["violations"]
    wrong = _agent_output(tmp_path, scenario, "--invert", monkeypatch=monkeypatch)["artifacts"][0]["content"]
    bad = _score(wrong, scenario)
    assert (bad["ipa"], bad["ce"], bad["sap"]) == (1, 1, 0), bad
    if scenario["policies"]:
        # An update keeps the existing policy's name and rules, and the existing policy alone is not enough.
        (existing,) = scenario["policies"]
        doc = yaml.safe_load(art["content"])
        old = yaml.safe_load((POLICIES / f"{existing}.yaml").read_text())
        assert doc["metadata"]["name"] == existing
        assert {r["name"] for r in old["spec"]["rules"]} < {r["name"] for r in doc["spec"]["rules"]}
        if not scenario["gt"]["posture"]["compliant"]:
            assert _score((POLICIES / f"{existing}.yaml").read_text(), scenario)["sap"] == 0


@pytest.mark.parametrize(("text", "problem"), [
    (None, "no Kyverno policy submitted"),
    ("kind: [", "not YAML"),
    ("a: 1\n---\nb: 2\n", "one YAML document"),
    ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n", "apiVersion must be"),
    ("apiVersion: kyverno.io/v1\nkind: ClusterPolicy\nmetadata: {name: x}\nspec: {rules: []}\n", "non-empty list"),
    ("apiVersion: kyverno.io/v1\nkind: ClusterPolicy\nmetadata: {name: x}\nspec:\n  rules:\n"
     "  - {name: r, match: {any: [{resources: {kinds: [Pod]}}]}, validate: {message: m}}\n", "validate needs one of"),
    ("apiVersion: kyverno.io/v1\nkind: ClusterPolicy\nmetadata: {name: x}\nspec:\n  rules:\n"
     "  - {name: r, validate: {pattern: {a: b}}}\n", "match needs"),
])
def test_malformed_policies_fail_ipa_with_a_reason(text: str | None, problem: str) -> None:
    _doc, problems = kv.check_policy(text)
    assert any(problem in p for p in problems), problems
    scenario = KYVERNO_SCENARIOS[0]
    scores = kv.score(status="scored", policy_problems=problems, applied=False, apply_error="", reports=None,
                      policy_name="", namespaces=NAMESPACES, ground_truth=scenario["gt"], timeline={})
    assert (scores["ipa"], scores["ce"], scores["sap"]) == (0, 0, 0) and scores["reasons"]


def test_refused_policy_and_missing_reports_are_failures_with_reasons() -> None:
    scenario = KYVERNO_SCENARIOS[0]
    refused = kv.score(status="scored", policy_problems=[], applied=False, apply_error="admission webhook denied",
                       reports=[], policy_name="p", namespaces=NAMESPACES, ground_truth=scenario["gt"], timeline={})
    assert refused["ipa"] == 0 and "admission webhook denied" in refused["reasons"][0]
    silent = kv.score(status="scored", policy_problems=[], applied=True, apply_error="", reports=[],
                      policy_name="p", namespaces=NAMESPACES, ground_truth=scenario["gt"], timeline={})
    assert (silent["ipa"], silent["ce"], silent["sap"]) == (1, 0, 0)
    assert "no PolicyReport" in silent["reasons"][0]


def test_reports_in_the_older_layout_and_other_namespaces() -> None:
    reports = [{"metadata": {"namespace": "shop"}, "results": [
        {"policy": "p", "rule": "r", "result": "fail",
         "resources": [{"kind": "Deployment", "namespace": "shop", "name": "a"}]},
        {"policy": "other", "rule": "r", "result": "fail",
         "resources": [{"kind": "Deployment", "namespace": "shop", "name": "b"}]}]},
        {"metadata": {"namespace": "kube-system"}, "scope": {"kind": "Deployment", "name": "kube-proxy"},
         "results": [{"policy": "p", "rule": "r", "result": "fail"}]}]
    seen = kv.results_of(reports, "p", NAMESPACES)
    assert seen == {"Deployment/shop/a": {"r": "fail"}}
    assert kv.failing_workloads(seen) == ["Deployment/shop/a"]


def test_audit_mode_never_blocks_and_labels_the_run() -> None:
    control = agent.K8S_CONTROLS[0]
    doc = yaml.safe_load(agent.kyverno_policy(control))
    doc["spec"]["validationFailureAction"] = "Enforce"
    doc["metadata"]["namespace"] = "x"
    applied = kv.audit_mode(doc, "run-1")
    assert applied["spec"]["validationFailureAction"] == "Audit" and applied["spec"]["background"] is True
    assert applied["metadata"]["labels"]["opsbench.run"] == "run-1" and "namespace" not in applied["metadata"]
    assert doc["spec"]["validationFailureAction"] == "Enforce"  # the submission itself is untouched
    per_rule = copy.deepcopy(doc)
    del per_rule["spec"]["validationFailureAction"]
    per_rule["spec"]["rules"][0]["validate"]["failureAction"] = "Enforce"
    out = kv.audit_mode(per_rule, "run-1")
    assert out["spec"]["rules"][0]["validate"]["failureAction"] == "Audit"
    assert "validationFailureAction" not in out["spec"]


def test_manifests_the_cluster_roles_apply_are_valid_kubernetes_objects() -> None:
    """What env_ciso_k8s_cluster applies (the recording's namespaces, Deployments and Services without
    status and server-set fields) and what fault_ciso_k8s_workload applies (its Deployments)."""
    scope = ["shop", "payments"]
    base = _variant(None)["items"]
    applied = [o for o in base if o["kind"] == "Namespace" and o["metadata"]["name"] in scope]
    applied += [o for o in base if o["kind"] in ("Deployment", "Service") and o["metadata"].get("namespace") in scope]
    for f in sorted((ROLES / "fault_ciso_k8s_workload" / "files" / "workloads").glob("*.json")):
        applied += [o for o in json.loads(f.read_text()) if o["kind"] == "Deployment"]
    assert {o["kind"] for o in applied} == {"Namespace", "Deployment", "Service"}

    def strip(value: Any) -> Any:
        drop = {"status", "uid", "resourceVersion", "creationTimestamp", "clusterIP"}
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k not in drop}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    for obj in applied:
        kubernetes_validate.validate(strip(obj), K8S_VERSION, strict=True)


def test_existing_and_template_policies_pass_the_structural_check() -> None:
    for f in sorted(POLICIES.glob("*.yaml")):
        assert kv.check_policy(f.read_text())[1] == [], f.name
    for control in agent.K8S_CONTROLS:
        for invert in (False, True):
            assert kv.check_policy(agent.kyverno_policy(control, invert))[1] == [], control.id


def test_an_update_is_scored_on_the_new_versions_results_only() -> None:
    """An update keeps the policy's name: the old version's results (written before the apply) must not count."""
    from orchestrator.evaluation.ciso_kyverno import results_of

    def result(outcome: str, seconds: int) -> dict[str, object]:
        return {"policy": "disallow-privileged-containers", "rule": "privileged", "result": outcome,
                "timestamp": {"seconds": seconds, "nanos": 0},
                "resources": [{"kind": "Deployment", "namespace": "payments", "name": "report-worker"}]}

    old = {"metadata": {"namespace": "payments"}, "results": [result("pass", 1000)]}
    assert results_of([old], "disallow-privileged-containers", ["payments"], since=0) == {
        "Deployment/payments/report-worker": {"privileged": "pass"}}
    assert results_of([old], "disallow-privileged-containers", ["payments"], since=1001) == {}
    new = {"metadata": {"namespace": "payments"}, "results": [result("fail", 1002)]}
    assert results_of([new], "disallow-privileged-containers", ["payments"], since=1001) == {
        "Deployment/payments/report-worker": {"privileged": "fail"}}
