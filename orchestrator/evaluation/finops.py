"""FinOps scoring (ITBench App. E.4): data-insight answers (pass@1), anomaly detection (F1) and ranking (rank score).

Inputs: the agent's ``finops_output`` and the ground truth's ``finops`` section.

* **Answers** (``finops.answers[]``): the output's ``answers[<id>]`` must be a list of rows (objects). Rows are
  matched on the ``keys`` exactly (text compared after trimming; numbers as numbers). The answer passes when it has
  exactly the expected keys, every ``field`` of every row matches (numbers within ``max(absolute, relative x
  |expected|)``, default 0.01 and 0.5 %; text exactly, dates on their first 10 characters) and, for ``ordered``
  questions, the rows come in the expected order. ``field_accuracy`` is the fraction of expected (row, field) values
  found correct (partial credit, not the pass criterion).
* **Detection** (``finops.anomalies`` with ``mode: detect``): the anomalous days the output names (each anomaly's
  ``start``, through its ``end`` when given) against the days of the planted anomalies in the window: precision,
  recall and ``f1``. The scenario passes when f1 = 1.
* **Ranking** (``mode: rank``): output anomalies (in their order, most important first) are matched one-to-one to the
  planted ones by overlapping days (largest overlap first): event precision/recall/``f1``. ``rank_score`` is the
  fraction of the matched (true-positive) anomalies whose rank among the matched ones in the output's order equals
  their rank among the same anomalies ordered by the true importance (C x duration, normalised); 0 when nothing is
  matched. ``importance_accuracy``: fraction of matched anomalies whose reported ``importance`` is within 0.05 of the
  true one. The scenario passes when f1 = 1 and rank_score = 1.
* **Tokens**: ``input_tokens``/``output_tokens`` from the output's ``usage`` (token utilisation), None when absent.
"""

from __future__ import annotations

import datetime as dt
import math
from pathlib import Path
from typing import Any

from orchestrator.evaluation.outputs import load_output

DEFAULT_TOLERANCE = {"absolute": 0.01, "relative": 0.005}


def _norm_key(value: Any) -> Any:
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int | float):
        return float(value)
    return str(value).strip()


def _value_ok(got: Any, want: Any, tol: dict[str, float]) -> bool:
    if isinstance(want, int | float) and not isinstance(want, bool):
        if isinstance(got, str):
            try:
                got = float(got.replace(",", "").rstrip("%"))
            except ValueError:
                return False
        if not isinstance(got, int | float) or isinstance(got, bool) or not math.isfinite(float(got)):
            return False
        return abs(float(got) - float(want)) <= max(tol["absolute"], tol["relative"] * abs(float(want)))
    if want is None:
        return got is None
    if isinstance(want, str) and len(want) >= 10 and want[4:5] == "-" and want[7:8] == "-":
        return isinstance(got, str) and got.strip()[:10] == want[:10]
    return isinstance(got, str) and got.strip() == str(want).strip()


def score_answer(got: Any, question: dict[str, Any]) -> dict[str, Any]:
    """One question: {pass, field_accuracy, reason}."""
    keys, fields = question["keys"], question.get("fields", [])
    expected: list[dict[str, Any]] = question["rows"]
    tol = {**DEFAULT_TOLERANCE, **question.get("tolerance", {})}
    total = max(1, len(expected) * max(1, len(fields)))
    if got is None:
        return {"pass": 0, "field_accuracy": 0.0, "reason": "no answer"}
    if isinstance(got, dict):
        got = [got]
    if not isinstance(got, list) or not all(isinstance(r, dict) for r in got):
        return {"pass": 0, "field_accuracy": 0.0, "reason": "the answer must be a list of rows (objects)"}

    def key_of(row: dict[str, Any]) -> tuple[Any, ...]:
        return tuple(_norm_key(row.get(k)) for k in keys)

    got_by_key: dict[tuple[Any, ...], dict[str, Any]] = {}
    for row in got:
        got_by_key.setdefault(key_of(row), row)
    correct = 0
    wrong: list[str] = []
    for row in expected:
        mine = got_by_key.get(key_of(row))
        if mine is None:
            wrong.append(f"missing {key_of(row)}")
            continue
        for f in fields or []:
            if _value_ok(mine.get(f), row[f], tol):
                correct += 1
            else:
                wrong.append(f"{key_of(row)}.{f}: {mine.get(f)!r} != {row[f]!r}")
        if not fields:
            correct += 1
    want_keys = [key_of(r) for r in expected]
    got_keys = [key_of(r) for r in got]
    extra = [k for k in got_keys if k not in want_keys]
    if extra:
        wrong.append(f"unexpected rows {extra[:3]}")
    if len(got_keys) != len(set(got_keys)):
        wrong.append("duplicate rows")
    if question.get("ordered") and not wrong and got_keys != want_keys:
        wrong.append(f"order {got_keys} != {want_keys}")
    return {"pass": 0 if wrong else 1, "field_accuracy": round(correct / total, 6),
            "reason": "; ".join(wrong)[:500]}


def _day(value: Any) -> dt.date | None:
    try:
        return dt.date.fromisoformat(str(value).strip()[:10])
    except ValueError:
        return None


def _days(start: Any, end: Any = None) -> set[dt.date]:
    first = _day(start)
    if first is None:
        return set()
    last = _day(end) if end else first
    if last is None or last < first or (last - first).days > 366:
        last = first
    return {first + dt.timedelta(days=i) for i in range((last - first).days + 1)}


