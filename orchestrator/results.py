"""Results over recorded runs: per-scenario trials, the leaderboard and breakdowns (ITBench Tables 4, 18-21).

Everything is computed from the SQLite index (``orchestrator/store.py``): the runs table says
who ran which scenario and how the run ended, the metrics table holds the evaluators' scores
and the agent's timing. A run counts as a *trial* only when it completed and its diagnosis was
evaluated; runs that errored, were interrupted or whose fault did not manifest are counted as
``excluded`` (not the agent's failure). Among trials, ``no_submission`` and ``malformed``
outputs are kept apart from wrong answers. Runs the harness made to measure itself (purpose
``bench``: ``opsbench bench``'s no-op agent) are left out unless asked for, and counted, so
the output can say so. Replays of frozen incidents (mode ``replay``) are labelled ``name [replay]``, so every table
(results, leaderboard, report) shows them apart from live trials of the same agent. See docs/evaluation.md ("Results").
"""

from __future__ import annotations

import csv
import json
import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from orchestrator import paths, store
from orchestrator.evaluation.stats import mean_pass_at_k, mean_stderr, pass_at_k

# The evaluator (and its score) that decides success: a diagnosis when the scenario has one,
# else a mitigation, else a FinOps analysis (pass@1 of the answers; F1 = 1 / rank score = 1 for anomalies),
# else a CISO assessment (SAP: the agent's policy decided the real posture), else a DevOps fix or tests (every stage
# built and tested in a fresh copy of the agent's tree).
DECIDERS = (("diagnosis", "fl_pass"), ("mitigation", "mitigation_pass"), ("finops", "finops_pass"),
            ("ciso", "ciso_pass"), ("ciso_kyverno", "ciso_pass"), ("workspace", "workspace_pass"))
# Further per-trial means in the results and the leaderboard (CUJBench outcome and process metrics).
EXTRA_METRICS = (("diagnosis", "a_at_1"), ("diagnosis", "pcw"), ("diagnosis", "evidence_recall"),
                 # How often an agent blamed a distractor (a benign change at incident time) as a root cause, over
                 # the trials of scenarios that have one; and how many non-causes it blamed per trial.
                 ("diagnosis", "distractor_blamed"), ("diagnosis", "false_positives"),
                 ("process", "submitted"), ("process", "calls"), ("process", "tool_coverage"),
                 ("process", "extra_calls"), ("process", "invalid_actions"),
                 ("process", "input_tokens"), ("process", "output_tokens"),
                 ("process", "model_calls"), ("process", "cached_tokens"), ("process", "cost_usd"),
                 ("finops", "f1"), ("finops", "rank_score"), ("finops", "tokens"), ("cost", "proximity_mean"),
                 ("workspace", "stage_pass_rate"))
OUTCOMES = ("correct", "wrong", "no_submission", "malformed", "excluded")
LEVELS = ("Easy", "Medium", "Hard")
# Runs in the index that are not agent runs at all: verify-scenarios trials (no agent phase) and the
# environments campaigns host their trials on.
NOT_AGENT_RUNS = ("verified", "hosting", "hosted")


@dataclass(frozen=True)
class Trial:
    """One recorded run, classified. ``outcome`` is one of OUTCOMES."""

    run_id: str
    scenario: str
    agent: str  # display label: "name" or "name (model)", then " [purpose]" for the harness's own runs and
    # " [replay]" for replays of snapshots, so live and replay trials are never pooled
    agent_name: str
    model: str | None
    created: float
    run_status: str
    outcome: str
    purpose: str = store.AGENT
    mode: str = store.LIVE
    snapshot_id: str | None = None
    ntam_fl: float | None = None
    ntam_fpc: float | None = None
    agent_elapsed: float | None = None
    submitted: float | None = None
    mttr: float | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, float | None] = field(default_factory=dict)
    # Every evaluator's recorded scalar scores ({evaluator: {metric: number or text}}), and a DevOps run's stages
    # as (task, passed): a list in the run's summary, so not in the metrics table. The report's domain sections.
    scores: dict[str, dict[str, Any]] = field(default_factory=dict)
    stages: tuple[tuple[str, bool], ...] = ()

    @property
    def counted(self) -> bool:
        return self.outcome != "excluded"

    @property
    def time_to_diagnosis(self) -> float | None:
        """Seconds from handover (the agent's start) to its submission; the agent's run time if unknown."""
        return self.submitted if self.submitted is not None else self.agent_elapsed


