"""A static HTML report of the recorded runs: one self-contained file (inline CSS and SVG, no
scripts, no network) that can be mailed, archived next to a paper draft or opened offline.

Sections, each with one chart and the table behind it. Over every trial: leaderboard (pass@k per
agent), pass@k per domain (when there are several), pass rate per scenario, breakdown by complexity.
Then one group per domain, shown only when it has trials (a trial's domain is its scenario's; an SRE
scenario of a ``cuj-*`` class is a CUJ one):

* SRE: NTAM distribution, time to diagnosis and repair, breakdown by observability (traces);
* CUJ: A@1 and PCW (CUJBench), with CM/LM/TM, evidence recall and FL (NTAM) in the table;
* CISO: IEC, IPA, CE, SAP (ITBench App. D) and time to process;
* FinOps: pass, answers pass@1, field accuracy, anomaly F1, rank score, cost proximity (App. E), tokens;
* DevOps: pass per stage (fix-build, resolve-issue, write-test ...; a monitoring task's diagnosis).

With no trial at all, the report says which commands record some. The numbers are those of
``opsbench results`` / ``opsbench leaderboard`` (orchestrator/results.py).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import Any

from orchestrator import charts, results

# Fits a 1280-px window: the page never scrolls sideways. Table cells wrap where they can (names anywhere, headers at
# spaces, "mean ± se" before the ±), so the leaderboard fits the page; a table still too wide scrolls inside its own
# box (.wide, at most 80% of the window tall so its scrollbar is in sight), its header row and first column kept in
# view, a shadow at the right edge while there is more to see. A chart scales down to the page width (its viewBox).
from orchestrator.report_css import CSS
from orchestrator.results import Trial, mean_se, pm

DOMAINS = ("SRE", "CUJ", "CISO", "FinOps", "DevOps")


def domain(t: Trial) -> str:
    """The report's domain of a trial: its scenario's (SRE, CISO, FinOps, DevOps), CUJ for an SRE ``cuj-*`` class."""
    name = str(t.meta.get("domain") or "unknown")
    return "CUJ" if name == "SRE" and str(t.meta.get("class") or "").startswith("cuj") else name


def _domain_order(name: str) -> tuple[int, str]:
    return (DOMAINS.index(name), name) if name in DOMAINS else (len(DOMAINS), name)


# -- tables and sections ------------------------------------------------------------------------
def _cell(tag: str, text_column: bool, value: Any) -> str:
    text = escape(str(value))
    if text_column:  # long ids and agent labels may break after . _ / : (a scenario id breaks after its hyphens)
        text = re.sub(r"([._/:])(?=\w)", r"\1<wbr>", text)
    elif " ± " in text:  # the standard error may go to a second line when the table is short of room
        mean, se = text.split(" ± ", 1)
        text = f'{mean} <span class="pm">± {se}</span>'
    cls = ' class="l"' if text_column else ""
    return f"<{tag}{cls}>{text}</{tag}>"


def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]], text_columns: int = 1) -> str:
    """An HTML table in its scroll box; the first ``text_columns`` columns are left-aligned names, the rest numbers."""
    head = "".join(_cell("th", i < text_columns, h) for i, h in enumerate(headers))
    body = "".join("<tr>" + "".join(_cell("td", i < text_columns, c) for i, c in enumerate(row)) + "</tr>"
                   for row in rows)
    return f'<div class="wide"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def _section(sid: str, title: str, note: str, chart: str, extra: str = "") -> str:
    return (f'<section id="{sid}"><h2>{escape(title)}</h2><p class="note">{escape(note)}</p>'
            f"{chart}{extra}</section>")


def _rate(v: float | None) -> str:
    return "—" if v is None else f"{100 * v:.1f}"


def _k(k: int) -> str:
    return f"pass@{k}"


# -- over every trial ----------------------------------------------------------------------------
def _leaderboard(board: list[dict[str, Any]], k: int) -> str:
    chart = charts.hbars("leaderboard", f"{_k(k)} per agent", [r["agent"] for r in board], [_k(k)],
                         {(r["agent"], _k(k)): (r["pass_at_k"], r["pass_at_k_se"]) for r in board},
                         kind="percent", max_value=1.0, caption=f"{_k(k)} (mean ± standard error)")
    counted = any(r.get("model_calls") is not None for r in board)  # a preset's model calls: ITBench-AA's columns
    table = _table(
        ["Agent", "Scenarios", "Trials", f"{_k(k)} (%)", "FL (NTAM)", "FPC (NTAM)", "No submission (%)",
         "Malformed (%)", "MTTD (s)", "MTTR (s)", "Excluded runs",
         *(["Turns per trial", "Tokens in/out per trial", "Cost per trial ($)"] if counted else [])],
        [[r["agent"], r["scenarios"], r["trials"], pm(r["pass_at_k"], r["pass_at_k_se"], 100),
          pm(r["ntam_fl"], r["ntam_fl_se"]), pm(r["ntam_fpc"], r["ntam_fpc_se"]), _rate(r["no_submission_rate"]),
          _rate(r["malformed_rate"]), pm(r["mttd"], r["mttd_se"], digits=1), pm(r["mttr"], r["mttr_se"], digits=1),
          r["excluded"], *(_usage(r) if counted else [])] for r in board])
    return _section("leaderboard", "Leaderboard", "One row per agent over every domain (ITBench Table 4): a trial "
                    "passes on its scenario's deciding score (fl_pass, mitigation_pass, finops_pass, ciso_pass, "
                    "workspace_pass). MTTD is over correct trials, MTTR over passing mitigations; excluded runs "
                    "(errors, interruptions, faults that did not manifest) are not trials."
                    + (" Turns, tokens and cost (ITBench-AA): means per trial of the model calls the recording proxy "
                       "counted (agent presets); — for an agent whose calls were not counted, or a model without a "
                       "price." if counted else ""), chart, table)


def _usage(r: dict[str, Any]) -> list[str]:
    """Turns, tokens in/out and dollars per trial of a leaderboard row (— when the proxy counted nothing)."""
    if r.get("model_calls") is None:
        return ["—", "—", "—"]
    return [f"{r['model_calls']:.1f}", f"{r.get('input_tokens') or 0:,.0f} / {r.get('output_tokens') or 0:,.0f}",
            "—" if r.get("cost_usd") is None else f"{r['cost_usd']:.4f}"]


def _by_domain(trials: list[Trial], k: int, agents: list[str], colors: dict[str, str]) -> str:
    groups = sorted({domain(t) for t in trials}, key=_domain_order)
    rows = [{**r, "domain": d} for d in groups for r in results.leaderboard([t for t in trials if domain(t) == d], k)]
    rows.sort(key=lambda r: (agents.index(r["agent"]), _domain_order(r["domain"])))
    chart = charts.hbars("domains", f"{_k(k)} per domain", groups, agents,
                         {(r["domain"], r["agent"]): (r["pass_at_k"], r["pass_at_k_se"]) for r in rows},
                         kind="percent", max_value=1.0, caption=f"{_k(k)} (± standard error)", colors=colors)
    table = _table(["Agent", "Domain", "Scenarios", "Trials", f"{_k(k)} (%)", "No submission (%)", "Malformed (%)",
                    "Excluded runs"],
                   [[r["agent"], r["domain"], r["scenarios"], r["trials"], pm(r["pass_at_k"], r["pass_at_k_se"], 100),
                     _rate(r["no_submission_rate"]), _rate(r["malformed_rate"]), r["excluded"]] for r in rows],
                   text_columns=2)
    return _section("domains", "Pass rate per domain", f"{_k(k)} of each agent in each domain (CUJ: the SRE "
                    "scenarios of critical user journeys, checked in a browser).", chart, table)


def _per_scenario(rows: list[dict[str, Any]], agents: list[str], scenarios: list[str], colors: dict[str, str]) -> str:
    chart = charts.hbars("pass-rate", "pass rate per scenario", scenarios, agents,
                         {(r["scenario"], r["agent"]): (r["pass_rate"], r["pass_rate_se"]) for r in rows},
                         kind="percent", max_value=1.0, caption="passing trials / trials (± standard error)",
                         colors=colors)
    table = _table(
        ["Scenario", "Agent", "Level", "Traces", "n", "c", "Wrong", "No submission", "Malformed", "Excluded",
         "pass@1 (%)", "pass@n", "FL (NTAM)", "FPC (NTAM)"],
        [[r["scenario"], r["agent"], r["complexity"], r["traces"], r["n"], r["c"], r["wrong"], r["no_submission"],
          r["malformed"], r["excluded"], pm(r["pass_rate"], r["pass_rate_se"], 100),
          f"{r['pass_at'][r['n']]:.2f}" if r["n"] else "—", pm(r["ntam_fl"], r["ntam_fl_se"]),
          pm(r["ntam_fpc"], r["ntam_fpc_se"])] for r in rows], text_columns=4)
    return _section("pass-rate", "Pass rate per scenario", "c: trials that passed on the scenario's deciding score; "
                    "no submission and malformed outputs count as failures but are listed apart from wrong answers.",
                    chart, table)


def _breakdown(trials: list[Trial], dimension: str, title: str, k: int, agents: list[str], note: str,
               colors: dict[str, str], mttd: bool = True) -> str:
    """pass@k per value of a dimension; ``mttd``: with the MTTD column (SRE trials only: over every domain, a
    "correct trial's time to diagnosis" would mix assessments, analyses and fixes into it)."""
    rows = sorted(results.breakdown(trials, dimension, k), key=lambda r: agents.index(r["agent"]))  # stable
    groups = sorted({r["group"] for r in rows}, key=lambda g: results.group_order(dimension, g))
    chart = charts.hbars(dimension, f"{_k(k)} by {dimension}", groups, [a for a in agents if any(
        r["agent"] == a for r in rows)], {(r["group"], r["agent"]): (r["pass_at_k"], r["pass_at_k_se"]) for r in rows},
        kind="percent", max_value=1.0, caption=f"{_k(k)} (± standard error)", colors=colors)
    table = _table(["Agent", dimension.capitalize(), "Scenarios", "Trials", f"{_k(k)} (%)", "FL (NTAM)",
                    "FPC (NTAM)", *(["MTTD (s)"] if mttd else [])],
                   [[r["agent"], r["group"], r["scenarios"], r["trials"], pm(r["pass_at_k"], r["pass_at_k_se"], 100),
                     pm(r["ntam_fl"], r["ntam_fl_se"]), pm(r["ntam_fpc"], r["ntam_fpc_se"]),
                     *([pm(r["mttd"], r["mttd_se"], digits=1)] if mttd else [])] for r in rows], text_columns=2)
    return _section(dimension, title, note, chart, table)


# -- SRE -----------------------------------------------------------------------------------------
def _ntam(trials: list[Trial]) -> str:
    counted = [t for t in trials if t.counted]
    samples = {"FL (NTAM)": [t.ntam_fl for t in counted if t.ntam_fl is not None],
               "FPC (NTAM)": [t.ntam_fpc for t in counted if t.ntam_fpc is not None]}
    chart = charts.histogram("ntam", "NTAM distribution over SRE trials", samples,
                             caption="score (10 bins over [0, 1])")
    return _section("ntam", "SRE: NTAM distribution", f"{len(samples['FL (NTAM)'])} FL and "
                    f"{len(samples['FPC (NTAM)'])} FPC scores over the SRE trials (no submission and malformed "
                    "score 0).", chart)


def _agent_time(rows: list[dict[str, Any]], agents: list[str], scenarios: list[str], colors: dict[str, str]) -> str:
    chart = charts.hbars("agent-time", "agent time per scenario", scenarios, agents,
                         {(r["scenario"], r["agent"]): (r["agent_time"], r["agent_time_se"]) for r in rows},
                         kind="seconds", caption="time in the agent phase (mean ± standard error)", colors=colors)
    table = _table(["Scenario", "Agent", "Agent time (s)", "MTTD (s), correct trials", "MTTR (s), passing trials"],
                   [[r["scenario"], r["agent"], pm(r["agent_time"], r["agent_time_se"], digits=1),
                     pm(r["mttd"], r["mttd_se"], digits=1), pm(r["mttr"], r["mttr_se"], digits=1)] for r in rows],
                   text_columns=2)
    return _section("agent-time", "SRE: time to diagnosis and repair", "Wall-clock time of the agent phase over all "
                    "SRE trials; MTTD: handover to submission over correct diagnoses; MTTR: incident confirmed to "
                    "alerts clear over passing mitigations.", chart, table)


# -- the other domains: one chart of their metrics per agent, a table per agent and one per scenario ------------
@dataclass(frozen=True)
class Metric:
    """One column of a domain's tables (and a category of its chart when ``chart``): a value per trial or None."""

    header: str
    value: Callable[[Trial], float | None]
    kind: str = "percent"  # charts.KINDS
    chart: bool = True


