"""``opsbench bench``: the lifecycle's own cost, measured with a no-op agent.

For each parallelism level K, a campaign of the chosen scenarios x trials runs with an agent that does nothing
(``true``), on shared environments as campaigns do; its runs are tagged purpose ``bench``, so results
and the leaderboard leave them out. From the runs' records it reports, per phase, median/min/max
seconds (deploy and teardown from the hosts, the rest from the trials, plus time to alert and time to recover
from the checks' own waits), the per-trial lifecycle excluding the agent (wall clock: its steps overlap) with and
without the hosts' deploy and teardown spread over their trials, runs per hour at each K, and the peak memory of
the environments (podman's cgroup figures, sampled every few seconds). The orchestrator's overhead against bare
``ansible-playbook`` of the same playbook is measured in the same invocation
(`orchestrator.harness.bench.measure_overhead`).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from orchestrator import paths, store
from orchestrator.errors import OpsBenchError
from orchestrator.harness.campaign import Campaign, run_campaign
from orchestrator.harness.verify import check_wait
from orchestrator.progress import Progress
from orchestrator.run_vars import new_run_id
from orchestrator.runner import ansible_env
from orchestrator.spec import Scenario

NOOP_AGENT = "true"
PHASES = ["deploy", "baseline", "inject", "time_to_alert", "manifestation", "handover", "agent", "collect",
          "evaluate", "revoke", "remove", "time_to_recover", "recovery", "pristine", "teardown"]
UNITS = {"b": 1.0, "kb": 1e3, "mb": 1e6, "gb": 1e9, "kib": 1024.0, "mib": 1024.0**2, "gib": 1024.0**3}
NOT_LIFECYCLE = ("agent", "time_to_alert", "time_to_recover")  # inside other phases, or the agent's own time


def summary_stats(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    return {"median": round(statistics.median(values), 2), "min": round(min(values), 2),
            "max": round(max(values), 2), "n": len(values)}


class MemorySampler:
    """Peak summed memory of the containers of runs started after `since` (podman stats), in a thread."""

    def __init__(self, since: str, interval: float = 5.0) -> None:
        self.since, self.interval = since, interval
        self.peak_mib = 0.0
        self.peak_containers = 0
        self.loads: list[float] = []
        """1-minute load average at each sample: how busy the machine was (figures on a loaded one mean less)."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._env = ansible_env()

    def __enter__(self) -> MemorySampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)

    def _podman(self, *args: str) -> str:
        proc = subprocess.run(["podman", *args], capture_output=True, text=True, env=self._env, timeout=60,
                              check=False)
        return proc.stdout if proc.returncode == 0 else ""

    def _bytes(self, text: str) -> float:
        text = text.strip().lower()
        num = "".join(ch for ch in text if ch.isdigit() or ch == ".")
        unit = text[len(num):].strip()
        return float(num or 0) * UNITS.get(unit, 1)

    def sample(self) -> None:
        self.loads.append(os.getloadavg()[0])
        rows = json.loads(self._podman("ps", "--filter", "label=opsbench.run", "--format", "json") or "[]")
        names = [r["Names"][0] for r in rows if (r.get("Labels") or {}).get("opsbench.run", "") >= self.since
                 and r.get("State") == "running"]
        if not names:
            return
        stats = json.loads(self._podman("stats", "--no-stream", "--format", "json", *names) or "[]")
        total = sum(self._bytes(str(s.get("mem_usage", "0")).split("/")[0]) for s in stats)
        if total / 1024**2 > self.peak_mib:
            self.peak_mib, self.peak_containers = round(total / 1024**2, 1), len(names)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.sample()
            except (ValueError, OSError, subprocess.SubprocessError):
                continue  # a container that went away mid-sample: the next sample counts