# -- loading -----------------------------------------------------------------------------------
def classify(run_status: str, scores: dict[str, Any], pass_key: str = "fl_pass") -> str:
    """The trial outcome of a run from its status and its deciding evaluator's scores."""
    status = scores.get("status")
    if run_status != "completed" or status is None:
        return "excluded"
    if status in ("no_submission", "malformed"):
        return str(status)
    return "correct" if scores.get(pass_key) == 1 else "wrong"


def decider(evaluations: dict[str, dict[str, Any]]) -> tuple[dict[str, Any], str]:
    for evaluator, key in DECIDERS:
        if evaluator in evaluations:
            return evaluations[evaluator], key
    return {}, DECIDERS[0][1]


@cache
def _current_meta(scenario_id: str) -> dict[str, Any]:
    """Fallback for runs recorded before scenario_meta existed: the spec as it is now."""
    return store.scenario_snapshot(paths.SPECS_DIR / scenario_id / "scenario.yaml") or {}


@dataclass(frozen=True)
class Loaded:
    """The trials selected, and how many runs of the harness's own (not agent runs) were left out of them."""

    trials: list[Trial]
    harness_left_out: int

    def left_out_note(self) -> str:
        """One line for the text output ("" when nothing was left out)."""
        n = self.harness_left_out
        return f"{n} harness run{'s' if n != 1 else ''} left out; --include-harness to show them" if n else ""


def load_trials(agent: str | None = None, scenario: str | None = None, since: float | None = None,
                include_harness: bool = False) -> list[Trial]:
    """See `load`; the trials only."""
    return load(agent, scenario, since, include_harness).trials


def load(agent: str | None = None, scenario: str | None = None, since: float | None = None,
         include_harness: bool = False) -> Loaded:
    """Every recorded agent run as a Trial, oldest first (verify-scenarios runs and campaign hosts are no agent
    runs and never included). ``agent`` matches the display label, the name, the model or the exact command;
    ``since`` is a Unix time. Runs of the harness's own (purpose other than ``agent``) are left out and counted,
    unless ``include_harness``; their label then names their purpose (``true [bench]``)."""
    where = f"r.status NOT IN ({','.join('?' * len(NOT_AGENT_RUNS))})"
    args: list[Any] = list(NOT_AGENT_RUNS)
    if scenario:
        where, args = where + " AND r.scenario_id = ?", [*args, scenario]
    if since is not None:
        where, args = where + " AND r.created >= ?", [*args, since]
    metrics: dict[str, dict[str, dict[str, Any]]] = defaultdict(lambda: defaultdict(dict))
    with store.connect() as db:
        runs = [dict(r) for r in db.execute(f"SELECT * FROM runs r WHERE {where} ORDER BY r.created, r.id", args)]
        for m in db.execute("SELECT m.run_id, m.evaluator, m.metric, m.value, m.text FROM metrics m"
                            f" JOIN runs r ON r.id = m.run_id WHERE {where}", args):
            metrics[m["run_id"]][m["evaluator"]][m["metric"]] = m["value"] if m["text"] is None else m["text"]
    trials = []
    left_out = 0
    for run in runs:
        name, model = run.get("agent_name"), run.get("model")
        if not name:
            name, model = store.agent_identity(run.get("agent"))
        name = name or "unknown"
        purpose = run.get("purpose") or store.AGENT
        mode = run.get("mode") or store.LIVE
        tags = [t for t in (purpose if purpose != store.AGENT else "", mode if mode != store.LIVE else "") if t]
        label = (f"{name} ({model})" if model else name) + (f" [{', '.join(tags)}]" if tags else "")
        if agent and agent not in (label, name, model, run.get("agent")):
            continue
        if purpose != store.AGENT and not include_harness:
            left_out += 1
            continue
        evaluations = metrics[run["id"]]
        (scores, pass_key), timing = decider(evaluations), evaluations.get("agent", {})
        meta = json.loads(run["scenario_meta"]) if run.get("scenario_meta") else _current_meta(run["scenario_id"])
        trials.append(Trial(
            run_id=run["id"], scenario=run["scenario_id"], agent=label, agent_name=name, model=model,
            created=run["created"], run_status=run["status"], outcome=classify(run["status"], scores, pass_key),
            purpose=purpose, mode=mode, snapshot_id=run.get("snapshot_id"),
            ntam_fl=_num(scores.get("ntam_fl")), ntam_fpc=_num(scores.get("ntam_fpc")),
            agent_elapsed=_num(timing.get("elapsed")), submitted=_num(timing.get("submitted")),
            mttr=_num(evaluations.get("mitigation", {}).get("mttr")), meta=meta,
            extra={m: _num(evaluations.get(e, {}).get(m)) for e, m in EXTRA_METRICS},
            scores={e: dict(m) for e, m in evaluations.items()}, stages=_stages(run.get("outcome"))))
    return Loaded(trials, left_out)