def _score(*evaluators: str, metric: str) -> Callable[[Trial], float | None]:
    """The first of the evaluators' recorded ``metric`` (a number) in a trial."""
    def get(t: Trial) -> float | None:
        for evaluator in evaluators:
            value = t.scores.get(evaluator, {}).get(metric)
            if isinstance(value, int | float) and not isinstance(value, bool):
                return float(value)
        return None
    return get


def _mean_score(evaluator: str, metric: str) -> Callable[[Trial], float | None]:
    """The mean of ``metric`` and every ``<id>.metric`` an evaluator recorded (one per question)."""
    def get(t: Trial) -> float | None:
        found = [float(v) for k, v in t.scores.get(evaluator, {}).items()
                 if (k == metric or k.endswith(f".{metric}")) and isinstance(v, int | float)]
        return sum(found) / len(found) if found else None
    return get


def _passed(t: Trial) -> float:
    return float(t.outcome == "correct")


def _stage(task: str) -> Callable[[Trial], float | None]:
    def get(t: Trial) -> float | None:
        if task == DIAGNOSE:
            return _score("diagnosis", metric="fl_pass")(t) if not t.stages else None
        passed = [p for name, p in t.stages if name == task]
        return float(all(passed)) if passed else None
    return get


DIAGNOSE = "diagnose (monitoring)"
STAGE_ORDER = ("fix-build", "resolve-issue", "fix-issue", "write-test", DIAGNOSE)


