"""One run's page of the HTML report: what the agent did and how it scored (``opsbench show RUN --html FILE``,
``opsbench report --run-pages``, ``opsbench export``).

Built from the run's ATIF export (``orchestrator/atif.py``: the run's records, validated), its ``run.json`` and
its scenario's ground truth; one self-contained file like the report (inline CSS, no scripts, no network):

* the summary: scenario, agent and model, mode, outcome, and the run's model turns, tokens, cost and tool calls;
* the timeline: the prompt, then each model turn (model, tokens in/cached/out, cost, latency, what it said) and the
  tool calls it asked for (arguments and the gateway's answer, each in an expandable block), and the gateway calls
  no counted model call asked for; a bar per row places it in the agent's time; a ``view_screenshot`` answer shows
  the screenshot (from the run's browser capture, or the answer's own data when it was kept whole);
* the answer beside the ground truth;
* every score the evaluators recorded, with what it means and, where the records say it, why it has its value.

It fits a 1280-px window (tests/unit/test_run_page_layout.py): long arguments and answers wrap inside their blocks.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
from html import escape
from pathlib import Path
from typing import Any

from orchestrator import atif
from orchestrator.report_css import CSS as REPORT_CSS

MAX_TEXT = 20_000  # characters of one argument or answer shown (the export and the records have them whole)
MAX_IMAGE = 3 * 1024 * 1024  # bytes of one screenshot embedded

CSS = REPORT_CSS + """
.cols{display:flex;gap:1em;align-items:flex-start}.cols>div{flex:1 1 0;min-width:0}
pre.v{white-space:pre-wrap;overflow-wrap:anywhere;max-height:28em;overflow:auto;margin:.3em 0;font-size:.85em}
.wide.tlw{max-height:none}table.tl{width:100%;table-layout:fixed}table.tl td{vertical-align:top}
td.what{text-align:left;overflow-wrap:anywhere}
.kind{font-weight:600}.kind.model{color:#1f5fa8}.kind.tool{color:#7a4a00}.kind.user{color:#333}
.refused{color:#a00}.ok{color:#176b2c}
.bar{position:relative;height:.7em;background:#f0f0f0;margin-top:.35em}
.bar span{position:absolute;top:0;bottom:0;min-width:2px}
.bar span.model{background:#4a86c8}.bar span.tool{background:#d4912a}
img.shot{max-width:100%;border:1px solid #ccc;margin:.3em 0}
dl.sum{display:grid;grid-template-columns:max-content 1fr;gap:.2em 1em;margin:1em 0}dl.sum dt{color:#555}
dl.sum dd{margin:0;overflow-wrap:anywhere}
"""

# What each score means (docs/evaluation.md); the reasons computed from the records are added to these.
MEANINGS: dict[str, str] = {
    "status": "scored, no_submission (no output file) or malformed (an output that breaks its schema)",
    "fl_pass": "1 when the root causes named are exactly the ground truth's (aliases resolved): the deciding score",
    "fl_precision": "share of the entities named as root causes that are root causes",
    "fl_recall": "share of the ground truth's root causes that were named",
    "ntam_fl": "NTAM fault localisation: topology-aware credit for naming entities near the root cause",
    "ntam_fpc": "NTAM fault propagation chain: credit for the propagation chain named",
    "a_at_1": "CUJBench A@1: root-cause component and fault type both right",
    "pcw": "CUJBench PCW: 0.5 component + 0.2 layer + 0.3 fault type match",
    "pce": "CUJBench PCE: component, layer and type matches, equal weights",
    "component_match": "the root-cause component named is the ground truth's",
    "layer_match": "the root cause's layer is the ground truth's",
    "type_match": "the root cause's fault type is the ground truth's",
    "evidence_recall": "share of the ground truth's evidence the output cites",
    "alerts_explained_recall": "share of the firing alerts the output's propagations explain",
    "predicted": "the entities the output names as root causes",
    "false_positives": "entities blamed as root causes that are not (on a healthy control: every entity blamed)",
    "blamed_distractors": "the benign changes (distractors) the output blames as a root cause",
    "distractor_blamed": "1 when the output blames a distractor (null: the scenario has none)",
    "mitigation_pass": "1 when the alerts cleared and the ground truth's state checks hold after the agent acted",
    "alerts_cleared": "the incident's alerts cleared after the mitigation",
    "state_ok": "the ground truth's state checks hold",
    "mttr": "seconds from the incident confirmed to the alerts clear",
    "submitted": "1 when the agent wrote an output",
    "calls": "tool calls made through the gateway",
    "tool_coverage": "share of the ground truth's evidence families the calls touched",
    "extra_calls": "calls beyond those the evidence needs",
    "invalid_actions": "calls the gateway refused (bad arguments, out of scope, over budget)",
    "model_calls": "model turns the recording proxy counted",
    "model_calls_refused": "model calls the proxy refused once a token or cost cap was reached",
    "model_budget": "the cap reached (tokens or cost), if any",
    "input_tokens": "prompt tokens over the run's model calls, cached ones included",
    "output_tokens": "output tokens over the run's model calls",
    "cached_tokens": "prompt-cache reads over the run's model calls",
    "cost_usd": "dollars, from the price table (null when a model has no price)",
    "model_seconds": "seconds spent waiting on the model",
    "trajectory": "whether the gateway's trajectory was recorded",
    "trajectory_bad_lines": "unreadable lines in the trajectory",
    "finops_pass": "the FinOps analysis passed (pass@1 of the answers, F1 or rank score 1)",
    "ciso_pass": "the agent's policy decided the real posture (SAP)",
    "workspace_pass": "every DevOps stage built and tested in a fresh copy of the agent's tree",
    "stage_pass_rate": "share of the DevOps stages that passed",
}


def _when(stamp: Any) -> float | None:
    if stamp is None:
        return None
    try:
        return dt.datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _num(value: Any, digits: int = 0) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "—"
    return f"{value:,.{digits}f}"


def _cost(value: Any) -> str:
    return "—" if not isinstance(value, int | float) else f"${value:.4f}"


def _pre(text: str) -> str:
    cut = f"\n…[{len(text) - MAX_TEXT:,} more characters]" if len(text) > MAX_TEXT else ""
    return f'<pre class="v">{escape(text[:MAX_TEXT] + cut)}</pre>'


def _pretty(text: str) -> str:
    """A JSON answer indented, anything else as it is."""
    try:
        return json.dumps(json.loads(text), indent=2)
    except ValueError:
        return text


def _block(summary: str, body: str, open_: bool = False) -> str:
    return f"<details{' open' if open_ else ''}><summary>{summary}</summary>{body}</details>"


# -- screenshots ---------------------------------------------------------------------------------------------
def _screenshot(call: dict[str, Any], answer: str, roots: list[Path]) -> str:
    """The picture a ``view_screenshot`` call returned: the capture's PNG in the run's files, else the answer's own
    base64 data when it was kept whole; "" when neither is there."""
    if not call["function_name"].endswith("view_screenshot"):
        return ""
    args = call.get("arguments") or {}
    journey, step = str(args.get("journey") or ""), str(args.get("step") or "")
    data: bytes | None = None
    if journey and step and "/" not in journey + step:
        for root in roots:
            found = sorted(root.rglob(f"{journey}/step-*-{step}.png")) if root.is_dir() else []
            if found and found[0].stat().st_size <= MAX_IMAGE:
                data = found[0].read_bytes()
                break
    if data is None:
        try:
            body = json.loads(answer)
            payload = body.get("result", body) if isinstance(body, dict) else {}
            data = base64.b64decode(str(payload.get("data")), validate=True) if payload.get("data") else None
        except (ValueError, AttributeError):
            data = None
    if not data or not data.startswith(b"\x89PNG"):
        return ""
    return (f'<img class="shot" alt="screenshot {escape(journey)}:{escape(step)}" '
            f'src="data:image/png;base64,{base64.b64encode(data).decode("ascii")}"/>')


# -- the timeline ------------------------------------------------------------------------------------------
def _bar(kind: str, start: float | None, seconds: float | None, t0: float, span: float) -> str:
    if start is None or span <= 0:
        return ""
    left = max(0.0, min(100.0, 100 * (start - t0) / span))
    width = max(0.0, min(100.0 - left, 100 * (seconds or 0.0) / span))
    return f'<div class="bar"><span class="{kind}" style="left:{left:.2f}%;width:{width:.2f}%"></span></div>'


def _tool_calls(step: dict[str, Any], roots: list[Path], t0: float = 0.0, span: float = 0.0) -> str:
    answers = {r.get("source_call_id"): str(r.get("content", ""))
               for r in (step.get("observation") or {}).get("results") or []}
    parts = []
    for call in step.get("tool_calls") or []:
        extra = call.get("extra") or {}
        status = extra.get("status")
        where = "gateway" if "gateway_call" in extra else "the CLI's own tool (its result is not recorded)"
        state = (f' <span class="{"ok" if status == "ok" else "refused"}">{escape(str(status))}</span>'
                 if status else "")
        took = f", {extra['elapsed']:.2f} s" if isinstance(extra.get("elapsed"), int | float) else ""
        head = (f'<span class="kind tool">{escape(call["function_name"])}</span>{state} '
                f'<span class="note">({where}{took})</span>')
        body = _block("arguments", _pre(json.dumps(call.get("arguments") or {}, indent=2)))
        answer = answers.get(call["tool_call_id"])
        if answer is not None:
            body += _block("answer", _screenshot(call, answer, roots) + _pre(_pretty(answer)))
        bar = _bar("tool", _when(extra.get("timestamp")), extra.get("elapsed") if isinstance(
            extra.get("elapsed"), int | float) else None, t0, span) if "gateway_call" in extra else ""
        parts.append(f"<div>{head}{body}{bar}</div>")
    return "".join(parts)


def _timeline(doc: dict[str, Any], roots: list[Path]) -> str:
    steps = doc["steps"]
    stamps = [_when(s.get("timestamp")) for s in steps]
    agent = doc["extra"]["opsbench"].get("agent") or {}
    known = [s for s in stamps if s is not None]
    t0: float = float(agent["started_at"]) if isinstance(agent.get("started_at"), int | float) else \
        min(known or [0.0])
    end: float = float(agent["ended_at"]) if isinstance(agent.get("ended_at"), int | float) else max(known or [t0])
    span = max(end - t0, 1e-3)
    rows = []
    for step, stamp in zip(steps, stamps, strict=True):
        offset = "—" if stamp is None else f"{stamp - t0:+.2f}"
        metrics = step.get("metrics") or {}
        extra = metrics.get("extra") or {}
        if step["source"] == "user":
            kind, what = '<span class="kind user">prompt</span>', _block("what the agent was asked",
                                                                         _pre(str(step.get("message", ""))))
            cells = ["", "", "", "", ""]
            bar = ""
        elif step.get("llm_call_count") == 0:
            kind = '<span class="kind tool">tool call</span>'
            what = _tool_calls(step, roots, t0, span)
            cells = ["", "", "", "", ""]
            bar = ""
        else:
            refused = extra.get("refused") or extra.get("status") == "refused"
            kind = (f'<span class="kind model">model turn</span><br/><span class="note">'
                    f'{escape(str(step.get("model_name", "")))}</span>'
                    + (f'<br/><span class="refused">refused ({escape(str(extra.get("budget") or "budget"))})'
                       "</span>" if refused else ""))
            text = str(step.get("message") or "")
            what = (_block("said: " + escape(text[:80]) + ("…" if len(text) > 80 else ""), _pre(text))
                    if text else "") + _tool_calls(step, roots, t0, span)
            latency = extra.get("latency")
            cells = [_num(metrics.get("prompt_tokens")), _num(metrics.get("cached_tokens")),
                     _num(metrics.get("completion_tokens")), _cost(metrics.get("cost_usd")),
                     _num(latency, 2) + ("" if extra.get("ttfb") is None else
                                         f'<br/><span class="note">ttfb {_num(extra.get("ttfb"), 2)}</span>')]
            bar = _bar("model", stamp, latency if isinstance(latency, int | float) else None, t0, span)
        rows.append(f"<tr><td>{step['step_id']}</td><td>{offset}</td><td class=\"l\">{kind}</td>"
                    + "".join(f"<td>{c}</td>" for c in cells) + f'<td class="what">{what}{bar}</td></tr>')
    left = ' class="l"'
    head = "".join(f"<th{left if h in ('Kind', 'What') else ''}>{h}</th>" for h in (
        "#", "Time (s)", "Kind", "Tokens in", "Cached", "Tokens out", "Cost", "Latency (s)", "What"))
    widths = "".join(f'<col style="width:{w}"/>' for w in ("3em", "5em", "9em", "6em", "5.5em", "5.5em", "5.5em",
                                                          "6em", "auto"))
    return (f'<div class="wide tlw"><table class="tl"><colgroup>{widths}</colgroup><thead><tr>{head}</tr></thead>'
            f"<tbody>{''.join(rows)}</tbody></table></div>")


# -- answer, ground truth, scores ----------------------------------------------------------------------------
def _ground_truth(state: dict[str, Any]) -> tuple[str, str]:
    """(where, text) of the run's ground truth: the file its vars name, else the scenario's in the catalogue."""
    named = ((state.get("vars") or {}).get("ground_truth") or "")
    candidates = [Path(str(named))] if named else []
    spec = state.get("spec_path")
    if spec:
        candidates.append(Path(str(spec)).parent / "ground_truth.yaml")
    for path in candidates:
        try:
            return str(path), path.read_text(errors="replace")
        except OSError:
            continue
    return "", ""


def _predicted_reason(scores: dict[str, Any], truth: str) -> str:
    """Why a diagnosis scored as it did: the root causes named against the ground truth's."""
    import yaml

    try:
        gt = yaml.safe_load(truth) if truth else {}
    except yaml.YAMLError:
        gt = {}
    roots = [str(e.get("id")) for e in (gt or {}).get("entities") or [] if isinstance(e, dict) and e.get("rootCause")]
    named = scores.get("predicted")
    if not isinstance(named, list):
        return ""
    return (f"named {', '.join(map(str, named)) or 'nothing'}; the ground truth's root cause"
            f"{'s are' if len(roots) != 1 else ' is'} {', '.join(roots) or 'none (no incident)'}")


def _reason(evaluator: str, metric: str, value: Any, scores: dict[str, Any], truth: str) -> str:
    meaning = MEANINGS.get(metric.rpartition(".")[2], "")
    status = scores.get("status")
    why = ""
    if metric == "status" and value in ("no_submission", "malformed"):
        why = "no output file was written" if value == "no_submission" else "the output breaks its schema"
    elif evaluator == "diagnosis" and metric in ("fl_pass", "fl_precision", "fl_recall", "predicted"):
        why = _predicted_reason(scores, truth)
    elif status in ("no_submission", "malformed") and metric != "status" and isinstance(value, int | float):
        why = f"{status}: scores 0"
    return "; ".join(p for p in (meaning, why) if p)


def _scores(evaluations: dict[str, Any], truth: str) -> str:
    rows = []
    for evaluator, scores in sorted((evaluations or {}).items()):
        if not isinstance(scores, dict):
            continue
        for metric, value in sorted(scores.items()):
            if isinstance(value, dict):
                continue
            shown = json.dumps(value) if isinstance(value, list | bool) or value is None else str(value)
            if isinstance(value, float):
                shown = f"{value:.4g}"
            reason = _reason(evaluator, metric, value, scores, truth)
            rows.append(f'<tr><td class="l">{escape(evaluator)}</td><td class="l">{escape(metric)}</td>'
                        f'<td>{escape(shown)}</td><td class="l">{escape(reason)}</td></tr>')
    if not rows:
        return '<p class="note">No scores recorded (the run did not reach its evaluation).</p>'
    return ('<div class="wide"><table><thead><tr><th class="l">Evaluator</th><th class="l">Score</th><th>Value</th>'
            f'<th class="l">What it means, and why</th></tr></thead><tbody>{"".join(rows)}</tbody></table></div>')


def _summary(doc: dict[str, Any], state: dict[str, Any], outcome: str) -> str:
    ops = doc["extra"]["opsbench"]
    final = doc["final_metrics"]
    agent = doc["agent"]
    elapsed = (ops.get("agent") or {}).get("elapsed")
    items = [
        ("Run", ops.get("run_id")), ("Scenario", ops.get("scenario_id")),
        ("Mode", ops.get("mode") + (f" of snapshot {ops['snapshot_id']}" if ops.get("snapshot_id") else "")),
        ("Agent", f"{agent['name']} {agent.get('version', '')}".strip()
         + (f", model {agent['model_name']}" if agent.get("model_name") else "")),
        ("Command", (agent.get("extra") or {}).get("command")),
        ("Run status", state.get("status")), ("Outcome", outcome),
        ("Agent time", f"{elapsed:.1f} s ({(ops.get('agent') or {}).get('status', '?')})"
         if isinstance(elapsed, int | float) else None),
        ("Model turns", _num((final.get("extra") or {}).get("model_calls"))),
        ("Tokens", f"{_num(final.get('total_prompt_tokens'))} in ({_num(final.get('total_cached_tokens'))} cached), "
                   f"{_num(final.get('total_completion_tokens'))} out"),
        ("Cost", _cost(final.get("total_cost_usd")) if "total_cost_usd" in final else
         ("— (no model call counted)" if not (final.get("extra") or {}).get("model_calls") else
          "— (a model without a price)")),
        ("Tool calls", _num((final.get("extra") or {}).get("tool_calls"))),
    ]
    body = "".join(f"<dt>{escape(k)}</dt><dd>{escape(str(v))}</dd>" for k, v in items if v not in (None, ""))
    return f'<dl class="sum">{body}</dl>'


def outcome_of(evaluations: dict[str, Any], status: Any) -> str:
    """The trial's outcome as the results classify it (correct, wrong, no_submission, malformed, excluded)."""
    from orchestrator.results import classify, decider

    scores, key = decider(evaluations or {})
    return classify(str(status), scores, key)


def render(run_dir: Path, back: str | None = None) -> str:
    """The page of the run recorded in ``run_dir``; ``back``: a link to the report it belongs to."""
    doc = atif.build(run_dir)
    state = atif.read_object(run_dir / "run.json")
    ops = doc["extra"]["opsbench"]
    evaluations = ops.get("evaluations") or {}
    outcome = outcome_of(evaluations, state.get("status"))
    where, truth = _ground_truth(state)
    roots = [run_dir] + ([Path(str(state["record_dir"]))] if state.get("record_dir") else [])
    host = run_dir.parent.parent  # a campaign or replay trial: its host's directory holds the capture
    if (host / "run.json").is_file():
        roots.append(host)
    answer = ops.get("output")
    title = f"Run {ops.get('run_id')}: {ops.get('scenario_id')}"
    link = f'<p class="note"><a href="{escape(back)}">← the report</a></p>' if back else ""
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"/>'
        f'<meta name="viewport" content="width=device-width, initial-scale=1"/><title>{escape(title)}</title>'
        f"<style>{CSS}</style></head><body>{link}<h1>{escape(title)}</h1>"
        f'<nav><a href="#summary">Summary</a> <a href="#timeline">Timeline</a> <a href="#answer">Answer and ground '
        'truth</a> <a href="#scores">Scores</a></nav>'
        f'<section id="summary"><h2>Summary</h2>{_summary(doc, state, outcome)}</section>'
        '<section id="timeline"><h2>Timeline</h2><p class="note">Each model turn the recording proxy counted, with '
        "the tool calls it asked for; gateway calls are joined to the turn that asked for them, with their answers "
        "(the CLI's own tools' results are not recorded). Time: seconds from the agent's start; the bar places the "
        "call in the agent's time (blue: waiting on the model, orange: a gateway call).</p>"
        f"{_timeline(doc, roots)}</section>"
        '<section id="answer"><h2>Answer and ground truth</h2><div class="cols"><div><h3>The agent\'s answer</h3>'
        + (_pre(json.dumps(answer, indent=2)) if answer is not None else
           '<p class="note">No answer: the agent wrote no output.</p>')
        + f'</div><div><h3>Ground truth</h3><p class="note">{escape(where)}</p>'
        + (_pre(truth) if truth else '<p class="note">The ground truth file is not on this machine.</p>')
        + "</div></div></section>"
        f'<section id="scores"><h2>Scores</h2>{_scores(evaluations, truth)}</section>'
        "</body></html>\n")


def write(run_dir: Path, out: Path, back: str | None = None) -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render(run_dir, back))
    return out