def _stages(outcome: Any) -> tuple[tuple[str, bool], ...]:
    """(task, passed) of each stage the workspace evaluator scored, from the run's summary JSON (() if none)."""
    try:
        stages = json.loads(outcome)["evaluations"]["workspace"]["stages"]
        return tuple((str(s["task"]), bool(s["passed"])) for s in stages)
    except (TypeError, ValueError, KeyError):
        return ()


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


# -- statistics --------------------------------------------------------------------------------
def mean_se(values: Iterable[float | None]) -> tuple[float | None, float | None]:
    """(mean, standard error) of the values that are not None; None where undefined."""
    xs = [v for v in values if v is not None]
    if not xs:
        return None, None
    mean, se = mean_stderr(xs)
    return mean, None if math.isnan(se) else se


def _group(trials: Iterable[Trial], key: Callable[[Trial], Any]) -> dict[Any, list[Trial]]:
    groups: dict[Any, list[Trial]] = defaultdict(list)
    for t in trials:
        groups[key(t)].append(t)
    return groups


def _counts(trials: Sequence[Trial]) -> dict[str, int]:
    return {o: sum(t.outcome == o for t in trials) for o in OUTCOMES}


def _identity(trials: Sequence[Trial]) -> dict[str, Any]:
    return {"agent": trials[0].agent, "agent_name": trials[0].agent_name, "model": trials[0].model}


def scenario_results(trials: Sequence[Trial]) -> list[dict[str, Any]]:
    """One row per (agent, scenario): n trials, c correct, the failure kinds, pass@k for every
    k <= n, NTAM means, mean agent time and MTTD (over correct trials), each with its standard error."""
    rows = []
    for (_, scenario), group in sorted(_group(trials, lambda t: (t.agent, t.scenario)).items()):
        counted = [t for t in group if t.counted]
        counts = _counts(group)
        n, c = len(counted), counts["correct"]
        rate, rate_se = mean_se(float(t.outcome == "correct") for t in counted)
        fl, fl_se = mean_se(t.ntam_fl for t in counted)
        fpc, fpc_se = mean_se(t.ntam_fpc for t in counted)
        elapsed, elapsed_se = mean_se(t.agent_elapsed for t in counted)
        mttd, mttd_se = mean_se(t.time_to_diagnosis for t in counted if t.outcome == "correct")
        mttr, mttr_se = mean_se(t.mttr for t in counted if t.outcome == "correct")
        meta = group[-1].meta
        rows.append({
            **_identity(group), "scenario": scenario, **_dimensions(group[-1]), "name": meta.get("name"),
            "n": n, "c": c, **{o: counts[o] for o in OUTCOMES if o != "correct"},
            "pass_at": {k: pass_at_k(n, c, k) for k in range(1, n + 1)}, "pass_rate": rate, "pass_rate_se": rate_se,
            "ntam_fl": fl, "ntam_fl_se": fl_se, "ntam_fpc": fpc, "ntam_fpc_se": fpc_se,
            "agent_time": elapsed, "agent_time_se": elapsed_se, "mttd": mttd, "mttd_se": mttd_se,
            "mttr": mttr, "mttr_se": mttr_se, **_extra_means(counted),
        })
    return rows


def _summary_row(trials: Sequence[Trial], k: int) -> dict[str, Any]:
    """Table 4's columns over a set of trials of one agent."""
    counted = [t for t in trials if t.counted]
    counts = _counts(trials)
    per_scenario = {s: (len(g), sum(t.outcome == "correct" for t in g))
                    for s, g in _group(counted, lambda t: t.scenario).items()}
    eligible = [nc for nc in per_scenario.values() if nc[0] >= k]
    value = mean_pass_at_k(eligible, k) if eligible else None
    if k == 1:  # ITBench: the standard error over all trials' 0/1 outcomes
        se = mean_se(float(t.outcome == "correct") for t in counted)[1]
    else:  # over the scenarios' pass@k estimates
        se = mean_se(pass_at_k(n, c, k) for n, c in eligible)[1]
    fl, fl_se = mean_se(t.ntam_fl for t in counted)
    fpc, fpc_se = mean_se(t.ntam_fpc for t in counted)
    times = [t.time_to_diagnosis for t in counted if t.outcome == "correct" and t.time_to_diagnosis is not None]
    mttd, mttd_se = mean_se(times)
    repairs = [t.mttr for t in counted if t.outcome == "correct" and t.mttr is not None]
    mttr, mttr_se = mean_se(repairs)
    total = len(counted)
    return {
        "scenarios": len(per_scenario), "trials": total, "k": k, "pass_at_k": value, "pass_at_k_se": se,
        "pass_at_k_scenarios": len(eligible), **counts,
        "no_submission_rate": counts["no_submission"] / total if total else None,
        "malformed_rate": counts["malformed"] / total if total else None,
        "ntam_fl": fl, "ntam_fl_se": fl_se, "ntam_fpc": fpc, "ntam_fpc_se": fpc_se,
        "mttd": mttd, "mttd_se": mttd_se, "mttd_n": len(times),
        "mttr": mttr, "mttr_se": mttr_se, "mttr_n": len(repairs), **_extra_means(counted),
    }