@dataclass(frozen=True)
class Domain:
    sid: str
    title: str
    chart_title: str
    note: str
    metrics: Callable[[list[Trial]], list[Metric]]


def _cuj(_: list[Trial]) -> list[Metric]:
    return [Metric("A@1", _score("diagnosis", metric="a_at_1")), Metric("PCW", _score("diagnosis", metric="pcw")),
            Metric("Pass, fl_pass", _passed, chart=False),
            Metric("CM", _score("diagnosis", metric="component_match"), chart=False),
            Metric("LM", _score("diagnosis", metric="layer_match"), chart=False),
            Metric("TM", _score("diagnosis", metric="type_match"), chart=False),
            Metric("ER", _score("diagnosis", metric="evidence_recall"), chart=False),
            Metric("FL (NTAM)", lambda t: t.ntam_fl, chart=False)]


def _ciso(_: list[Trial]) -> list[Metric]:
    evaluators = ("ciso", "ciso_kyverno")
    return [Metric("IEC", _score("ciso", metric="iec")), Metric("IPA", _score(*evaluators, metric="ipa")),
            Metric("CE", _score(*evaluators, metric="ce")), Metric("SAP, pass", _score(*evaluators, metric="sap")),
            Metric("Time to process (s)", _score(*evaluators, metric="time_to_process"), "seconds", chart=False)]