def _prf(tp: int, n_pred: int, n_true: int) -> tuple[float, float, float]:
    precision = tp / n_pred if n_pred else 0.0
    recall = tp / n_true if n_true else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    if n_pred == 0 and n_true == 0:
        precision = recall = f1 = 1.0
    return round(precision, 6), round(recall, 6), round(f1, 6)


def score_detection(predicted: list[dict[str, Any]], truth: list[dict[str, Any]]) -> dict[str, Any]:
    """Day-level precision, recall and F1 of the anomalous days."""
    pred_days: set[dt.date] = set()
    for a in predicted:
        pred_days |= _days(a.get("start"), a.get("end"))
    true_days: set[dt.date] = set()
    for a in truth:
        true_days |= _days(a["start"], a["end"])
    p, r, f1 = _prf(len(pred_days & true_days), len(pred_days), len(true_days))
    return {"precision": p, "recall": r, "f1": f1, "predicted_days": len(pred_days), "true_days": len(true_days)}


def match_events(predicted: list[dict[str, Any]], truth: list[dict[str, Any]]) -> list[tuple[int, int]]:
    """One-to-one (predicted index, true index) pairs of overlapping anomalies, largest overlap first."""
    pairs = []
    for i, a in enumerate(predicted):
        mine = _days(a.get("start"), a.get("end"))
        for j, t in enumerate(truth):
            overlap = len(mine & _days(t["start"], t["end"]))
            if overlap:
                pairs.append((-overlap, i, j))
    used_p: set[int] = set()
    used_t: set[int] = set()
    out = []
    for _, i, j in sorted(pairs):
        if i not in used_p and j not in used_t:
            used_p.add(i)
            used_t.add(j)
            out.append((i, j))
    return out


def score_ranking(predicted: list[dict[str, Any]], truth: list[dict[str, Any]]) -> dict[str, Any]:
    """Event-level F1, rank score and importance accuracy of a ranked anomaly list (ITBench App. E.4)."""
    matched = match_events(predicted, truth)
    p, r, f1 = _prf(len(matched), len(predicted), len(truth))
    if not matched:
        return {"event_precision": p, "event_recall": r, "f1": f1, "rank_score": 0.0 if truth else 1.0,
                "importance_accuracy": None, "matched": 0}
    by_agent = sorted(matched, key=lambda m: m[0])
    by_truth = sorted(matched, key=lambda m: (-float(truth[m[1]]["importance"]), truth[m[1]]["start"]))
    correct = sum(1 for a, t in zip(by_agent, by_truth, strict=True) if a == t)
    with_importance = [(i, j) for i, j in matched if isinstance(predicted[i].get("importance"), int | float)]
    importance_ok = [abs(float(predicted[i]["importance"]) - float(truth[j]["importance"])) <= 0.05
                     for i, j in with_importance]
    return {"event_precision": p, "event_recall": r, "f1": f1, "rank_score": round(correct / len(matched), 6),
            "importance_accuracy": round(sum(importance_ok) / len(importance_ok), 6) if importance_ok else None,
            "matched": len(matched)}


def score_finops(output_path: Path | None, ground_truth: dict[str, Any]) -> dict[str, Any]:
    """Every FinOps metric of one run; ``finops_pass`` (0/1) is the trial's correctness for pass@k."""
    gt = ground_truth.get("finops") or {}
    loaded = load_output(output_path, "analyze")
    scores: dict[str, Any] = {"status": loaded.status}
    if loaded.status != "scored" or loaded.output is None:
        scores.update(finops_pass=0, reason=loaded.reason)
        return scores
    out = loaded.output
    passes: list[int] = []
    answers = out.get("answers") or {}
    questions = gt.get("answers", [])
    for q in questions:
        result = score_answer(answers.get(q["id"]), q)
        passes.append(result["pass"])
        prefix = "" if len(questions) == 1 else f"{q['id']}."
        scores.update({f"{prefix}pass_at_1": result["pass"], f"{prefix}field_accuracy": result["field_accuracy"]})
        if result["reason"]:
            scores[f"{prefix}reason"] = result["reason"]
    if "anomalies" in gt:
        spec = gt["anomalies"]
        predicted = [a for a in out.get("anomalies") or [] if isinstance(a, dict)]
        truth = spec["items"]
        if spec.get("mode", "detect") == "rank":
            ranking = score_ranking(predicted, truth)
            scores.update(ranking)
            scores.update({f"day_{k}": v for k, v in score_detection(predicted, truth).items()
                           if k in ("precision", "recall", "f1")})
            passes.append(int(ranking["f1"] == 1.0 and ranking["rank_score"] == 1.0))
        else:
            detection = score_detection(predicted, truth)
            scores.update(detection)
            passes.append(int(detection["f1"] == 1.0))
    usage = out.get("usage") or {}
    scores["input_tokens"] = usage.get("input_tokens")
    scores["output_tokens"] = usage.get("output_tokens")
    scores["tokens"] = (None if scores["input_tokens"] is None and scores["output_tokens"] is None
                        else (scores["input_tokens"] or 0) + (scores["output_tokens"] or 0))
    scores["finops_pass"] = int(bool(passes) and all(passes))
    return scores
