"""``opsbench campaign --snapshots DIR``: agents x snapshots x trials over a snapshot corpus, resumable by name.

The live campaign's matrix with snapshots in place of scenarios: every snapshot of DIR (directories and archives,
`bench_replay.corpus_paths`) is verified and checked before anything starts (`replay.open_snapshots`), then each
(snapshot, agent) pair's trials run on up to `parallel` frozen environments (`replay.run_jobs`). Trials are
ordinary replay runs (mode ``replay``, the snapshot id): `results`, `leaderboard` and `report` count them apart
from live ones. Each finished trial is appended to the campaign's record (`Campaign`, with the snapshot id), so
running the same campaign again skips the trials recorded as completed and redoes the rest.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from orchestrator.harness.bench_replay import corpus_paths
from orchestrator.harness.campaign import FINAL, Campaign, TrialRecord, finished_line
from orchestrator.harness.replay import Job, ReplayRecord, open_snapshots, run_jobs, split
from orchestrator.interrupts import Interrupts
from orchestrator.progress import Progress


def replay_key(snapshot_id: str, agent: str, trial: int) -> str:
    """A replay cell's key in the campaign record (`TrialRecord.key` for a record with a snapshot id)."""
    return f"{snapshot_id}|{agent}|{trial}"


def run_replay_campaign(campaign: Campaign, corpus: Path, agents: Sequence[str], trials: int, parallel: int,
                        progress: Progress, on_record: Callable[[TrialRecord], None] = lambda r: None,
                        tool_profile: str = "full") -> tuple[list[str], list[TrialRecord]]:
    """Run every (snapshot, agent, trial) of the corpus not already finished in `campaign`. Agent "" is each
    scenario's baseline agent. Returns the corpus's snapshot ids and the records made by this call."""
    paths = corpus_paths(corpus)
    made: list[TrialRecord] = []
    lock = threading.Lock()

    def record(job: Job, rec: ReplayRecord) -> None:
        trial = TrialRecord(rec.scenario, job.agent or "", rec.trial, rec.run_id, rec.status, rec.passed,
                            rec.elapsed, rec.reason, rec.host, rec.scores, snapshot_id=rec.snapshot_id)
        campaign.append(trial)
        with lock:
            made.append(trial)
            on_record(trial)

    with open_snapshots(paths) as targets, Interrupts(progress.message) as interrupts:
        finished = campaign.finished()
        jobs: list[Job] = []
        total = 0
        for target in targets:
            for agent in agents:
                todo = [n for n in range(1, trials + 1)
                        if replay_key(target.info.snapshot_id, agent, n) not in finished]
                total += trials
                jobs += [Job(target, agent, numbers) for numbers in split(todo, parallel)]
        left = sum(len(j.numbers) for j in jobs)
        if left < total:
            progress.message(f"resuming: {total - left} of {total} trial(s) already finished")
        run_jobs(jobs, parallel, tool_profile, "agent", progress, interrupts, record)
        ids = [t.info.snapshot_id for t in targets]
    return ids, made


def replay_outcome(campaign: Campaign, snapshot_ids: Sequence[str], agents: Sequence[str],
                   trials: int) -> tuple[list[dict[str, Any]], int, int]:
    """Per (snapshot, agent) of the requested matrix: trials, passed, median seconds, statuses; the number of
    trials wanted and how many of them are unfinished."""
    wanted = {replay_key(s, a, t) for s in snapshot_ids for a in agents for t in range(1, trials + 1)}
    latest = {r.key: r for r in campaign.records() if r.snapshot_id and r.key in wanted}
    groups: dict[tuple[str, str], list[TrialRecord]] = {}
    for r in latest.values():
        groups.setdefault((r.snapshot_id, r.agent), []).append(r)
    rows = []
    for (snapshot_id, agent), recs in sorted(groups.items()):
        times = sorted(r.elapsed for r in recs)
        rows.append({"snapshot": snapshot_id, "scenario": recs[0].scenario, "agent": agent, "trials": len(recs),
                     "passed": sum(1 for r in recs if r.passed), "median_s": times[len(times) // 2],
                     "statuses": sorted({r.status for r in recs})})
    missing = len(wanted) - sum(1 for r in latest.values() if r.status in FINAL)
    return rows, len(wanted), missing


def render_replay_outcome(rows: list[dict[str, Any]], wanted: int, missing: int) -> str:
    """The per-snapshot-and-agent table and how many replay trials finished."""
    lines = [f"{'SNAPSHOT':<56} {'AGENT':<20} {'TRIALS':>6} {'PASSED':>6} {'MEDIAN s':>8}  STATUSES"]
    for r in rows:
        lines.append(f"{r['snapshot']:<56} {(r['agent'] or 'baseline')[-20:]:<20} {r['trials']:>6} "
                     f"{r['passed']:>6} {r['median_s']:>8}  {','.join(r['statuses'])}")
    lines.append(finished_line(wanted, missing, "replay trial(s)"))
    return "\n".join(lines)