def _finops(_: list[Trial]) -> list[Metric]:
    return [Metric("Pass", _passed), Metric("Answers pass@1", _mean_score("finops", "pass_at_1")),
            Metric("Field accuracy", _mean_score("finops", "field_accuracy")),
            Metric("Anomaly F1", _score("finops", metric="f1")),
            Metric("Rank score", _score("finops", metric="rank_score")),
            Metric("Cost proximity", _score("cost", metric="proximity_mean")),
            Metric("Tokens", _score("finops", metric="tokens"), "number", chart=False)]


def _devops(trials: list[Trial]) -> list[Metric]:
    tasks = {name for t in trials for name, _ in t.stages}
    if any(not t.stages and "diagnosis" in t.scores for t in trials):
        tasks.add(DIAGNOSE)
    ordered = sorted(tasks, key=lambda s: (STAGE_ORDER.index(s), s) if s in STAGE_ORDER else (len(STAGE_ORDER), s))
    return [*(Metric(task, _stage(task)) for task in ordered), Metric("All stages", _passed),
            Metric("Share of stages passed", _score("workspace", metric="stage_pass_rate"), chart=False)]


DOMAIN_SECTIONS = {
    "CUJ": Domain("cuj", "CUJ: critical user journeys", "A@1 and PCW per agent",
                  "CUJBench outcome metrics over the SRE scenarios of critical user journeys: A@1 (root-cause "
                  "component and fault type both right), PCW (0.5 component + 0.2 layer + 0.3 type match), CM/LM/TM "
                  "(component, layer, type match), ER (evidence recall). Means over submitted trials, as CUJBench.",
                  _cuj),
    "CISO": Domain("ciso", "CISO: compliance assessment", "IEC, IPA, CE and SAP per agent",
                   "ITBench App. D: IEC (the evidence collector parses), IPA (the policy compiles), CE (the collector "
                   "ran and left the target unchanged), SAP (the policy decided the real posture: the pass), time to "
                   "process. Kyverno assessments have no collector, so no IEC.", _ciso),
    "FinOps": Domain("finops", "FinOps: cost management", "FinOps scores per agent",
                     "ITBench App. E: pass (the scenario's deciding score), answers pass@1 and field accuracy of data "
                     "insights, F1 of detected anomalies, rank score of ranked ones, proximity of the cost figures to "
                     "the optimum after a cost mitigation, tokens reported. Each mean is over the trials that have "
                     "the metric.", _finops),
    "DevOps": Domain("devops", "DevOps: build, fix and test stages", "pass per stage per agent",
                     "Each stage is built and tested in a fresh copy of the agent's tree (fix-build, resolve-issue, "
                     "fix-issue: make check passes; write-test: the new tests fail on the buggy code and pass on the "
                     "fixed one); a monitoring task is a diagnosis (fl_pass). All stages: the trial's pass. Each "
                     "stage's mean is over the trials that have it.", _devops),
}