def phase_times(records: list[Any]) -> tuple[dict[str, list[float]], list[float], list[float]]:
    """Per-phase seconds over the campaign's runs; per-trial lifecycle without the agent; hosts' deploy+teardown."""
    phases: dict[str, list[float]] = {p: [] for p in PHASES}
    per_trial: list[float] = []
    hosts: dict[str, float] = {}
    for rec in records:
        if not rec.run_id:
            continue
        row = store.get_run(rec.run_id)
        if not row:
            continue
        results = json.loads((Path(row["run_dir"]) / "run.json").read_text())["results"]
        for step, res in results.items():
            if step in phases and isinstance(res.get("elapsed"), (int, float)):
                phases[step].append(float(res["elapsed"]))
        if "manifestation" in results and (alert := check_wait(results["manifestation"])) is not None:
            phases["time_to_alert"].append(alert)
        if "recovery" in results and (recover := check_wait(results["recovery"])) is not None:
            phases["time_to_recover"].append(recover)
        per_trial.append(_lifecycle_s(results))
        if rec.host and rec.host not in hosts:
            host = json.loads((paths.runs_dir() / rec.host / "run.json").read_text())["results"]
            cost = 0.0
            for step in ("deploy", "teardown"):
                if isinstance(host.get(step, {}).get("elapsed"), (int, float)):
                    phases[step].append(float(host[step]["elapsed"]))
                    cost += float(host[step]["elapsed"])
            hosts[rec.host] = cost
    return phases, per_trial, list(hosts.values())


def lifecycle_by_scenario(records: list[Any]) -> dict[str, dict[str, float] | None]:
    """Per scenario, the stats of its trials' lifecycle without the agent (`_lifecycle_s`)."""
    by: dict[str, list[float]] = {}
    for rec in records:
        row = store.get_run(rec.run_id) if rec.run_id else None
        if row:
            results = json.loads((Path(row["run_dir"]) / "run.json").read_text())["results"]
            by.setdefault(rec.scenario, []).append(_lifecycle_s(results))
    return {scenario: summary_stats(values) for scenario, values in sorted(by.items())}


def _lifecycle_s(results: dict[str, Any]) -> float:
    """A trial's lifecycle without its agent: first step's start to last step's end, less the agent's time (steps
    of one trial overlap, see `Run.execute_trial`, so their times do not add up); the sum of the steps' times for a
    record without start and end times."""
    timed = [r for r in results.values() if isinstance(r.get("started_at"), (int, float))
             and isinstance(r.get("ended_at"), (int, float))]
    if timed and len(timed) == len(results):
        agent = float(results.get("agent", {}).get("elapsed") or 0.0)
        return round(float(max(r["ended_at"] for r in timed)) - float(min(r["started_at"] for r in timed)) - agent, 3)
    return sum(float(r["elapsed"]) for step, r in results.items()
               if step not in NOT_LIFECYCLE and isinstance(r.get("elapsed"), (int, float)))


def step_split(records: list[Any]) -> dict[str, dict[str, float]]:
    """Per playbook phase, the medians of where its time went (runner.StepResult.timing: startup, work, exit)."""
    import statistics

    split: dict[str, dict[str, list[float]]] = {}
    for rec in records:
        row = store.get_run(rec.run_id) if rec.run_id else None
        if not row:
            continue
        results = json.loads((Path(row["run_dir"]) / "run.json").read_text())["results"]
        for step, res in results.items():
            for part, seconds in (res.get("timing") or {}).items():
                split.setdefault(step, {}).setdefault(part, []).append(float(seconds))
    return {step: {part: round(statistics.median(v), 2) for part, v in parts.items()}
            for step, parts in split.items()}


DEFAULT_SCENARIOS = ("loopweb-web-down", "shop-cart-down")
"""What `opsbench bench` measures when given no scenarios: one small and one full application."""


def parse_levels(levels: str) -> list[int]:
    """``--parallel`` text (comma-separated environments-at-once levels, 1 to 8) as sorted distinct levels."""
    try:
        ks = sorted({int(k) for k in levels.split(",") if k.strip()})
    except ValueError:
        raise OpsBenchError(f"--parallel {levels!r}: comma-separated integers, e.g. 1,2") from None
    if not ks or any(not 1 <= k <= 8 for k in ks):
        raise OpsBenchError(f"--parallel {levels!r}: levels from 1 to 8")
    return ks


