"""CISO assessment scoring: Rego through regopy (a real OPA engine), bad inputs, the baseline agent's templates."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from orchestrator import paths
from orchestrator.agents import ciso as agent
from orchestrator.evaluation import ciso
from orchestrator.evaluation.outputs import schema_errors

GOOD = 'package demo\nimport rego.v1\ndefault compliant := false\ncompliant if input.value == "no"\n'


# -- the engine ----------------------------------------------------------------------------
def test_decision_true_and_false_both_come_back() -> None:
    assert ciso.decide(GOOD, "demo", {"value": "no"}) == (True, "")
    # rego-cpp answers a bare reference whose value is false as undefined; the binding must not.
    assert ciso.decide(GOOD, "demo", {"value": "yes"}) == (False, "")


def test_policy_that_does_not_compile_fails_ipa_with_the_engine_message() -> None:
    ok, package, why = ciso.compile_policy("package demo\ncompliant if {\n")
    assert (ok, package) == (False, "demo")
    assert "does not compile" in why and "unclosed" in why


@pytest.mark.parametrize(("policy", "reason"), [
    ("", "no Rego policy"),
    ("compliant := true\n", "no package"),
])
def test_missing_policy_or_package_fails_ipa(policy: str, reason: str) -> None:
    ok, _, why = ciso.compile_policy(policy)
    assert not ok and reason in why


def test_policy_without_a_result_is_reported_not_guessed() -> None:
    never = "package demo\nimport rego.v1\ncompliant if input.value == \"never\"\n"
    assert ciso.compile_policy(never)[0]
    decided, why = ciso.decide(never, "demo", {"value": "no"})
    assert decided is None and "undefined" in why


def test_non_boolean_decision_is_rejected() -> None:
    decided, why = ciso.decide("package demo\ncompliant := \"yes\"\n", "demo", {})
    assert decided is None and "not a boolean" in why


def test_policy_evaluation_is_time_bounded() -> None:
    start = time.monotonic()
    result = ciso.rego_query(GOOD, "data.demo.compliant", {"value": "no"}, timeout=0.001)
    assert not result["ok"] and "exceeded" in result["error"]
    assert time.monotonic() - start < 5


# -- scoring -------------------------------------------------------------------------------
def _score(**kw: Any) -> dict[str, Any]:
    args: dict[str, Any] = {"status": "scored", "iec": True, "ipa": True, "ce": True, "decided": False,
                            "expected": False, "reasons": [], "time_to_process": 3.5}
    return ciso.score(**{**args, **kw})


def test_sap_and_pass_need_the_decision_to_match_the_ground_truth() -> None:
    right = _score()
    assert (right["iec"], right["ipa"], right["ce"], right["sap"], right["ciso_pass"]) == (1, 1, 1, 1, 1)
    assert right["posture"] == right["expected"] == "noncompliant" and right["time_to_process"] == 3.5
    wrong = _score(decided=True)
    assert (wrong["sap"], wrong["ciso_pass"]) == (0, 0)
    assert any("decided compliant" in r for r in wrong["reasons"])


@pytest.mark.parametrize("broken", ["iec", "ipa", "ce"])
def test_a_failed_earlier_stage_fails_sap_even_with_a_lucky_decision(broken: str) -> None:
    assert _score(**{broken: False})["sap"] == 0


def test_no_expected_posture_never_passes() -> None:
    scores = _score(expected=None)
    assert scores["sap"] == 0 and any("no expected posture" in r for r in scores["reasons"])


def test_expected_posture_and_agent_time_come_from_ground_truth_and_timeline() -> None:
    assert ciso.expected_posture({"posture": {"compliant": True}}) is True
    assert ciso.expected_posture({}) is None
    assert ciso.agent_time({"agent": {"started_at": 100.0, "ended_at": 112.25}}) == 12.25
    assert ciso.agent_time({}) is None


def test_host_snapshot_diff_names_added_deleted_and_changed_paths() -> None:
    before = {"/etc/a": "f 644 0 0 1 md5=x", "/etc/b": "f 644 0 0 1"}
    after = {"/etc/a": "f 600 0 0 1 md5=x", "/etc/c": "d 755 0 0 4096"}
    assert ciso.diff_snapshots(before, after) == ["added /etc/c", "deleted /etc/b", "changed /etc/a"]
    assert ciso.diff_snapshots(before, dict(before)) == []


def test_artifacts_are_picked_by_kind_then_name() -> None:
    arts = ciso.pick_artifacts({"artifacts": [{"name": "policy.rego", "kind": "other", "content": "p"},
                                              {"kind": "ansible_playbook", "content": "f"}]})
    assert (arts.fetcher, arts.checker) == ("f", "p")
    assert ciso.pick_artifacts({}).problem


def test_missing_or_broken_output_is_scored_without_touching_the_host(tmp_path: Path) -> None:
    gt = {"posture": {"compliant": True}}
    missing = ciso.assess(tmp_path / "none.json", gt, tmp_path / "inv", "no-such-container", tmp_path / "w", {})
    assert missing["status"] == "no_submission" and missing["ciso_pass"] == 0
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert ciso.assess(bad, gt, tmp_path / "inv", "no-such-container", tmp_path / "w", {})["status"] == "malformed"


def test_fetcher_that_does_not_parse_fails_iec_and_never_runs(tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    out.write_text(json.dumps({"artifacts": [
        {"kind": "ansible_playbook", "content": "- hosts: target\n  tasks:\n    - nosuch.module.here: {}\n"},
        {"kind": "rego", "content": GOOD}]}))
    inv = tmp_path / "inv.yml"
    inv.write_text("all: {children: {target: {hosts: {h: {}}}}}\n")
    scores = ciso.assess(out, {"posture": {"compliant": False}}, inv, "no-such-container", tmp_path / "w", {})
    assert (scores["iec"], scores["ipa"], scores["ce"], scores["sap"]) == (0, 1, 0, 0)
    assert any("does not parse" in r for r in scores["reasons"])
    assert not (tmp_path / "w" / "fetcher.log").exists()


def test_output_of_the_baseline_agent_matches_the_ciso_schema(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps({"tasks": [{"id": "assess", "kind": "assess",
                                               "goal": "Check that PermitRootLogin is no for root logins."}],
                                    "targets": {"inventory": "/x", "group": "target"}}))
    monkeypatch.setenv("OPSBENCH_MANIFEST", str(manifest))
    monkeypatch.setenv("OPSBENCH_OUTPUT", str(tmp_path / "output.json"))
    assert agent.main([]) == 0
    output = json.loads((tmp_path / "output.json").read_text())
    assert schema_errors(output, "assess") == []
    assert (tmp_path / "workspace" / "playbook.yml").read_text() == output["artifacts"][0]["content"]
    assert "hosts: target" in output["artifacts"][0]["content"]


# -- the baseline agent's templates ----------------------------------------------------------
def _ciso_scenarios() -> list[Path]:
    return sorted(p for p in paths.SPECS_DIR.glob("ciso-*") if p.is_dir())


def _cis_number(text: str) -> str:
    match = re.search(r"(\d+(?:\.\d+)+)\s*(?:\S.*)?$", text.replace("CIS Debian 12 ", "CIS Debian "))
    assert match, text
    return match.group(1)


def test_there_are_at_least_twenty_ciso_scenarios_in_both_variants() -> None:
    ids = [p.name for p in _ciso_scenarios()]
    assert len(ids) >= 20
    controls = {i.removesuffix("-noncompliant").removesuffix("-compliant") for i in ids}
    assert all(f"{c}-compliant" in ids and f"{c}-noncompliant" in ids for c in controls)


@pytest.mark.parametrize("scenario", _ciso_scenarios(), ids=lambda p: p.name)
def test_agent_recognises_each_requirement_and_ground_truth_holds_the_posture(scenario: Path) -> None:
    spec = yaml.safe_load((scenario / "scenario.yaml").read_text())
    gt = yaml.safe_load((scenario / "ground_truth.yaml").read_text())
    goal = next(t["goal"] for t in spec["tasks"] if t["kind"] == "assess")
    if spec["environment"]["application"].startswith("ciso_k8s"):
        k8s = agent.recognise_k8s(goal)
        assert k8s is not None, goal
        assert gt["posture"]["control"].startswith(k8s.id + " "), (k8s.id, gt["posture"]["control"])
    else:
        control = agent.recognise(goal)
        assert control is not None, goal
        assert _cis_number(control.id) == gt["posture"]["control"].split()[3]
    assert gt["posture"]["compliant"] is (not scenario.name.endswith("-noncompliant"))
    assert "compliant" not in goal.lower().replace("non-compliant", ""), "the goal must not give the posture away"


# Probe outputs of one host for every control the agent knows: (compliant, non-compliant).
EVIDENCE: dict[str, tuple[dict[str, str], dict[str, str]]] = {
    "5.2.10": ({"value": "no"}, {"value": "yes"}),
    "5.2.7": ({"value": "4"}, {"value": "10"}),
    "5.2.22": ({"value": "60"}, {"value": "300"}),
    "5.2.11": ({"value": "no"}, {"value": "yes"}),
    "5.2.12": ({"value": ""}, {"value": "yes"}),
    "6.1.1": ({"stat": "644 root root"}, {"stat": "666 root root"}),
    "6.1.5": ({"stat": "640 root shadow"}, {"stat": "644 root shadow"}),
    "5.2.1": ({"stat": "600 root root"}, {"stat": "600 nobody root"}),
    "5.5.1.2": ({"value": "365"}, {"value": "99999"}),
    "5.5.1.1": ({"value": "1"}, {"value": "0"}),
    "5.1.8": ({"allow": "present", "deny": "absent"}, {"allow": "absent", "deny": "present"}),
    "1.1.1.1": ({"lines": "install cramfs /bin/false\nblacklist cramfs"}, {"lines": "blacklist cramfs"}),
    "1.1.1.2": ({"lines": "install freevxfs /bin/true\nblacklist freevxfs"}, {"lines": ""}),
    "1.1.1.4": ({"lines": "blacklist hfs\ninstall hfs /bin/false"}, {"lines": "install hfs /bin/false"}),
    "1.1.10": ({"lines": "install usb-storage /bin/false\nblacklist usb-storage"}, {"lines": ""}),
    "1.1.21": ({"dirs": ""}, {"dirs": "/srv/exchange"}),
    "5.3.3": ({"lines": 'Defaults logfile="/var/log/sudo.log"'}, {"lines": ""}),
    "6.1.11": ({"files": ""}, {"files": "/var/lib/legacy-app"}),
}


def _decide_here(policy: str, package: str, evidence: Any) -> bool | None:
    """The engine call of ciso.decide without its child process (many evaluations, kept fast)."""
    result = ciso.rego_child(policy, f"data.{package}.compliant", json.dumps(evidence))
    assert result["ok"], result
    return result["value"] if result["defined"] else None


@pytest.mark.parametrize("control", agent.CONTROLS, ids=lambda c: c.id)
def test_each_template_policy_decides_both_postures_and_inverted_is_wrong(control: agent.Control) -> None:
    good, bad = EVIDENCE[_cis_number(control.id)]
    assert set(good) == set(control.probes), "evidence keys are the probes the fetcher runs"
    policy = agent.policy(control)
    package = ciso.package_of(policy)
    assert package
    for probes, expected in ((good, True), (bad, False)):
        evidence = {"control": control.id, "hosts": {"h1": probes}}
        assert _decide_here(policy, package, evidence) is expected
        assert _decide_here(agent.policy(control, invert=True), package, evidence) is (not expected)
    # Every host must satisfy the control: one bad host of two makes the system non-compliant.
    assert _decide_here(policy, package, {"hosts": {"h1": good, "h2": bad}}) is False
    assert _decide_here(policy, package, {"hosts": {}}) is False


def test_template_fetcher_parses_as_an_ansible_playbook(tmp_path: Path) -> None:
    inv = tmp_path / "inv.yml"
    inv.write_text("all: {children: {target: {hosts: {h: {ansible_connection: local}}}}}\n")
    for control in agent.CONTROLS:
        yaml.safe_load(agent.fetcher(control, "target"))  # every template is YAML
    playbook = tmp_path / "playbook.yml"
    playbook.write_text(agent.fetcher(agent.CONTROLS[0], "target"))
    assert ciso.syntax_check(playbook, inv) == (True, "")


def test_unknown_requirement_gets_an_honest_non_answer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    manifest = tmp_path / "m.json"
    manifest.write_text(json.dumps({"tasks": [{"id": "a", "kind": "assess", "goal": "Ensure NTP is configured."}]}))
    monkeypatch.setenv("OPSBENCH_MANIFEST", str(manifest))
    monkeypatch.setenv("OPSBENCH_OUTPUT", str(tmp_path / "o.json"))
    assert agent.main([]) == 0
    out = json.loads((tmp_path / "o.json").read_text())
    assert out["posture"]["compliant"] is None and all(a["kind"] != "rego" for a in out["artifacts"])
    assert os.path.exists(tmp_path / "o.json")


def test_assess_scenarios_default_to_the_ciso_baseline_agent() -> None:
    from orchestrator.catalog import find_scenario
    from orchestrator.run_vars import DEFAULT_AGENT, default_agent

    assert default_agent(find_scenario("ciso-sshd-root-login-compliant")).endswith("-m orchestrator.agents.ciso")
    assert default_agent(find_scenario("loopweb-web-down")) == DEFAULT_AGENT
