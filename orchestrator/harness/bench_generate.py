"""``opsbench bench --generate``: how fast generated incidents are drawn, and proven live and recorded, at K
environments at once (docs/generation.md).

- **Drawing**: `opsbench generate`'s work (draw, derive, validate every instance, write) for a count of instances,
  in instances per hour.
- **Proving and recording**: per level K, a fresh corpus of `per_level` instances built with `corpus build` (one live
  trial each: inject, manifestation, snapshot, removal, recovery, leftover check; no replays), in verified instances
  per hour of wall time, and without the deployments (which a long build pays once per environment).

The load average before and after each measurement is part of the report: these machines are shared.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from orchestrator.progress import Progress

DEFAULT_TEMPLATES = ("shop-cart-down", "shop-currency-crashloop", "shop-checkout-payment-abort", "shop-catalog-frozen")
"""Four mechanisms of different costs: a stopped container, a crash loop, an HTTP abort on one call path, a freeze."""
DRAW_COUNT = 100


def _load() -> float:
    return round(os.getloadavg()[0], 2)


def bench_draw(templates: Sequence[str], count: int) -> dict[str, Any]:
    """Draw `count` instances from `templates` (or as many as their variation space holds), timed."""
    from orchestrator.catalog import find_scenario
    from orchestrator.draw import generate_into
    from orchestrator.generation.templates import load_template

    space = sum(len(load_template(find_scenario(t)).variations) for t in templates)
    count = min(count, space)
    load = _load()
    with tempfile.TemporaryDirectory(prefix="opsbench-bench-draw-") as tmp:
        start = time.perf_counter()
        made = generate_into(tuple(templates), "opsbench-bench-draw", count, Path(tmp))
        seconds = time.perf_counter() - start
    return {"templates": len(templates), "count": made["count"], "seconds": round(seconds, 2),
            "ms_per_instance": round(1000 * seconds / max(1, made["count"]), 1),
            "per_hour": round(made["count"] / seconds * 3600) if seconds else None, "load": [load, _load()]}


def bench_level(templates: Sequence[str], per_level: int, k: int, progress: Progress,
                echo: Callable[[str], None]) -> dict[str, Any]:
    """Build a fresh corpus of `per_level` instances at K=`k` in a temporary folder; its throughput."""
    from orchestrator.harness.corpus_build import BuildRequest, build

    load = _load()
    with tempfile.TemporaryDirectory(prefix=f"opsbench-bench-k{k}-") as tmp:
        req = BuildRequest(templates=tuple(templates), seed=f"opsbench-bench-generate-k{k}", count=per_level,
                           replays=0, parallel=k)
        start = time.monotonic()
        record = build(req, Path(tmp) / "corpus", progress, echo)
        wall = time.monotonic() - start
    recordings = [i["recording"] for i in record["instances"] if i.get("recording")]
    deploy = sum(float(r["seconds"].get("deploy", 0.0)) for r in recordings)
    verified = sum(i["status"] == "verified" for i in record["instances"])
    trials = [float(r["seconds"]["trial"]) for r in recordings if "trial" in r["seconds"]]
    return {
        "k": k, "instances": len(record["instances"]), "verified": verified,
        "dropped": sum(i["status"] == "dropped" for i in record["instances"]),
        "wall_seconds": round(wall, 1), "deploy_seconds": round(deploy, 1),
        "median_trial_seconds": round(statistics.median(trials), 1) if trials else None,
        "per_hour": round(verified / wall * 3600, 1) if wall else None,
        "per_hour_without_deploys": round(verified / (wall - deploy / k) * 3600, 1) if wall > deploy / k else None,
        "load": [load, _load()],
    }


def bench_generate(templates: Sequence[str], per_level: int, levels: Sequence[int], progress: Progress,
                   echo: Callable[[str], None]) -> dict[str, Any]:
    """Drawing, then proving and recording at each level."""
    names = list(templates or DEFAULT_TEMPLATES)
    echo(f"drawing up to {DRAW_COUNT} instances from {len(names)} template(s)")
    report: dict[str, Any] = {"templates": names, "draw": bench_draw(names, DRAW_COUNT), "levels": {}}
    for k in levels:
        echo(f"K={k}: proving and recording {per_level} instance(s)")
        report["levels"][str(k)] = bench_level(names, per_level, k, progress, echo)
    return report


def render(report: dict[str, Any]) -> str:
    """The report as a table, with the load averages."""
    d = report["draw"]
    lines = [f"drawing: {d['count']} instances from {d['templates']} template(s) in {d['seconds']} s "
             f"({d['ms_per_instance']} ms each, {d['per_hour']}/hour; load {d['load'][0]} -> {d['load'][1]})", "",
             f"{'K':>2}  {'INSTANCES':>9}  {'VERIFIED':>8}  {'WALL s':>7}  {'DEPLOY s':>8}  {'TRIAL s (median)':>16}  "
             f"{'PER HOUR':>8}  {'W/O DEPLOY':>10}  LOAD"]
    for k, lv in report["levels"].items():
        lines.append(f"{k:>2}  {lv['instances']:>9}  {lv['verified']:>8}  {lv['wall_seconds']:>7}  "
                     f"{lv['deploy_seconds']:>8}  {lv['median_trial_seconds']!s:>16}  {lv['per_hour']!s:>8}  "
                     f"{lv['per_hour_without_deploys']!s:>10}  {lv['load'][0]} -> {lv['load'][1]}")
    return "\n".join(lines)
