"""``opsbench verify-scenarios``: prove each scenario manifests and recovers, without an agent.

Scenarios that share an environment (same application and environment arguments) share one
deployment: deploy once, then for each scenario and repeat run baseline -> inject ->
manifestation -> remove -> recovery -> pristine (leftover check), then tear down. A trial
passes when the manifestation gate holds, recovery holds and nothing is left behind.
"""

from __future__ import annotations

import json
import statistics
import threading
from collections.abc import Callable
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

from orchestrator.interrupts import Interrupts
from orchestrator.lifecycle import Run
from orchestrator.progress import Progress
from orchestrator.spec import Scenario
from orchestrator.trials import verify_trial


@dataclass
class Trial:
    scenario: str
    repeat: int
    outcome: str
    reason: str = ""
    time_to_alert: float | None = None
    time_to_recover: float | None = None
    leftovers: list[str] = field(default_factory=list)
    run_id: str = ""

    @property
    def passed(self) -> bool:
        return self.outcome == "passed"


def check_wait(result: dict[str, Any]) -> float | None:
    """Seconds a phase's checks waited until they held: the slowest check, else the step's time."""
    waits = [c["waited_s"] for c in result.get("stats", {}).get("checks", {}).values()
             if isinstance(c, dict) and isinstance(c.get("waited_s"), (int, float))]
    if waits:
        return round(float(max(waits)), 1)
    elapsed = result.get("elapsed")
    return round(float(elapsed), 1) if isinstance(elapsed, (int, float)) else None


def environment_key(scn: Scenario) -> str:
    env = scn.environment
    return json.dumps({"application": env["application"], "backend": env["backend"], "args": env["args"]},
                      sort_keys=True)


def group_by_environment(scenarios: list[Scenario]) -> list[list[Scenario]]:
    groups: dict[str, list[Scenario]] = {}
    for scn in scenarios:
        groups.setdefault(environment_key(scn), []).append(scn)
    return list(groups.values())


def _verify_chunk(chunk: list[Scenario], repeats: int, progress: Progress, interrupts: Interrupts,
                  record: Callable[[Trial], None], idempotency: bool) -> None:
    """Deploy one environment, run every trial of `chunk` on it, tear it down."""
    run = Run.create(chunk[0], agent=None, keep=False, progress=progress, purpose="verify")
    run.interrupts = interrupts
    mine: list[Trial] = []
    progress.message(f"environment {run.id} ({chunk[0].environment['application']}) "
                     f"for {len(chunk)} scenario(s) x {repeats}")
    try:
        deploy = run.step("deploy", 1, 1)
        for scn in chunk:
            for repeat in range(1, repeats + 1):
                if deploy.status != "successful":
                    trial = Trial(scn.id, repeat, "error",
                                  f"deploy {deploy.status}: {'; '.join(deploy.failures)[:300]}", run_id=run.id)
                elif interrupts.set:
                    trial = Trial(scn.id, repeat, "interrupted", "interrupted", run_id=run.id)
                else:
                    progress.message(f"{scn.id}: repeat {repeat}/{repeats}")
                    # After a passed trial the environment is proven healthy (its recovery checks
                    # are the baseline checks) and pristine: no need to check the baseline again.
                    healthy = bool(mine) and mine[-1].passed and _same_baseline(mine[-1].scenario, scn, chunk)
                    res = verify_trial(run, scn, idempotency, healthy)
                    steps = res["results"]
                    trial = Trial(
                        scn.id, repeat, res["outcome"], res["reason"],
                        check_wait(steps["manifestation"])
                        if scn.faults and scn.checks("manifestation") and "manifestation" in steps else None,
                        check_wait(steps["recovery"]) if "recovery" in steps else None,
                        list(res["leftovers"]), run.id)
                mine.append(trial)
                record(trial)
    finally:
        run.state["status"] = "verified"
        run.cleanup()
        if run.state.get("cleanup") != "done":
            problems = "; ".join(run.state.get("cleanup_problems", []))[:300]
            for trial in mine:
                if trial.passed:
                    trial.outcome, trial.reason = "failed", f"teardown failed: {problems}"


def _same_baseline(previous: str, scn: Scenario, chunk: list[Scenario]) -> bool:
    """True when the previous scenario's recovery checks are this scenario's baseline checks."""
    prev = next(s for s in chunk if s.id == previous)
    return prev.checks("recovery") == scn.checks("baseline")


def tagged_progress(progress: Progress, tag: str) -> Progress:
    """Progress for one of several environments at once: every line names its environment."""
    return Progress(
        step_started=lambda step, i, n: None,
        step_ended=lambda step, status, secs, detail: progress.message(
            f"[{tag}] {step} {status} in {secs:.1f}s" + (f": {detail[:200]}" if status != "successful" else "")),
        task=lambda step, task: None,
        message=lambda text: progress.message(f"[{tag}] {text}"),
    )


