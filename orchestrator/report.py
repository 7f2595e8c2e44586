"""A static HTML report of the recorded runs: one self-contained file (inline CSS and SVG, no
scripts, no network) that can be mailed, archived next to a paper draft or opened offline.

Sections, each with one chart: leaderboard (pass@k per agent), pass rate per scenario, NTAM
distribution, agent time per scenario, breakdown by complexity and by observability (traces).
The numbers are those of ``opsbench results`` / ``opsbench leaderboard`` (orchestrator/results.py).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from html import escape
from pathlib import Path
from typing import Any

from orchestrator import charts, results
from orchestrator.results import Trial, pm

# Fits a 1280-px window: the page never scrolls sideways; a wide table scrolls inside its own box
# (.wide, at most 80% of the window tall so its horizontal scrollbar is in sight, header row and
# first column kept visible) and a chart scales down to the page width (its viewBox keeps the proportions).
CSS = """
body{font-family:sans-serif;margin:2em;color:#222;max-width:1200px}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:2em;border-bottom:1px solid #ccc}
h1,h2,p{overflow-wrap:anywhere}
.wide{max-width:100%;max-height:80vh;overflow:auto;margin:1em 0}
table{border-collapse:separate;border-spacing:0;font-size:.9em}
th,td{border:solid #ddd;border-width:0 1px 1px 0;padding:3px 8px;text-align:right;white-space:nowrap}
th{border-top-width:1px}th:first-child,td:first-child{border-left-width:1px}
th{background:#f4f4f4;position:sticky;top:0;z-index:1}
td:first-child{position:sticky;left:0;background:#fff}th:first-child{left:0;z-index:2}
.l{text-align:left}
.note{color:#555;font-size:.9em}svg.chart{display:block;margin:.5em 0;max-width:100%;height:auto}
@media print{.wide{max-height:none;overflow:visible}}
"""


def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]], text_columns: int = 1) -> str:
    """An HTML table; the first ``text_columns`` columns are left-aligned names, the rest numbers."""
    def cell(tag: str, i: int, value: Any) -> str:
        cls = ' class="l"' if i < text_columns else ""
        return f"<{tag}{cls}>{escape(str(value))}</{tag}>"

    head = "".join(cell("th", i, h) for i, h in enumerate(headers))
    body = "".join("<tr>" + "".join(cell("td", i, c) for i, c in enumerate(row)) + "</tr>" for row in rows)
    return f'<div class="wide"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def _section(sid: str, title: str, note: str, chart: str, extra: str = "") -> str:
    return (f'<section id="{sid}"><h2>{escape(title)}</h2><p class="note">{escape(note)}</p>'
            f"{chart}{extra}</section>")


def _pct(v: float) -> str:
    return f"{100 * v:.0f}%"


def _leaderboard(board: list[dict[str, Any]], k: int) -> str:
    chart = charts.hbars("leaderboard", f"pass@{k} per agent", [r["agent"] for r in board], [f"pass@{k}"],
                         {(r["agent"], f"pass@{k}"): (r["pass_at_k"], r["pass_at_k_se"]) for r in board},
                         max_value=1.0, label=_pct, axis=f"pass@{k} (mean ± standard error)")
    table = _table(
        ["Agent", "Scenarios", "Trials", f"pass@{k} (%)", "FL (NTAM)", "FPC (NTAM)", "No submission (%)",
         "Malformed (%)", "MTTD (s)", "MTTR (s)", "Excluded runs"],
        [[r["agent"], r["scenarios"], r["trials"], pm(r["pass_at_k"], r["pass_at_k_se"], 100),
          pm(r["ntam_fl"], r["ntam_fl_se"]), pm(r["ntam_fpc"], r["ntam_fpc_se"]),
          "—" if r["no_submission_rate"] is None else f"{100 * r['no_submission_rate']:.1f}",
          "—" if r["malformed_rate"] is None else f"{100 * r['malformed_rate']:.1f}",
          pm(r["mttd"], r["mttd_se"], digits=1), pm(r["mttr"], r["mttr_se"], digits=1), r["excluded"]]
         for r in board])
    return _section("leaderboard", "Leaderboard", "One row per agent (ITBench Table 4). MTTD is over correct "
                    "diagnoses, MTTR over passing mitigations; excluded runs (errors, interruptions, faults that "
                    "did not manifest) are not trials.",
                    chart, table)


def _per_scenario(rows: list[dict[str, Any]], agents: list[str], scenarios: list[str]) -> str:
    chart = charts.hbars("pass-rate", "pass rate per scenario", scenarios, agents,
                         {(r["scenario"], r["agent"]): (r["pass_rate"], r["pass_rate_se"]) for r in rows},
                         max_value=1.0, label=_pct, axis="correct diagnoses / trials (± standard error)")
    table = _table(
        ["Scenario", "Agent", "Level", "Traces", "n", "c", "Wrong", "No submission", "Malformed", "Excluded",
         "pass@1 (%)", "pass@n", "FL (NTAM)", "FPC (NTAM)"],
        [[r["scenario"], r["agent"], r["complexity"], r["traces"], r["n"], r["c"], r["wrong"], r["no_submission"],
          r["malformed"], r["excluded"], pm(r["pass_rate"], r["pass_rate_se"], 100),
          f"{r['pass_at'][r['n']]:.2f}" if r["n"] else "—", pm(r["ntam_fl"], r["ntam_fl_se"]),
          pm(r["ntam_fpc"], r["ntam_fpc_se"])] for r in rows], text_columns=4)
    return _section("pass-rate", "Pass rate per scenario", "fl_pass = 1 counts as correct; no submission and "
                    "malformed outputs count as failures but are listed apart from wrong answers.", chart, table)


def _ntam(trials: list[Trial]) -> str:
    counted = [t for t in trials if t.counted]
    samples = {"FL (NTAM)": [t.ntam_fl for t in counted if t.ntam_fl is not None],
               "FPC (NTAM)": [t.ntam_fpc for t in counted if t.ntam_fpc is not None]}
    chart = charts.histogram("ntam", "NTAM distribution over trials", samples, axis="score (10 bins over [0, 1])")
    return _section("ntam", "NTAM distribution", f"{len(samples['FL (NTAM)'])} FL and {len(samples['FPC (NTAM)'])} "
                    "FPC scores over all trials (no submission and malformed score 0).", chart)


def _agent_time(rows: list[dict[str, Any]], agents: list[str], scenarios: list[str]) -> str:
    chart = charts.hbars("agent-time", "agent time per scenario", scenarios, agents,
                         {(r["scenario"], r["agent"]): (r["agent_time"], r["agent_time_se"]) for r in rows},
                         label=lambda v: f"{v:.0f}s", axis="seconds in the agent phase (mean ± standard error)")
    table = _table(["Scenario", "Agent", "Agent time (s)", "MTTD (s), correct trials", "MTTR (s), passing trials"],
                   [[r["scenario"], r["agent"], pm(r["agent_time"], r["agent_time_se"], digits=1),
                     pm(r["mttd"], r["mttd_se"], digits=1), pm(r["mttr"], r["mttr_se"], digits=1)] for r in rows],
                   text_columns=2)
    return _section("agent-time", "Time to diagnosis and repair", "Wall-clock time of the agent phase over all "
                    "trials; MTTD: handover to submission over correct diagnoses; MTTR: incident confirmed to "
                    "alerts clear over passing mitigations.", chart, table)


def _breakdown(trials: list[Trial], dimension: str, title: str, k: int, agents: list[str]) -> str:
    rows = results.breakdown(trials, dimension, k)
    groups = sorted({r["group"] for r in rows}, key=lambda g: results.group_order(dimension, g))
    chart = charts.hbars(dimension, f"pass@{k} by {dimension}", groups, agents,
                         {(r["group"], r["agent"]): (r["pass_at_k"], r["pass_at_k_se"]) for r in rows},
                         max_value=1.0, label=_pct, axis=f"pass@{k} (± standard error)")
    table = _table(["Agent", dimension.capitalize(), "Scenarios", "Trials", f"pass@{k} (%)", "FL (NTAM)",
                    "FPC (NTAM)", "MTTD (s)"],
                   [[r["agent"], r["group"], r["scenarios"], r["trials"], pm(r["pass_at_k"], r["pass_at_k_se"], 100),
                     pm(r["ntam_fl"], r["ntam_fl_se"]), pm(r["ntam_fpc"], r["ntam_fpc_se"]),
                     pm(r["mttd"], r["mttd_se"], digits=1)] for r in rows], text_columns=2)
    return _section(dimension, title, f"ITBench Tables 18-21: pass@{k} per {dimension}.", chart, table)


def render(trials: list[Trial], k: int = 1, title: str = "OpsBench results", harness_left_out: int = 0) -> str:
    """The whole report as one HTML document; `harness_left_out`: the harness's own runs not shown (results.load)."""
    board = results.leaderboard(trials, k)
    rows = results.scenario_results(trials)
    agents = [r["agent"] for r in board]
    scenarios = sorted({r["scenario"] for r in rows})
    counted = sum(t.counted for t in trials)
    generated = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    parts = [
        _leaderboard(board, k),
        _per_scenario(rows, agents, scenarios),
        _ntam(trials),
        _agent_time(rows, agents, scenarios),
        _breakdown(trials, "complexity", "Breakdown by complexity", k, agents),
        _breakdown(trials, "traces", "Breakdown by observability (traces)", k, agents),
    ]
    return ("<!DOCTYPE html>\n"
            f'<html lang="en"><head><meta charset="utf-8"/><title>{escape(title)}</title>'
            f"<style>{CSS}</style></head><body><h1>{escape(title)}</h1>"
            f'<p class="note">Generated {escape(generated)}: {len(trials)} run(s), {counted} trial(s), '
            f"{len(agents)} agent(s), {len(scenarios)} scenario(s). Metric definitions: docs/evaluation.md.</p>"
            + (f'<p class="note" id="harness-left-out">{harness_left_out} harness run(s) (the no-op agent of '
               "opsbench bench) left out; opsbench report --include-harness shows them.</p>"
               if harness_left_out else "")
            + "".join(parts) + "</body></html>\n")


def write(out: Path, trials: list[Trial], k: int = 1, harness_left_out: int = 0) -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render(trials, k, harness_left_out=harness_left_out))
    return out
