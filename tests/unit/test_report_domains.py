"""The report's domain sections: each is there exactly when the runs hold trials of its domain (SRE, CUJ,
CISO, FinOps, DevOps), with the metrics that domain's evaluators write, averaged right. Synthetic runs of every
domain are recorded through the store as the lifecycle records them (`populate_domains`, also used by the layout
test in Chromium)."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from synthetic_runs import AGENT_A, AGENT_B, LABEL_A, LABEL_B, SCENARIOS, Clock, populate

from orchestrator import report, results, store

pytestmark = pytest.mark.usefixtures("home")  # a private OPSBENCH_HOME (conftest)

SVG = "{http://www.w3.org/2000/svg}"
OVERALL = ["leaderboard", "pass-rate", "complexity"]
SRE = ["ntam", "agent-time", "traces"]
BY_DOMAIN = {"SRE": SRE, "CUJ": ["cuj"], "CISO": ["ciso"], "FinOps": ["finops"], "DevOps": ["devops"]}


def _meta(domain: str, cls: str, level: str = "Easy", traces: bool = True) -> dict[str, Any]:
    return {"name": f"{domain} {cls}", "domain": domain, "class": cls, "complexity": level,
            "observability": {"metrics": True, "traces": traces, "logs": True}}


def _ciso(iec: int, ipa: int, ce: int, sap: int, seconds: float, status: str = "scored") -> dict[str, Any]:
    return {"ciso": {"status": status, "iec": iec, "ipa": ipa, "ce": ce, "sap": sap, "ciso_pass": sap,
                     "posture": "compliant", "expected": "compliant", "time_to_process": seconds, "reasons": []}}


def _kyverno(ipa: int, ce: int, sap: int, seconds: float) -> dict[str, Any]:
    return {"ciso_kyverno": {"status": "scored", "ipa": ipa, "ce": ce, "sap": sap, "ciso_pass": sap,
                             "failing": [], "violations": [], "time_to_process": seconds, "reasons": []}}


def _diagnosis(passed: int, **cuj: float | None) -> dict[str, Any]:
    return {"diagnosis": {"status": "scored", "fl_pass": passed, "ntam_fl": 1.0 if passed else 0.4,
                          "ntam_fpc": 0.9 if passed else 0.3, **cuj}}


def _workspace(**stages: bool) -> dict[str, Any]:
    passed = sum(stages.values())
    return {"workspace": {"status": "scored", "workspace_pass": int(passed == len(stages)), "stages_passed": passed,
                          "stages_total": len(stages), "stage_pass_rate": round(passed / len(stages), 3),
                          "stages": [{"task": task, "kind": "write-tests" if task == "write-test" else "fix",
                                      "project": "invoicer", "passed": ok, "reason": "make check"}
                                     for task, ok in stages.items()], "report": "scored", "report_reason": ""}}


# (run id, agent command, scenario, scenario meta, evaluations, agent seconds)
DOMAIN_PLAN: list[tuple[str, str, str, dict[str, Any], dict[str, Any], float]] = [
    # CUJ: A@1 1, 0, 1 (A) and 0 (B); PCW 1, 0.5, 1 (A), 0.2 (B)
    ("u1", AGENT_A, "shop-cuj-flag-cart-failure", _meta("SRE", "cuj-backend-flag"),
     _diagnosis(1, a_at_1=1.0, pcw=1.0, component_match=1.0, layer_match=1.0, type_match=1.0, evidence_recall=1.0), 40),
    ("u2", AGENT_A, "shop-cuj-flag-cart-failure", _meta("SRE", "cuj-backend-flag"),
     _diagnosis(0, a_at_1=0.0, pcw=0.5, component_match=1.0, layer_match=0.0, type_match=0.0, evidence_recall=0.5), 50),
    ("u3", AGENT_A, "shop-cuj-edge-home-500", _meta("SRE", "cuj-browser-proxy", "Medium"),
     _diagnosis(1, a_at_1=1.0, pcw=1.0, component_match=1.0, layer_match=1.0, type_match=1.0, evidence_recall=1.0), 45),
    ("u4", AGENT_B, "shop-cuj-edge-home-500", _meta("SRE", "cuj-browser-proxy", "Medium"),
     _diagnosis(0, a_at_1=0.0, pcw=0.2, component_match=0.0, layer_match=1.0, type_match=0.0, evidence_recall=0.0), 30),
    # CISO: A has IEC 1, 1; IPA 1, 0; CE 1, 0; SAP 1, 0 and a Kyverno assessment (no IEC); B one no submission
    ("c1", AGENT_A, "ciso-sshd-root-login-compliant", _meta("CISO", "cis-sshd"), _ciso(1, 1, 1, 1, 12.5), 12.5),
    ("c2", AGENT_A, "ciso-sshd-root-login-noncompliant", _meta("CISO", "cis-sshd"), _ciso(1, 0, 0, 0, 30.0), 30.0),
    ("c3", AGENT_A, "ciso-k8s-kyverno-privileged-compliant", _meta("CISO", "cis-k8s-kyverno", "Medium"),
     _kyverno(1, 1, 1, 0.4), 0.4),
    ("c4", AGENT_B, "ciso-sshd-root-login-compliant", _meta("CISO", "cis-sshd"),
     _ciso(0, 0, 0, 0, 5.0, status="no_submission"), 5.0),
    # FinOps: a data insight (pass, field accuracy), a ranking (F1, rank score), a cost incident (proximity)
    ("f1", AGENT_A, "finops-cost-variance", _meta("FinOps", "data-insight"),
     {"finops": {"status": "scored", "pass_at_1": 1, "field_accuracy": 1.0, "finops_pass": 1, "tokens": 1500}}, 20),
    ("f2", AGENT_A, "finops-anomaly-ranking", _meta("FinOps", "anomaly-ranking", "Hard"),
     {"finops": {"status": "scored", "f1": 0.5, "rank_score": 0.25, "event_precision": 0.5, "finops_pass": 0,
                 "tokens": 2500}}, 25),
    ("f3", AGENT_B, "finops-cost-stale-budget", _meta("FinOps", "cost-incident", "Medium"),
     {**_diagnosis(1), "mitigation": {"status": "scored", "mitigation_pass": 1},
      "cost": {"status": "scored", "proximity_mean": 0.8}}, 200),
    # DevOps: a build fix, a two-stage pipeline (fix-build passes, write-test fails), a monitoring diagnosis
    ("d1", AGENT_A, "devops-build-java-home", _meta("DevOps", "build-config"), _workspace(**{"fix-build": True}), 90),
    ("d2", AGENT_A, "devops-pipeline-ratelimit-module-and-window-test", _meta("DevOps", "pipeline", "Hard"),
     _workspace(**{"fix-build": True, "write-test": False}), 300),
    ("d3", AGENT_B, "devops-monitor-cpu-spin", _meta("DevOps", "monitoring"), _diagnosis(0), 60),
]


def record_evaluated(run_id: str, agent: str, scenario: str, meta: dict[str, Any], evaluations: dict[str, Any],
                     elapsed: float, clock: Clock, status: str = "completed") -> None:
    """One completed run with the given evaluators' scores, as the lifecycle records it."""
    with mock.patch.object(store.time, "time", clock):
        store.create_run({"id": run_id, "scenario_id": scenario, "spec_version": 1, "spec_digest": "d" * 16,
                          "status": "running", "pid": 1, "run_dir": f"/nonexistent/runs/{run_id}", "agent": agent,
                          "scenario_meta": meta, "purpose": "agent", "mode": "live", "snapshot_id": None})
        seq = store.start_phase(run_id, "agent")
        clock.now += elapsed
        store.end_phase(run_id, seq, "exited")
        clock.now += 100.0
        summary = {"run_id": run_id, "scenario": scenario, "status": status, "reason": "",
                   "agent": {"status": "exited", "exit_code": 0, "elapsed": elapsed, "detail": ""},
                   "evaluations": evaluations, "cleanup": "done", "cleanup_problems": [], "recovered": True,
                   "phases": {}, "run_dir": f"/nonexistent/runs/{run_id}"}
        store.update_run(run_id, status=status, outcome=json.dumps(summary, sort_keys=True))


