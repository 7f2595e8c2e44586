"""``opsbench bench --replay``: the replay lifecycle's own cost, measured with a no-op agent.

For each parallelism level K, the chosen snapshots are replayed `trials` times each with an agent that does nothing
(``true``), their trials split over up to K frozen environments as `opsbench replay --parallel K` does; the runs
are tagged purpose ``bench`` (results and the leaderboard leave them out). From the runs' records it reports, per
phase, median/min/max seconds (deploy and teardown from the frozen environments, the rest from the trials), the
trial's lifecycle (wall time of a trial, agent included: it is the no-op), the same plus the environments' deploy
and teardown spread over their trials, replay trials per hour at each K, and the machine's load while it ran.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from orchestrator import paths, store
from orchestrator.errors import OpsBenchError
from orchestrator.harness.bench_lifecycle import NOOP_AGENT, summary_stats
from orchestrator.harness.replay import ReplayRecord, replay
from orchestrator.progress import Progress

PHASES = ["deploy", "handover", "agent", "collect", "evaluate", "revoke", "teardown"]
"""What a replay costs: the frozen environment's deploy and teardown (once per environment) and each trial's
steps (collect, evaluate and revoke run in one playbook invocation, `finish`, timed per play)."""
SAMPLE_CORPUS = paths.PROJECT_ROOT / "tests" / "data" / "snapshots"
ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar.xz", ".txz")


def corpus_paths(directory: Path) -> list[Path]:
    """The snapshots of a corpus directory (a folder of snapshots, or a built corpus: its `snapshots/`): its snapshot
    directories and archives, sorted by name. An error names the directory when it holds none."""
    from orchestrator.corpus.layout import CORPUS_INDEX, SNAPSHOTS
    from orchestrator.snapshots.format import INDEX

    if not directory.is_dir():
        raise OpsBenchError(f"{directory}: not a directory of snapshots")
    if (directory / CORPUS_INDEX).is_file():  # a built corpus: its snapshots folder
        directory = directory / SNAPSHOTS
    found = sorted(p for p in directory.iterdir()
                   if (p.is_dir() and (p / INDEX).is_file()) or (p.is_file() and p.name.endswith(ARCHIVE_SUFFIXES)))
    if not found:
        raise OpsBenchError(f"{directory}: no snapshots (directories with {INDEX}, or archives "
                            f"{', '.join(ARCHIVE_SUFFIXES)})")
    return found


def replay_targets(args: Sequence[str | Path]) -> list[Path]:
    """`bench --replay` arguments as snapshot paths: a corpus directory stands for its snapshots; none given, the
    committed sample corpus. A path that does not exist is an error naming it."""
    out: list[Path] = []
    for arg in args or [SAMPLE_CORPUS]:
        path = Path(arg)
        if not path.exists():
            raise OpsBenchError(f"{path}: no such snapshot, archive or corpus directory")
        from orchestrator.snapshots.format import INDEX

        out += corpus_paths(path) if path.is_dir() and not (path / INDEX).is_file() else [path]
    return out


class LoadSampler:
    """The 1-minute load average every few seconds, in a thread: figures on a busy machine mean less."""

    def __init__(self, interval: float = 5.0) -> None:
        self.interval, self.loads = interval, [os.getloadavg()[0]]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> LoadSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)
        self.loads.append(os.getloadavg()[0])

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.loads.append(os.getloadavg()[0])


def phase_times(records: Sequence[ReplayRecord]) -> tuple[dict[str, list[float]], list[float], dict[str, float]]:
    """Per-phase seconds over the trials' and their hosts' run records, each trial's wall time, and each host's
    deploy + teardown."""
    phases: dict[str, list[float]] = {p: [] for p in PHASES}
    trials: list[float] = []
    hosts: dict[str, float] = {}
    for rec in records:
        if rec.run_id and (row := store.get_run(rec.run_id)):
            results = json.loads((Path(row["run_dir"]) / "run.json").read_text())["results"]
            for step in PHASES:
                if isinstance(results.get(step, {}).get("elapsed"), (int, float)):
                    phases[step].append(float(results[step]["elapsed"]))
            trials.append(rec.elapsed)
        if rec.host and rec.host not in hosts and (row := store.get_run(rec.host)):
            host = json.loads((Path(row["run_dir"]) / "run.json").read_text())["results"]
            cost = 0.0
            for step in ("deploy", "teardown"):
                if isinstance(host.get(step, {}).get("elapsed"), (int, float)):
                    phases[step].append(float(host[step]["elapsed"]))
                    cost += float(host[step]["elapsed"])
            hosts[rec.host] = cost
    return phases, trials, hosts


def bench_replay(snapshots: Sequence[Path], trials: int, levels: list[int], progress: Progress,
                 echo: Callable[[str], None] = lambda text: None) -> dict[str, Any]:
    """Run the measurements (see module docstring) and return the report."""
    report: dict[str, Any] = {"snapshots": [str(p) for p in snapshots], "trials": trials, "agent": NOOP_AGENT,
                              "levels": {}}
    for k in levels:
        echo(f"K={k}: {len(snapshots)} snapshot(s) x {trials} replay trial(s), up to {k} frozen environment(s)")
        start = time.monotonic()
        with LoadSampler() as load:
            records = replay(list(snapshots), NOOP_AGENT, trials, k, progress=progress, purpose="bench")
        wall = time.monotonic() - start
        phases, per_trial, hosts = phase_times(records)
        done = [r for r in records if r.status == "completed"]
        share = sum(hosts.values()) / len(per_trial) if per_trial else 0.0
        report["levels"][str(k)] = {
            "wall_s": round(wall, 1), "trials": len(records), "completed": len(done), "environments": len(hosts),
            "statuses": sorted({r.status for r in records}),
            "replays_per_hour": round(len(done) / (wall / 3600), 1) if wall > 0 else None,
            "phases_s": {p: summary_stats(v) for p, v in phases.items()},
            "trial_s": summary_stats(per_trial),
            "trial_with_environment_share_s": summary_stats([t + share for t in per_trial]),
            "load_1m": summary_stats(load.loads), "cores": os.cpu_count(),
        }
    ranked = [(v["replays_per_hour"] or 0.0, int(k)) for k, v in report["levels"].items()]
    report["best"] = {"parallel": max(ranked)[1], "replays_per_hour": max(ranked)[0]} if ranked else None
    return report


def render(report: dict[str, Any]) -> str:
    lines = [f"replay: {len(report['snapshots'])} snapshot(s); {report['trials']} trial(s) each; agent "
             f"`{report['agent']}` (no-op)"]
    for k, level in report["levels"].items():
        lines.append(f"\nK={k}: {level['completed']}/{level['trials']} trials on {level['environments']} frozen "
                     f"environment(s) in {level['wall_s']} s -> {level['replays_per_hour']} replays/hour")
        if level.get("load_1m"):
            lines.append(f"  machine: {level['cores']} cores, 1-min load average median {level['load_1m']['median']}"
                         f" (min {level['load_1m']['min']}, max {level['load_1m']['max']})")
        lines.append(f"  {'PHASE':<18} {'MEDIAN s':>9} {'MIN s':>8} {'MAX s':>8} {'N':>4}")
        for phase, s in level["phases_s"].items():
            if s:
                lines.append(f"  {phase:<18} {s['median']:>9} {s['min']:>8} {s['max']:>8} {s['n']:>4}")
        for key, label in (("trial_s", "trial (wall)"), ("trial_with_environment_share_s", "+ environment share")):
            s = level[key]
            if s:
                lines.append(f"  {label:<18} {s['median']:>9} {s['min']:>8} {s['max']:>8} {s['n']:>4}")
    if report.get("best"):
        lines.append(f"\nbest: K={report['best']['parallel']}, {report['best']['replays_per_hour']} replays/hour")
    return "\n".join(lines)
