"""Scoring of SRE mitigation: did the environment get well, and how fast (MTTR).

ITBench scores mitigation by the environment's state, not by what the agent says it did.
Here a mitigation passes when, after the agent has finished:

1. no alert is active and none returns for a hold window (``alerts_cleared``), and
2. the state checks of at least one accepted mitigation in the ground truth all hold
   (``state_ok``; None when the ground truth gives no checks, which then do not count).

``mttr`` is seconds from the incident's confirmation (the end of the manifestation step,
when the expected alerts were firing and the agent got the incident) to the moment the alerts
were last seen clear before the hold completed. The agent's report (``mitigation_output``
schema) is still required: missing or malformed, the run is scored ``no_submission`` /
``malformed`` with ``mitigation_pass`` 0, whatever the state, as for every task kind.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from orchestrator.evaluation.outputs import load_output

Query = Callable[[str], list[Any]]


def run_state_checks(query: Query, ground_truth: Mapping[str, Any], timeout: float = 20.0,
                     interval: float = 2.0) -> list[dict[str, Any]]:
    """Evaluate every accepted mitigation's checks: one result per mitigation with checks.

    A check passes once its PromQL result is empty/non-empty as expected; each is retried until
    ``timeout`` (a metric catches up a scrape or two after the state changes). A query error
    counts as not passing, with the error in ``detail``.
    """
    results = []
    for index, mitigation in enumerate(ground_truth.get("mitigations") or []):
        checks = mitigation.get("checks") or []
        if not checks:
            continue
        outcomes = []
        for check in checks:
            want_rows = check.get("expect", "nonempty") == "nonempty"
            deadline, detail, ok = time.monotonic() + timeout, "", False
            while True:
                try:
                    rows = query(check["query"])
                    ok, detail = bool(rows) == want_rows, f"{len(rows)} series"
                except Exception as exc:
                    ok, detail = False, f"query failed: {exc}"
                if ok or time.monotonic() >= deadline:
                    break
                time.sleep(interval)
            outcomes.append({"name": check["name"], "ok": ok, "detail": detail})
        results.append({"mitigation": index, "description": mitigation.get("description", ""),
                        "ok": all(o["ok"] for o in outcomes), "checks": outcomes})
    return results


def score_mitigation(output_path: Path | None, alerts: Mapping[str, Any], state: list[dict[str, Any]],
                     timeline: Mapping[str, Any]) -> dict[str, Any]:
    """Score one mitigation from the agent's report, the alert wait and the state checks.

    ``alerts`` is the result of the quiet-with-hold wait (``ok``, ``quiet_since_epoch``,
    ``detail``); ``state`` is :func:`run_state_checks`'s result; ``timeline`` maps step names
    to ``{started_at, ended_at}`` (Unix times) as the lifecycle records them.
    """
    alerts_cleared = float(bool(alerts.get("ok")))
    state_ok = None if not state else float(any(m["ok"] for m in state))
    confirmed = (timeline.get("manifestation") or {}).get("ended_at")
    cleared_at = alerts.get("quiet_since_epoch")
    healthy = alerts_cleared == 1.0 and state_ok in (None, 1.0)
    mttr = (round(max(0.0, float(cleared_at) - float(confirmed)), 1)
            if healthy and cleared_at is not None and confirmed is not None else None)
    failed_checks = [c["name"] for m in state for c in m["checks"] if not c["ok"]]
    scores: dict[str, Any] = {
        "alerts_cleared": alerts_cleared,
        "state_ok": state_ok,
        "mttr": mttr,
        "detail": "; ".join(filter(None, [
            "" if alerts_cleared else str(alerts.get("detail", "alerts did not clear")),
            "" if state_ok != 0.0 else "state checks failed: " + ", ".join(failed_checks)])),
    }
    loaded = load_output(output_path, "mitigate")
    if loaded.output is None:
        return {**scores, "status": loaded.status, "reason": loaded.reason, "mitigation_pass": 0.0, "actions": 0}
    return {**scores, "status": "scored", "mitigation_pass": float(healthy),
            "actions": len(loaded.output.get("actions") or [])}