def populate_domains(domains: tuple[str, ...] = ("CUJ", "CISO", "FinOps", "DevOps"), clock: Clock | None = None,
                     prefix: str = "") -> None:
    """Record DOMAIN_PLAN's runs of the given report domains."""
    clock = clock or Clock()
    for run_id, agent, scenario, meta, evaluations, elapsed in DOMAIN_PLAN:
        if report.domain(_trial_like(meta)) in domains:
            record_evaluated(prefix + run_id, agent, scenario, meta, evaluations, elapsed, clock)


def _trial_like(meta: dict[str, Any]) -> results.Trial:
    return results.Trial(run_id="", scenario="", agent="", agent_name="", model=None, created=0.0, run_status="",
                         outcome="", meta=meta)


def _sections(html: str) -> list[str]:
    return re.findall(r'<section id="([a-z-]+)"', html)


def _section(html: str, sid: str) -> str:
    match = re.search(rf'<section id="{sid}".*?</section>', html, flags=re.DOTALL)
    assert match, f"no section {sid}"
    return match.group(0)


def _rows(section: str, table: int = 0) -> dict[str, list[str]]:
    """The table's rows by their first cell, each cell's text (tags dropped, '±' parts kept)."""
    tables = re.findall(r"<table>.*?</table>", section, flags=re.DOTALL)
    rows = {}
    for tr in re.findall(r"<tr>(.*?)</tr>", tables[table], flags=re.DOTALL):
        cells = [re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", tr, flags=re.DOTALL)]
        rows[cells[0]] = cells
    return rows


def _cell(section: str, agent: str, header: str, table: int = 0) -> str:
    rows = _rows(section, table)
    headers = next(iter(rows.values()))
    return rows[agent][headers.index(header)]


def _chart(section: str) -> ET.Element:
    return ET.fromstring(re.search(r"<svg\b.*?</svg>", section, flags=re.DOTALL).group(0))  # type: ignore[union-attr]


def _texts(svg: ET.Element) -> set[str]:
    return {t.text or "" for t in svg.iter(f"{SVG}text")}


def test_an_sre_only_report_has_no_other_domain_section() -> None:
    populate()
    html = report.render(results.load_trials())
    assert _sections(html) == OVERALL + SRE


def test_every_domain_has_its_section_in_order() -> None:
    populate()
    populate_domains(prefix="x")
    html = report.render(results.load_trials())
    assert _sections(html) == ["leaderboard", "domains", "pass-rate", "complexity", *SRE, "cuj", "ciso", "finops",
                               "devops"]
    nav = re.search(r"<nav>(.*?)</nav>", html).group(1)  # type: ignore[union-attr]
    assert re.findall(r'href="#([a-z-]+)"', nav) == _sections(html)
    assert "runs per domain: SRE 15, CUJ 4, CISO 4, FinOps 3, DevOps 3." in html


@pytest.mark.parametrize("only", ["CUJ", "CISO", "FinOps", "DevOps"])
def test_a_domain_section_only_when_that_domain_has_runs(only: str) -> None:
    populate_domains((only,))
    html = report.render(results.load_trials())
    assert _sections(html) == OVERALL + BY_DOMAIN[only]  # no SRE sections without SRE runs, no per-domain chart
    for other, sections in BY_DOMAIN.items():
        if other != only:
            assert not set(sections) & set(_sections(html)), other


def test_domains_section_compares_the_domains() -> None:
    populate_domains(("CISO", "DevOps"))
    section = _section(report.render(results.load_trials()), "domains")
    assert {"CISO", "DevOps"} <= _texts(_chart(section))
    rows = [[re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<td[^>]*>(.*?)</td>", tr)][:2]
            for tr in re.findall(r"<tr>(.*?)</tr>", section)]
    assert rows[1:] == [[LABEL_A, "CISO"], [LABEL_A, "DevOps"], [LABEL_B, "CISO"], [LABEL_B, "DevOps"]]


def test_cuj_section_a_at_1_and_pcw() -> None:
    populate_domains(("CUJ",))
    section = _section(report.render(results.load_trials()), "cuj")
    assert {"A@1", "PCW", LABEL_A, LABEL_B} <= _texts(_chart(section))
    assert _cell(section, LABEL_A, "A@1 (%)") == "66.7 ± 33.3"
    assert _cell(section, LABEL_A, "PCW (%)") == "83.3 ± 16.7"
    assert _cell(section, LABEL_B, "PCW (%)") == "20.0 ± —"
    assert _cell(section, LABEL_A, "LM (%)") == "66.7 ± 33.3"
    assert _cell(section, LABEL_A, "Trials") == "3"
    per_scenario = _rows(section, table=1)
    assert per_scenario["shop-cuj-flag-cart-failure"][3] == "50.0 ± 50.0"  # A@1 of (1, 0)


def test_ciso_section_the_itbench_metrics() -> None:
    populate_domains(("CISO",))
    section = _section(report.render(results.load_trials()), "ciso")
    assert {"IEC", "IPA", "CE", "SAP, pass"} <= _texts(_chart(section))
    assert _cell(section, LABEL_A, "IEC (%)") == "100.0 ± 0.0 (n=2)"  # the Kyverno assessment has no IEC
    assert _cell(section, LABEL_A, "IPA (%)") == "66.7 ± 33.3"
    assert _cell(section, LABEL_A, "SAP, pass (%)") == "66.7 ± 33.3"
    assert _cell(section, LABEL_A, "Time to process (s)") == "14.3 ± 8.6"
    assert _cell(section, LABEL_B, "SAP, pass (%)") == "0.0 ± —"
    assert _cell(section, LABEL_B, "No submission (%)") == "100.0"
    bars = {r.find(f"{SVG}title").text for r in _chart(section).iter(f"{SVG}rect")  # type: ignore[union-attr]
            if r.attrib.get("class") == "bar"}
    assert f"IEC / {LABEL_A}: 100%" in bars and f"SAP, pass / {LABEL_A}: 67%" in bars


def test_finops_section_pass_f1_rank_and_proximity() -> None:
    populate_domains(("FinOps",))
    section = _section(report.render(results.load_trials()), "finops")
    assert {"Pass", "Answers pass@1", "Anomaly F1", "Rank score", "Cost proximity"} <= _texts(_chart(section))
    assert _cell(section, LABEL_A, "Pass (%)") == "50.0 ± 50.0"
    assert _cell(section, LABEL_A, "Answers pass@1 (%)") == "100.0 ± — (n=1)"
    assert _cell(section, LABEL_A, "Anomaly F1 (%)") == "50.0 ± — (n=1)"
    assert _cell(section, LABEL_A, "Rank score (%)") == "25.0 ± — (n=1)"
    assert _cell(section, LABEL_A, "Tokens") == "2,000 ± 500"
    assert _cell(section, LABEL_B, "Cost proximity (%)") == "80.0 ± —"
    assert _cell(section, LABEL_B, "Pass (%)") == "100.0 ± —"  # the cost incident's diagnosis decides


def test_finops_answers_of_several_questions_are_averaged() -> None:
    record_evaluated("q1", AGENT_A, "finops-multi", _meta("FinOps", "data-insight"),
                     {"finops": {"status": "scored", "a.pass_at_1": 1, "b.pass_at_1": 0, "finops_pass": 0}}, 10,
                     Clock())
    section = _section(report.render(results.load_trials()), "finops")
    assert _cell(section, LABEL_A, "Answers pass@1 (%)") == "50.0 ± —"


def test_devops_section_pass_per_stage() -> None:
    populate_domains(("DevOps",))
    section = _section(report.render(results.load_trials()), "devops")
    stages = ["fix-build", "write-test", "diagnose (monitoring)", "All stages"]
    labels = [t.text for t in _chart(section).iter(f"{SVG}text") if t.text in stages]
    assert labels == stages  # the pipeline's order, the trial's pass last
    assert _cell(section, LABEL_A, "fix-build (%)") == "100.0 ± 0.0"
    assert _cell(section, LABEL_A, "write-test (%)") == "0.0 ± — (n=1)"
    assert _cell(section, LABEL_A, "All stages (%)") == "50.0 ± 50.0"
    assert _cell(section, LABEL_A, "diagnose (monitoring) (%)") == "—"
    assert _cell(section, LABEL_B, "diagnose (monitoring) (%)") == "0.0 ± —"
    assert _cell(section, LABEL_A, "Share of stages passed (%)") == "75.0 ± 25.0"


def test_stages_come_from_the_run_summary() -> None:
    populate_domains(("DevOps",))
    by_id = {t.run_id: t for t in results.load_trials()}
    assert by_id["d2"].stages == (("fix-build", True), ("write-test", False))
    assert by_id["d3"].stages == () and by_id["d3"].scores["diagnosis"]["fl_pass"] == 0


def test_excluded_runs_enter_no_domain_metric() -> None:
    populate_domains(("CISO",))
    record_evaluated("cx", AGENT_B, "ciso-sshd-root-login-compliant", _meta("CISO", "cis-sshd"),
                     _ciso(1, 1, 1, 1, 3.0), 3.0, Clock(), status="error")
    section = _section(report.render(results.load_trials()), "ciso")
    assert _cell(section, LABEL_B, "SAP, pass (%)") == "0.0 ± —" and _cell(section, LABEL_B, "Trials") == "1"


def test_sre_sections_leave_other_domains_out() -> None:
    populate()
    populate_domains(prefix="x")
    html = report.render(results.load_trials())
    assert "13 FL and 13 FPC scores" in _section(html, "ntam")  # the SRE trials only, not the CUJ ones
    agent_time = _section(html, "agent-time")
    assert set(SCENARIOS) <= _texts(_chart(agent_time)) and "ciso-sshd-root-login-compliant" not in agent_time


def test_domain_of_a_trial() -> None:
    assert report.domain(_trial_like(_meta("SRE", "cuj-compound"))) == "CUJ"
    assert report.domain(_trial_like(_meta("SRE", "network"))) == "SRE"
    assert report.domain(_trial_like(_meta("CISO", "cuj-like"))) == "CISO"
    assert report.domain(_trial_like({})) == "unknown"


def test_write_creates_the_file(tmp_path: Path) -> None:
    populate_domains(("CISO",))
    out = report.write(tmp_path / "a" / "r.html", results.load_trials())
    assert "<section id=\"ciso\">" in out.read_text()


def test_mttd_by_complexity_only_over_sre_alone() -> None:
    populate()
    assert "MTTD (s)" in _rows(_section(report.render(results.load_trials()), "complexity"))["Agent"]
    populate_domains(("CISO",))  # a CISO trial's time is no time to diagnosis
    html = report.render(results.load_trials())
    assert "MTTD (s)" not in _rows(_section(html, "complexity"))["Agent"]
    assert "MTTD (s)" in _rows(_section(html, "traces"))["Agent"]  # the SRE trials' breakdown keeps it