def _metric_cells(trials: Sequence[Trial], metrics: list[Metric]) -> tuple[list[str], dict[str, tuple[Any, Any]]]:
    counted = [t for t in trials if t.counted]
    cells, means = [], {}
    for m in metrics:
        values = [v for v in (m.value(t) for t in counted) if v is not None]
        mean, se = mean_se(values)
        means[m.header] = (mean, se)
        if mean is None:
            cells.append("—")
        elif m.kind == "percent":
            cells.append(pm(mean, se, 100, digits=1) + (f" (n={len(values)})" if len(values) < len(counted) else ""))
        elif m.kind == "seconds":
            cells.append(pm(mean, se, digits=1))
        else:
            cells.append(f"{mean:,.0f}" + ("" if se is None else f" ± {se:,.0f}"))
    return cells, means


def _domain(spec: Domain, trials: list[Trial], agents: list[str], colors: dict[str, str]) -> str:
    metrics = spec.metrics(trials)
    by_agent = {a: [t for t in trials if t.agent == a] for a in agents}
    by_agent = {a: ts for a, ts in by_agent.items() if ts}
    rows, values = [], {}
    for agent, ts in by_agent.items():
        counted = [t for t in ts if t.counted]
        cells, means = _metric_cells(ts, metrics)
        rows.append([agent, len({t.scenario for t in counted}), len(counted), *cells,
                     _rate(sum(t.outcome == "no_submission" for t in counted) / len(counted) if counted else None),
                     _rate(sum(t.outcome == "malformed" for t in counted) / len(counted) if counted else None)])
        values.update({(m.header, agent): means[m.header] for m in metrics if m.chart})
    charted = [m.header for m in metrics if m.chart]
    headers = [f"{m.header} (%)" if m.kind == "percent" else m.header for m in metrics]
    chart = charts.hbars(spec.sid, spec.chart_title, charted, list(by_agent), values, kind="percent", max_value=1.0,
                         caption="mean over trials (± standard error)", colors=colors)
    table = _table(["Agent", "Scenarios", "Trials", *headers, "No submission (%)", "Malformed (%)"], rows)
    pairs: dict[tuple[str, str], list[Trial]] = {}
    for t in trials:
        pairs.setdefault((t.scenario, t.agent), []).append(t)
    per_scenario = [[scenario, agent, sum(t.counted for t in ts), *_metric_cells(ts, metrics)[0]]
                    for (scenario, agent), ts in sorted(pairs.items())]
    details = (f"<details><summary>Per scenario ({len(per_scenario)} rows)</summary>"
               + _table(["Scenario", "Agent", "Trials", *headers], per_scenario, text_columns=2) + "</details>")
    return _section(spec.sid, spec.title, spec.note + " (n=: trials with the metric, when not all.)", chart,
                    table + details)


