"""Local CISO scenarios, both postures, on evidence recorded from real target hosts.

tests/unit/data/ciso_evidence/<scenario>.json holds, for every local scenario, what the
baseline agent's fetcher wrote when it ran against a real, misconfigured target host (container
ob-<run>-cishost) during a live campaign (`opsbench campaign <ciso-* ids> --agent
"python -m orchestrator.agents.ciso"`; the run id is in the file; `python tests/unit/record_ciso_evidence.py
<runs dir>` refreshes them). The fetcher is the same with --invert (only the policy differs), so
evaluating the baseline policy and the deliberately wrong one on this evidence with the real engine
decides each scenario as a live run would: the baseline must pass every recorded scenario and the
inverted policy must fail every one. The live e2e tests (tests/e2e/test_ciso.py) check the rest of
the loop (fetcher run, guard, clean-up). Fast (~2 s)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from orchestrator import paths
from orchestrator.agents import ciso as agent
from orchestrator.evaluation import ciso

DATA = Path(__file__).parent / "data" / "ciso_evidence"


def _local_scenarios() -> dict[str, str]:
    """Local (CIS Debian host) scenario id -> class."""
    out = {}
    for d in sorted(paths.SPECS_DIR.glob("ciso-*")):
        spec = yaml.safe_load((d / "scenario.yaml").read_text())
        if spec["environment"]["application"] == "ciso_host":
            out[d.name] = spec["metadata"]["class"]
    return out


LOCAL = _local_scenarios()
# Scenarios with evidence recorded (all 36 by the campaign of 2026-11-22: see docs/ciso.md).
RECORDED = [s for s in LOCAL if (DATA / f"{s}.json").is_file()]


def test_recorded_evidence_covers_every_class_in_both_postures() -> None:
    assert len(LOCAL) >= 36
    covered = {(LOCAL[s], s.endswith("-noncompliant")) for s in RECORDED}
    assert covered == {(c, nc) for c in set(LOCAL.values()) for nc in (True, False)}, sorted(covered)
    assert not [f for f in DATA.glob("*.json") if f.stem not in LOCAL], "evidence of an unknown scenario"
    assert sorted(RECORDED) == sorted(LOCAL), "every local scenario has recorded evidence"


def _decide(policy: str, evidence: Any) -> bool | None:
    package = ciso.package_of(policy)
    assert package
    result = ciso.rego_child(policy, f"data.{package}.compliant", json.dumps(evidence))
    assert result["ok"], result
    return result["value"] if result["defined"] else None


@pytest.mark.parametrize("scenario", RECORDED)
def test_baseline_policy_passes_and_inverted_fails_on_recorded_evidence(scenario: str) -> None:
    record = json.loads((DATA / f"{scenario}.json").read_text())
    assert record["scenario"] == scenario
    d = paths.SPECS_DIR / scenario
    spec = yaml.safe_load((d / "scenario.yaml").read_text())
    expected = yaml.safe_load((d / "ground_truth.yaml").read_text())["posture"]["compliant"]
    control = agent.recognise(next(t["goal"] for t in spec["tasks"] if t["kind"] == "assess"))
    assert control is not None
    evidence = record["evidence"]
    assert evidence["control"] == control.id and len(evidence["hosts"]) == 1
    assert set(next(iter(evidence["hosts"].values()))) == set(control.probes)
    assert _decide(agent.policy(control), evidence) is expected
    assert _decide(agent.policy(control, invert=True), evidence) is (not expected)