def _extra_means(trials: Sequence[Trial]) -> dict[str, float | None]:
    """Mean of each EXTRA_METRICS over the trials that have it (None when none has)."""
    return {m: mean_se(t.extra.get(m) for t in trials)[0] for _, m in EXTRA_METRICS}


def _rank(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(rows, key=lambda r: (-(r["pass_at_k"] if r["pass_at_k"] is not None else -1),
                                       -(r["ntam_fl"] or 0.0), r["agent"]))


def leaderboard(trials: Sequence[Trial], k: int = 1) -> list[dict[str, Any]]:
    """One row per agent (name + model), best pass@k first. pass@k is averaged over the agent's
    scenarios with at least k trials (``pass_at_k_scenarios`` of them)."""
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    return _rank([{**_identity(g), **_summary_row(g, k)} for g in _group(trials, lambda t: t.agent).values()])


# -- breakdowns --------------------------------------------------------------------------------
def _dimensions(t: Trial) -> dict[str, str]:
    obs = t.meta.get("observability") or {}
    traces = "unknown" if "traces" not in obs else ("traces on" if obs["traces"] else "traces off")
    return {"domain": t.meta.get("domain") or "unknown", "class": t.meta.get("class") or "unknown",
            "complexity": t.meta.get("complexity") or "unknown", "traces": traces}


DIMENSIONS = ("domain", "class", "complexity", "traces")


def group_order(dimension: str, value: str) -> tuple[int, str]:
    """Sort key for a dimension's values: Easy < Medium < Hard, traces on < off, then by name."""
    known = {"complexity": LEVELS, "traces": ("traces on", "traces off")}.get(dimension, ())
    return (known.index(value), value) if value in known else (len(known), value)


def breakdown(trials: Sequence[Trial], dimension: str, k: int = 1) -> list[dict[str, Any]]:
    """Leaderboard rows per (agent, value of ``dimension``): Tables 18-21 in long form."""
    if dimension not in DIMENSIONS:
        raise ValueError(f"unknown dimension {dimension!r}; one of {', '.join(DIMENSIONS)}")
    rows = []
    for (_, value), group in _group(trials, lambda t: (t.agent, _dimensions(t)[dimension])).items():
        rows.append({**_identity(group), "dimension": dimension, "group": value, **_summary_row(group, k)})
    return sorted(rows, key=lambda r: (r["agent"], group_order(dimension, r["group"])))


def breakdowns(trials: Sequence[Trial], k: int = 1) -> dict[str, list[dict[str, Any]]]:
    return {d: breakdown(trials, d, k) for d in DIMENSIONS}


# -- exports -----------------------------------------------------------------------------------
def _flat(row: dict[str, Any]) -> dict[str, Any]:
    flat = {k: v for k, v in row.items() if not isinstance(v, dict)}
    for k, v in (row.get("pass_at") or {}).items():
        flat[f"pass@{k}"] = v
    return flat


def write_csv(rows: Sequence[dict[str, Any]], file: Path) -> None:
    """Rows as CSV, one column per key (``pass_at`` spread into pass@1..pass@n; blanks where k > n)."""
    flat = [_flat(r) for r in rows]
    columns: list[str] = []
    for r in flat:
        columns += [c for c in r if c not in columns]
    passes = sorted((c for c in columns if c.startswith("pass@")), key=lambda c: int(c[5:]))
    columns = [c for c in columns if not c.startswith("pass@")] + passes
    with file.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=columns, restval="")
        writer.writeheader()
        writer.writerows({k: "" if v is None else v for k, v in r.items()} for r in flat)