def _runs(trials: list[Trial], pages: dict[str, str]) -> str:
    """One row per trial with a page of its own (run_page): its outcome, turns, tokens and cost, and the link."""
    rows = []
    for t in sorted((t for t in trials if t.run_id in pages), key=lambda t: t.created):
        calls = t.extra.get("model_calls")
        cost = t.extra.get("cost_usd")
        rows.append("<tr>" + "".join(_cell("td", i < 4, v) for i, v in enumerate([
            time.strftime("%Y-%m-%d %H:%M", time.localtime(t.created)), t.scenario, t.agent, t.outcome,
            "—" if calls is None else f"{calls:.0f}",
            "—" if calls is None else
            f"{t.extra.get('input_tokens') or 0:,.0f} / {t.extra.get('output_tokens') or 0:,.0f}",
            "—" if cost is None else f"{cost:.4f}"]))
            + f'<td class="l"><a href="{escape(pages[t.run_id])}">{escape(t.run_id)}</a></td></tr>')
    head = "".join(_cell("th", i < 4 or i == 7, h) for i, h in enumerate(
        ["Started", "Scenario", "Agent", "Outcome", "Turns", "Tokens in/out", "Cost ($)", "Run page"]))
    table = (f'<div class="wide"><table><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table></div>')
    return (f'<section id="runs"><h2>Runs</h2><p class="note">One page per run: the timeline of its model turns and '
            f"tool calls (tokens, cost and latency per call), its answer beside the ground truth and each score with "
            f"its reason. {len(rows)} run(s).</p>{table}</section>")