def bench(scenarios: list[Scenario], trials: int, levels: list[int], overhead_repeats: int, progress: Progress,
          echo: Callable[[str], None] = lambda text: None) -> dict[str, Any]:
    """Run the measurements (see module docstring) and return the report."""
    from orchestrator.harness.bench import measure_overhead

    report: dict[str, Any] = {"scenarios": [s.id for s in scenarios], "trials": trials, "agent": NOOP_AGENT,
                              "levels": {}}
    for k in levels:
        name = f"bench-{new_run_id()}-k{k}"
        echo(f"K={k}: campaign {name}")
        since = new_run_id()[:15]
        start = time.monotonic()
        with MemorySampler(since) as memory:
            records = run_campaign(Campaign(name), scenarios, [NOOP_AGENT], trials, k, progress, purpose="bench")
        wall = time.monotonic() - start
        phases, per_trial, host_costs = phase_times(records)
        done = [r for r in records if r.status in ("completed", "invalid")]
        amortized = [t + sum(host_costs) / len(per_trial) for t in per_trial] if per_trial else []
        report["levels"][str(k)] = {
            "campaign": name, "wall_s": round(wall, 1), "trials": len(records), "finished": len(done),
            "statuses": sorted({r.status for r in records}),
            "runs_per_hour": round(len(done) / (wall / 3600), 1) if wall > 0 else None,
            "phases_s": {p: summary_stats(v) for p, v in phases.items()},
            "phases_split_s": step_split(records),
            "trial_lifecycle_without_agent_s": summary_stats(per_trial),
            "trial_lifecycle_with_deploy_share_s": summary_stats(amortized),
            "trial_lifecycle_by_scenario_s": lifecycle_by_scenario(records),
            "peak_memory_mib": memory.peak_mib, "peak_containers": memory.peak_containers,
            "load_1m": summary_stats(memory.loads), "cores": os.cpu_count(),
        }
    echo(f"orchestrator overhead: {overhead_repeats} interleaved repeats of one step each way")
    report["overhead"] = measure_overhead(overhead_repeats, echo)
    return report


def render(report: dict[str, Any]) -> str:
    lines = [f"scenarios: {', '.join(report['scenarios'])}; {report['trials']} trial(s) each; agent "
             f"`{report['agent']}` (no-op)"]
    for k, level in report["levels"].items():
        lines.append(f"\nK={k}: {level['finished']}/{level['trials']} trials in {level['wall_s']} s -> "
                     f"{level['runs_per_hour']} runs/hour; peak memory {level['peak_memory_mib']} MiB "
                     f"({level['peak_containers']} containers)")
        if level.get("load_1m"):
            lines.append(f"  machine: {level['cores']} cores, 1-min load average median {level['load_1m']['median']}"
                         f" (max {level['load_1m']['max']})")
        lines.append(f"  {'PHASE':<18} {'MEDIAN s':>9} {'MIN s':>8} {'MAX s':>8} {'N':>4}")
        for phase in sorted(level["phases_s"], key=lambda p: PHASES.index(p) if p in PHASES else len(PHASES)):
            if s := level["phases_s"][phase]:
                lines.append(f"  {phase:<18} {s['median']:>9} {s['min']:>8} {s['max']:>8} {s['n']:>4}")
        if level.get("phases_split_s"):
            lines.append("  where each playbook's time went (medians, s): start-up (process, imports, inventory, "
                         "playbook) / work (tasks) / exit")
            for phase, split in level["phases_split_s"].items():
                lines.append(f"    {phase:<16} {split.get('startup', '-')} / {split.get('work', '-')} / "
                             f"{split.get('exit', '-')}")
        for key, label in (("trial_lifecycle_without_agent_s", "trial, no agent"),
                           ("trial_lifecycle_with_deploy_share_s", "+ deploy share")):
            s = level[key]
            if s:
                lines.append(f"  {label:<18} {s['median']:>9} {s['min']:>8} {s['max']:>8} {s['n']:>4}")
        for scenario, s in (level.get("trial_lifecycle_by_scenario_s") or {}).items():
            if s:
                lines.append(f"    {scenario:<16} {s['median']:>9} {s['min']:>8} {s['max']:>8} {s['n']:>4}")
    o = report["overhead"]
    lines.append(f"\norchestrator / bare ansible-playbook ({o['step']}, {o['repeats']} repeats): "
                 f"{o['ratio_median']} (median), {o['ratio_mean']} (mean)")
    return "\n".join(lines)