def verify(scenarios: list[Scenario], repeats: int, progress: Progress,
           on_trial: Callable[[Trial], None] = lambda t: None, parallel: int = 1,
           idempotency: bool = False) -> list[Trial]:
    """Run every scenario `repeats` times on shared environments (up to `parallel` at once)."""
    chunks: list[list[Scenario]] = []
    for group in group_by_environment(scenarios):
        k = max(1, min(parallel, len(group)))
        chunks += [group[i::k] for i in range(k)]
    trials: list[Trial] = []
    lock = threading.Lock()

    def record(trial: Trial) -> None:
        with lock:
            trials.append(trial)
            on_trial(trial)

    with Interrupts(progress.message) as interrupts:
        if parallel <= 1:
            for chunk in chunks:
                if interrupts.set:
                    break
                _verify_chunk(chunk, repeats, progress, interrupts, record, idempotency)
        else:
            with ThreadPoolExecutor(max_workers=parallel) as pool:
                futures = [pool.submit(_verify_chunk, chunk, repeats, tagged_progress(progress, f"env{i + 1}"),
                                       interrupts, record, idempotency) for i, chunk in enumerate(chunks)]
                # Wait in short slices: signals are handled by the main thread between them.
                while not all(f.done() for f in futures):
                    wait(futures, timeout=0.5, return_when=FIRST_EXCEPTION)
                for f in futures:
                    f.result()
    return trials


def summarize(trials: list[Trial], scenario_ids: list[str], repeats: int) -> list[dict[str, Any]]:
    """Per scenario: passed (all repeats passed), medians and ranges, leftovers, first failure."""
    rows = []
    for sid in scenario_ids:
        mine = [t for t in trials if t.scenario == sid]
        alerts = [t.time_to_alert for t in mine if t.time_to_alert is not None]
        recover = [t.time_to_recover for t in mine if t.time_to_recover is not None]
        failed = [t for t in mine if not t.passed]
        rows.append({
            "scenario": sid,
            "passed": len(mine) == repeats and not failed,
            "repeats_passed": sum(t.passed for t in mine),
            "repeats": repeats,
            "time_to_alert_median": round(statistics.median(alerts), 1) if alerts else None,
            "time_to_alert_range": [min(alerts), max(alerts)] if alerts else None,
            "time_to_recover_median": round(statistics.median(recover), 1) if recover else None,
            "time_to_recover_range": [min(recover), max(recover)] if recover else None,
            "leftovers": sorted({item for t in mine for item in t.leftovers}),
            "failure": failed[0].reason if failed else "",
            "trials": [t.__dict__ for t in mine],
        })
    return rows


def render_table(rows: list[dict[str, Any]]) -> str:
    def secs(median: float | None, rng: list[float] | None) -> str:
        return "-" if median is None or rng is None else f"{median:.1f} ({rng[0]:.0f}-{rng[1]:.0f})"

    head = ("SCENARIO", "RESULT", "ALERT s median (range)", "RECOVER s median (range)", "LEFTOVERS")
    lines = [(r["scenario"], f"{'pass' if r['passed'] else 'FAIL'} {r['repeats_passed']}/{r['repeats']}",
              secs(r["time_to_alert_median"], r["time_to_alert_range"]),
              secs(r["time_to_recover_median"], r["time_to_recover_range"]),
              str(len(r["leftovers"]))) for r in rows]
    widths = [max(len(x[i]) for x in [head, *lines]) for i in range(len(head))]
    out = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in [head, *lines]]
    for r in rows:
        if r["failure"]:
            out.append(f"  {r['scenario']}: {r['failure']}")
        for item in r["leftovers"]:
            out.append(f"  {r['scenario']}: leftover: {item}")
    return "\n".join(out)


def describe_trial(t: Trial) -> str:
    """One finished trial as a progress line: outcome, times to alert and recover, the reason of a failure."""
    return (f"  {t.scenario} #{t.repeat}: {t.outcome}"
            + (f" alert {t.time_to_alert}s" if t.time_to_alert is not None else "")
            + (f" recover {t.time_to_recover}s" if t.time_to_recover is not None else "")
            + (f" ({t.reason})" if t.reason else ""))


def render_verdict(rows: list[dict[str, Any]], repeats: int) -> str:
    """The result table and the count of scenarios that passed every repeat."""
    return render_table(rows) + f"\n{sum(r['passed'] for r in rows)}/{len(rows)} scenario(s) passed {repeats} repeat(s)"