# -- the page ------------------------------------------------------------------------------------
EMPTY_COMMANDS = (
    ("opsbench list", "the scenarios, with their domain (SRE, CISO, FinOps, DevOps)"),
    ("opsbench run <scenario>", "one trial, with the default (baseline) agent"),
    ('opsbench run <scenario> --agent "<command>"', "one trial of your agent"),
    ('opsbench campaign <scenario>... --agent "<command>" --trials 3', "scenarios x agents x trials"),
    ('opsbench replay <snapshot>... --agent "<command>"', "trials on recorded (frozen) incidents"),
    ("opsbench report --out report.html", "this report again, with the runs"),
)


def _empty(harness_left_out: int, filters: Sequence[str]) -> str:
    commands = "\n\n".join(f'<span class="comment"># {escape(why)}</span>\n{escape(c)}' for c, why in EMPTY_COMMANDS)
    left_out = (f"<p>{harness_left_out} harness run(s) (the no-op agent of <code>opsbench bench</code>) were left "
                "out: <code>opsbench report --include-harness</code> shows them.</p>" if harness_left_out else "")
    if filters:
        given = " ".join(f"<code>{escape(f)}</code>" for f in filters)
        why = (f"<p>No recorded run matches {given}: <code>opsbench runs</code> lists the runs recorded, "
               "<code>opsbench leaderboard</code> the agents. To record more:</p>")
    else:
        why = ("<p>The report is drawn from the runs recorded in the state dir (<code>$OPSBENCH_HOME</code>, by "
               "default <code>.opsbench</code> in the checkout), and it holds no agent trial. Record some, then write "
               "the report again:</p>")
    return ('<section id="no-runs" class="empty"><h2>No runs to report yet</h2>' + why
            + f"<pre><code>{commands}</code></pre>"
            "<p>For example <code>opsbench run shop-cart-down</code> (an SRE incident on the local backend, no "
            "cluster needed)."
            + ("" if filters else " If you gave <code>--agent</code>, <code>--scenario</code> or <code>--since</code>, "
               "no run matched them: <code>opsbench runs</code> lists what is recorded.")
            + "</p>" + left_out + "</section>")


TITLES = {"leaderboard": "Leaderboard", "domains": "Per domain", "pass-rate": "Per scenario",
          "complexity": "Complexity", "ntam": "SRE: NTAM", "agent-time": "SRE: time", "traces": "SRE: traces",
          "cuj": "CUJ", "ciso": "CISO", "finops": "FinOps", "devops": "DevOps", "runs": "Runs"}


def _sections(trials: list[Trial], k: int) -> list[tuple[str, str]]:
    """(id, html) of every section the trials call for, in order."""
    board = results.leaderboard(trials, k)
    rows = results.scenario_results(trials)
    agents = [r["agent"] for r in board]
    scenarios = sorted({r["scenario"] for r in rows})
    present = sorted({domain(t) for t in trials}, key=_domain_order)
    colors = {a: charts.color(i) for i, a in enumerate(agents)}  # an agent keeps its colour in every chart
    out = [("leaderboard", _leaderboard(board, k))]
    if len(present) > 1:
        out.append(("domains", _by_domain(trials, k, agents, colors)))
    out += [("pass-rate", _per_scenario(rows, agents, scenarios, colors)),
            ("complexity", _breakdown(trials, "complexity", "Breakdown by complexity", k, agents,
                                      f"ITBench Table 18: {_k(k)} per complexity level, every domain.", colors,
                                      mttd=len(present) == 1 and present[0] == "SRE"))]
    sre = [t for t in trials if domain(t) == "SRE"]
    if sre:
        sre_rows = results.scenario_results(sre)
        sre_agents = [a for a in agents if any(t.agent == a for t in sre)]
        out += [("ntam", _ntam(sre)),
                ("agent-time", _agent_time(sre_rows, sre_agents, sorted({r["scenario"] for r in sre_rows}), colors)),
                ("traces", _breakdown(sre, "traces", "SRE: breakdown by observability (traces)", k, sre_agents,
                                      f"ITBench Tables 20-21: {_k(k)} of SRE trials with traces on and off.", colors))]
    for name, spec in DOMAIN_SECTIONS.items():
        of_domain = [t for t in trials if domain(t) == name]
        if of_domain:
            out.append((spec.sid, _domain(spec, of_domain, agents, colors)))
    return out


