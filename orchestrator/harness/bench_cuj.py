"""Benchmark browser evidence: one CUJ run's time and capture size, the capture per scenario, and what the
journeys add to a trial.

On one deployed shop (the harness's own run, purpose ``bench``):

1. the four shop journeys run ``repeats`` times straight against the shop (orchestrator.cuj.runner): wall time,
   each journey's time, capture size;
2. trials without an agent (``Run.trial``, as verify-scenarios runs them) of a fault without journeys and the same
   fault with its CUJ checks (default ``shop-cart-down`` vs ``shop-cuj-compound-cart-down``), alternated
   ``repeats`` times: the difference of their medians is what the journeys add to a trial, per step too;
3. one trial of each scenario in ``per_scenario`` (default one per family): its symptom capture's size.

``opsbench bench --cuj [--trials N] [SCENARIOS]``; see docs/cuj.md and docs/performance.md.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from orchestrator.catalog import find_scenario
from orchestrator.cuj.runner import run as run_journeys
from orchestrator.gateway.evidence.base import latest_capture
from orchestrator.lifecycle import Run
from orchestrator.progress import Progress
from orchestrator.trials import verify_trial

HOST_SCENARIO = "shop-cuj-healthy-baseline"
PAIR = ("shop-cart-down", "shop-cuj-compound-cart-down")
PER_SCENARIO = ("shop-cuj-healthy-baseline", "shop-cuj-edge-cart-api-503", "shop-cuj-flag-cart-failure",
                "shop-cuj-compound-cart-down", "shop-cuj-release-cart-contract-drift")


def du(path: Path) -> int:
    """Bytes of the regular files under `path`."""
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def _median(values: list[float]) -> float | None:
    return round(statistics.median(values), 2) if values else None


def bench_cuj(repeats: int, progress: Progress, per_scenario: tuple[str, ...] = PER_SCENARIO,
              pair: tuple[str, str] = PAIR) -> dict[str, Any]:
    host = Run.create(find_scenario(HOST_SCENARIO), agent=None, keep=False, progress=progress, purpose="bench")
    report: dict[str, Any] = {"repeats": repeats, "load": {}, "journeys": {}, "trials": {}, "captures": {}}
    try:
        deploy = host.step("deploy", 1, 1)
        if deploy.status != "successful":
            raise RuntimeError(f"deploy {deploy.status}: {'; '.join(deploy.failures)[:300]}")
        environment = json.loads((host.run_dir / "environment.json").read_text())
        base_url = str(environment["browser"]["base_url"])
        report["load"]["start"] = round(os.getloadavg()[0], 2)
        runs: list[dict[str, Any]] = []
        with tempfile.TemporaryDirectory(prefix="opsbench-bench-cuj-") as tmp:
            for i in range(repeats):
                t0 = time.monotonic()
                result = run_journeys(base_url, Path(tmp) / str(i))
                wall = time.monotonic() - t0
                runs.append({"wall_s": round(wall, 2), "statuses": result.statuses(),
                             "bytes": du(Path(tmp) / str(i)),
                             "per_journey_s": {j["name"]: j["duration_s"] for j in result.index["journeys"]}})
                progress.message(f"journeys run {i + 1}/{repeats}: {wall:.1f} s, {runs[-1]['bytes'] / 1024:.0f} KiB")
        report["journeys"] = {
            "runs": runs, "median_wall_s": _median([r["wall_s"] for r in runs]),
            "median_bytes": _median([float(r["bytes"]) for r in runs]),
            "median_per_journey_s": {name: _median([r["per_journey_s"][name] for r in runs])
                                     for name in runs[0]["per_journey_s"]} if runs else {}}
        trials: dict[str, list[dict[str, Any]]] = {s: [] for s in pair}
        for i in range(repeats):
            for scenario in pair:
                trials[scenario].append(_trial(host, scenario, progress, f"{i + 1}/{repeats}"))
        report["trials"] = {s: {"runs": t, "median_wall_s": _median([r["wall_s"] for r in t]),
                                "median_step_s": {step: _median([r["steps"][step] for r in t if step in r["steps"]])
                                                  for step in t[0]["steps"]} if t else {}}
                            for s, t in trials.items()}
        without, with_cuj = (report["trials"][s]["median_wall_s"] for s in pair)
        report["added_per_trial_s"] = round(with_cuj - without, 2) if with_cuj and without else None
        for scenario in per_scenario:
            one = _trial(host, scenario, progress, "1/1")
            report["captures"][scenario] = {"bytes": one["capture_bytes"], "outcome": one["outcome"],
                                            "wall_s": one["wall_s"]}
        report["load"]["end"] = round(os.getloadavg()[0], 2)
    finally:
        host.cleanup()
    return report


def _trial(host: Run, scenario: str, progress: Progress, label: str) -> dict[str, Any]:
    progress.message(f"{scenario}: trial {label}")
    scn = find_scenario(scenario)
    t0 = time.monotonic()
    since = time.time()
    res = verify_trial(host, scn)
    wall = time.monotonic() - t0
    steps = {name: round(float(r.get("elapsed") or 0.0), 2) for name, r in res["results"].items()}
    capture = latest_capture(host.run_dir / "browser", since)
    # The symptom capture: the manifestation's (its check is named user-symptom; a baseline's is journeys-pass).
    symptom = [p for p in (host.run_dir / "browser").glob("*") if p.is_dir() and p.name.endswith("-user-symptom")
               and p.stat().st_mtime >= since] if (host.run_dir / "browser").is_dir() else []
    chosen = max(symptom, key=lambda p: p.name) if symptom else capture
    return {"outcome": res["outcome"], "wall_s": round(wall, 2), "steps": steps,
            "capture_bytes": du(chosen) if chosen is not None else 0}


def render(report: dict[str, Any]) -> str:
    j = report["journeys"]
    lines = [f"browser evidence: {report['repeats']} repeats, load {report['load'].get('start')} -> "
             f"{report['load'].get('end')}",
             f"  one run of the four shop journeys: {j['median_wall_s']} s wall (median), capture "
             f"{(j['median_bytes'] or 0) / 1024:.0f} KiB",
             "    per journey: " + ", ".join(f"{k} {v} s" for k, v in j["median_per_journey_s"].items())]
    for scenario, t in report["trials"].items():
        steps = ", ".join(f"{k} {v}" for k, v in t["median_step_s"].items())
        lines.append(f"  trial {scenario}: {t['median_wall_s']} s (median; {steps})")
    lines.append(f"  added by the journeys per trial: {report.get('added_per_trial_s')} s")
    lines.append("  symptom capture per scenario:")
    lines += [f"    {s}: {c['bytes'] / 1024:.0f} KiB ({c['outcome']}, trial {c['wall_s']} s)"
              for s, c in report["captures"].items()]
    return "\n".join(lines)