# -- text tables -------------------------------------------------------------------------------
def pm(mean: float | None, se: float | None, scale: float = 1.0, digits: int = 2) -> str:
    """``mean ± se`` as ITBench prints it; ``—`` for an undefined value or standard error."""
    if mean is None:
        return "—"
    return f"{mean * scale:.{digits}f} ± " + ("—" if se is None else f"{se * scale:.{digits}f}")


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows, strict=False)]
    lines = ["  ".join(str(x).ljust(w) for x, w in zip(row, widths, strict=True)).rstrip()
             for row in [headers, *rows]]
    return "\n".join(lines)


def render_leaderboard(rows: Sequence[dict[str, Any]], k: int = 1) -> str:
    """Table 4's columns; with agents whose model calls were counted (presets), ITBench-AA's cost columns too:
    model turns, tokens (in/out) and dollars per trial (means; — for agents the proxy did not count)."""
    headers = ["AGENT", "SCENARIOS", "TRIALS", f"PASS@{k} (%)", "FL (NTAM)", "FPC (NTAM)", "NO-SUBMISSION (%)",
               "MALFORMED (%)", "MTTD (s)", "MTTR (s)", "EXCLUDED"]
    counted = any(r.get("model_calls") is not None for r in rows)
    if counted:
        headers += ["TURNS", "TOKENS IN/OUT", "COST ($/TRIAL)"]

    def cost(r: dict[str, Any]) -> list[str]:
        if not counted:
            return []
        if r.get("model_calls") is None:
            return ["—", "—", "—"]
        tokens = f"{r.get('input_tokens') or 0:.0f}/{r.get('output_tokens') or 0:.0f}"
        return [f"{r['model_calls']:.1f}", tokens, "—" if r.get("cost_usd") is None else f"{r['cost_usd']:.4f}"]

    return table(headers, [
        [r["agent"], r["scenarios"], r["trials"], pm(r["pass_at_k"], r["pass_at_k_se"], 100),
         pm(r["ntam_fl"], r["ntam_fl_se"]), pm(r["ntam_fpc"], r["ntam_fpc_se"]),
         "—" if r["no_submission_rate"] is None else f"{100 * r['no_submission_rate']:.1f}",
         "—" if r["malformed_rate"] is None else f"{100 * r['malformed_rate']:.1f}",
         pm(r["mttd"], r["mttd_se"], digits=1), pm(r["mttr"], r["mttr_se"], digits=1), r["excluded"], *cost(r)]
        for r in rows])


def render_results(rows: Sequence[dict[str, Any]]) -> str:
    headers = ["AGENT", "SCENARIO", "LEVEL", "N", "C", "WRONG", "NO-SUB", "MALF", "EXCL", "PASS@1 (%)", "PASS@N",
               "FL (NTAM)", "FPC (NTAM)", "AGENT TIME (s)", "MTTD (s)", "BLAMED DISTRACTOR (%)"]
    return table(headers, [
        [r["agent"], r["scenario"], r["complexity"], r["n"], r["c"], r["wrong"], r["no_submission"], r["malformed"],
         r["excluded"], pm(r["pass_rate"], r["pass_rate_se"], 100),
         f"{r['pass_at'][r['n']]:.2f}" if r["n"] else "—", pm(r["ntam_fl"], r["ntam_fl_se"]),
         pm(r["ntam_fpc"], r["ntam_fpc_se"]), pm(r["agent_time"], r["agent_time_se"], digits=1),
         pm(r["mttd"], r["mttd_se"], digits=1),
         # — for a scenario without a distractor
         "—" if r.get("distractor_blamed") is None else f"{100 * r['distractor_blamed']:.0f}"] for r in rows])


def render_breakdown(rows: Sequence[dict[str, Any]], k: int = 1) -> str:
    """Agents down, groups across, pass@k ± se in % (Tables 18/19's layout)."""
    if not rows:
        return "(no runs)"
    dimension = rows[0]["dimension"]
    groups = sorted({r["group"] for r in rows}, key=lambda g: group_order(dimension, g))
    cells = {(r["agent"], r["group"]): r for r in rows}
    agents = sorted({r["agent"] for r in rows})
    return table([f"AGENT \\ {dimension.upper()} (PASS@{k} %)", *groups], [
        [a, *(pm(cells[a, g]["pass_at_k"], cells[a, g]["pass_at_k_se"], 100) + f" (n={cells[a, g]['trials']})"
              if (a, g) in cells else "" for g in groups)] for a in agents])