def render(trials: list[Trial], k: int = 1, title: str = "OpsBench results", harness_left_out: int = 0,
           filters: Sequence[str] = (), pages: dict[str, str] | None = None) -> str:
    """The whole report as one HTML document; `harness_left_out`: the harness's own runs not shown (results.load);
    `filters`: the selection the trials come from, as options (``--agent X``), named when it selects nothing;
    `pages`: run id -> the address of its run page (``write_run_pages``), listed in a Runs section."""
    counted = sum(t.counted for t in trials)
    generated = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    head = (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"/>'
            f'<meta name="viewport" content="width=device-width, initial-scale=1"/><title>{escape(title)}</title>'
            f"<style>{CSS}</style></head><body><h1>{escape(title)}</h1>")
    if not trials:
        return (head + f'<p class="note">Generated {escape(generated)}: no runs.</p>'
                + _empty(harness_left_out, filters) + "</body></html>\n")
    sections = _sections(trials, k)
    if pages:
        sections.append(("runs", _runs(trials, pages)))
    per_domain = {d: sum(domain(t) == d for t in trials) for d in sorted({domain(t) for t in trials},
                                                                          key=_domain_order)}
    nav = " ".join(f'<a href="#{sid}">{escape(TITLES.get(sid, sid))}</a>' for sid, _ in sections)
    agents = len({t.agent for t in trials})
    scenarios = len({t.scenario for t in trials})
    return (head
            + f'<p class="note">Generated {escape(generated)}: {len(trials)} run(s), {counted} trial(s), {agents} '
            f"agent(s), {scenarios} scenario(s); runs per domain: "
            + escape(", ".join(f"{d} {n}" for d, n in per_domain.items()))
            + ". Metric definitions: docs/evaluation.md.</p>"
            + (f'<p class="note" id="harness-left-out">{harness_left_out} harness run(s) (the no-op agent of '
               "opsbench bench) left out; opsbench report --include-harness shows them.</p>"
               if harness_left_out else "")
            + f"<nav>{nav}</nav>" + "".join(html for _, html in sections) + "</body></html>\n")


def write(out: Path, trials: list[Trial], k: int = 1, harness_left_out: int = 0, filters: Sequence[str] = (),
          run_pages: bool = False) -> Path:
    """The report at `out`; `run_pages`: with a page per run in the folder ``<out's stem>-runs/`` beside it."""
    out.parent.mkdir(parents=True, exist_ok=True)
    pages = write_run_pages(trials, out.parent / f"{out.stem}-runs", back=f"../{out.name}") if run_pages else None
    out.write_text(render(trials, k, harness_left_out=harness_left_out, filters=filters,
                          pages={r: f"{out.stem}-runs/{p}" for r, p in pages.items()} if pages else None))
    return out


def write_run_pages(trials: Sequence[Trial], folder: Path, back: str | None = None) -> dict[str, str]:
    """`folder`/<run id>.html for each trial whose records are on this machine (run_page); run id -> file name.
    A run whose directory is gone (removed by hand) gets no page."""
    from orchestrator import run_page, store
    from orchestrator.atif import AtifError

    folder.mkdir(parents=True, exist_ok=True)
    pages: dict[str, str] = {}
    for t in trials:
        row = store.get_run(t.run_id)
        run_dir = Path(str(row["run_dir"])) if row and row.get("run_dir") else None
        if run_dir is None or not (run_dir / "run.json").is_file():
            continue
        try:
            run_page.write(run_dir, folder / f"{t.run_id}.html", back)
        except AtifError:
            continue
        pages[t.run_id] = f"{t.run_id}.html"
    return pages
