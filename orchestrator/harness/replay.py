"""``opsbench replay``: agents on frozen incidents (recorded snapshots) instead of live environments.

Per snapshot, a *host* run deploys roles/env_snapshot once (verify, copy, frozen Prometheus) and N replay trials
run on it, each a run of its own (`Run.replay_trial_on`): handover -> agent -> collect -> evaluate -> revoke, the
same playbooks, gateway, tools and evaluators as live, the gateway reading the snapshot. The host is torn down
after its trials (the frozen Prometheus stops), and after Ctrl-C, a timeout or, following a SIGKILL,
`opsbench cleanup`. With `parallel` K > 1 a snapshot's trials are split over up to K hosts (one gateway per host at
a time: trials on one host share its run directory) and hosts of different snapshots run at once.

Everything that can be refused is refused before anything starts: an unusable snapshot (format.verify), a
scenario whose tasks need the live world (mitigate, fix, write-tests: scored by what the agent changed), no
`prometheus` binary.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.catalog import find_scenario
from orchestrator.corpus.layout import instance_spec, specs_dir
from orchestrator.errors import OpsBenchError
from orchestrator.harness.campaign import passed
from orchestrator.harness.verify import tagged_progress
from orchestrator.interrupts import Interrupts
from orchestrator.progress import Progress
from orchestrator.snapshots import format as fmt
from orchestrator.spec import Scenario
from orchestrator.trials import LIVE_ONLY_KINDS, replay_host, replay_trial, replay_trial_on


@dataclass(frozen=True)
class Target:
    """A verified snapshot and the scenario it replays."""

    info: fmt.SnapshotInfo
    scenario: Scenario


@dataclass
class ReplayRecord:
    snapshot_id: str
    scenario: str
    agent: str
    trial: int
    run_id: str
    status: str
    passed: bool | None
    elapsed: float
    reason: str = ""
    host: str = ""
    scores: dict[str, Any] = field(default_factory=dict)


def live_only_tasks(scn: Scenario) -> list[str]:
    """The scenario's tasks a replay cannot serve, as `id (kind)`."""
    return [f"{t['id']} ({t['kind']})" for t in scn.data["tasks"] if t["kind"] in LIVE_ONLY_KINDS]


def check_replayable(info: fmt.SnapshotInfo, given: Path | None = None) -> Target:
    """The snapshot's scenario, or an OpsBenchError naming the snapshot and why it cannot be replayed. A snapshot
    of a built corpus (`given` lies in one) replays the instance spec the corpus holds beside it; any other, the
    catalog's scenario of its id."""
    spec = instance_spec(given, info.scenario_id) if given is not None else None
    scn = find_scenario(str(spec) if spec else info.scenario_id)
    refused = live_only_tasks(scn)
    if refused:
        raise OpsBenchError(f"snapshot {info.path}: scenario {scn.id} has task(s) {', '.join(refused)} that need the "
                            "live world (scored by what the agent changes); a frozen incident cannot be changed. "
                            f"Run it live: `opsbench run {scn.id}`")
    if "metrics" in info.families:
        from orchestrator.snapshots.frozen_prometheus import PrometheusError, prometheus_binary

        try:
            prometheus_binary()
        except PrometheusError as exc:
            raise OpsBenchError(f"snapshot {info.path}: {exc}") from None
    return Target(info, scn)


@contextmanager
def open_snapshots(paths: Sequence[Path]) -> Iterator[list[Target]]:
    """Each path verified and checked (`check_replayable`); an archive (.tar.gz, .tar.xz) is imported into a
    temporary directory that lives as long as the context."""
    from orchestrator.snapshots.archive import import_archive

    with ExitStack() as stack:
        targets = []
        for path in paths:
            specs = specs_dir(path)  # a built corpus's instances are not in the catalog: their specs are beside
            if path.is_file():
                parent = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="opsbench-replay-")))
                info = import_archive(path, parent, specs_dir=specs)
            else:
                info = fmt.verify(path.resolve(), specs_dir=specs)
            targets.append(check_replayable(info, path))
        yield targets


def trial_chunks(trials: int, parallel: int) -> list[list[int]]:
    """Trial numbers 1..trials split over up to `parallel` hosts, consecutive numbers per host."""
    hosts = max(1, min(parallel, trials))
    size, extra = divmod(trials, hosts)
    out, start = [], 1
    for i in range(hosts):
        n = size + (1 if i < extra else 0)
        out.append(list(range(start, start + n)))
        start += n
    return out


def _run_host(target: Target, agent: str | None, numbers: list[int], tool_profile: str, purpose: str,
              progress: Progress, interrupts: Interrupts, record: Callable[[ReplayRecord], None]) -> None:
    """Deploy one frozen environment, run the trials `numbers` on it, tear it down (always)."""
    info, scn = target.info, target.scenario
    host = replay_host(scn, info.path, info.snapshot_id, progress, purpose)
    host.interrupts = interrupts
    host.state["status"] = "hosting"
    try:
        progress.message(f"frozen environment {host.id} for {info.snapshot_id}: {len(numbers)} trial(s)")
        deploy = host.step("deploy", 1, 1)
        if deploy.status != "successful":
            reason = f"deploy {deploy.status}: {'; '.join(deploy.failures)[:500]}"
            for n in numbers:
                record(ReplayRecord(info.snapshot_id, scn.id, agent or host.state["agent"], n, "", "error", None,
                                    0.0, reason, host.id))
            return
        for n in numbers:
            if interrupts.set:
                return
            start = time.monotonic()
            trial = replay_trial_on(host, scn, agent or None, tool_profile)
            summary = replay_trial(trial)
            record(ReplayRecord(info.snapshot_id, scn.id, trial.state["agent"], n, trial.id, summary["status"],
                                passed(summary), round(time.monotonic() - start, 2), summary.get("reason", ""),
                                host.id, summary.get("evaluations") or {}))
    finally:
        host.state["status"] = "hosted"
        host.cleanup()


@dataclass(frozen=True)
class Job:
    """Trials `numbers` of `agent` (None: the scenario's baseline agent) on one frozen environment of `target`."""

    target: Target
    agent: str | None
    numbers: list[int]


def split(numbers: list[int], parallel: int) -> list[list[int]]:
    """`numbers` in up to `parallel` runs of consecutive items (one per frozen environment); none when empty."""
    return [[numbers[i - 1] for i in chunk] for chunk in trial_chunks(len(numbers), parallel)] if numbers else []


def run_jobs(jobs: Sequence[Job], parallel: int, tool_profile: str, purpose: str, progress: Progress,
             interrupts: Interrupts, record: Callable[[Job, ReplayRecord], None]) -> None:
    """Run each job on a frozen environment of its own, up to `parallel` at once; `record` gets every trial."""
    def bound(job: Job) -> Callable[[ReplayRecord], None]:
        return lambda rec: record(job, rec)

    if parallel <= 1 or len(jobs) <= 1:
        for job in jobs:
            if interrupts.set:
                break
            _run_host(job.target, job.agent, job.numbers, tool_profile, purpose, progress, interrupts,
                      bound(job))
        return
    with ThreadPoolExecutor(max_workers=parallel) as pool:
        futures = [pool.submit(_run_host, job.target, job.agent, job.numbers, tool_profile, purpose,
                               tagged_progress(progress, f"env{i + 1}"), interrupts,
                               bound(job))
                   for i, job in enumerate(jobs)]
        while not all(f.done() for f in futures):
            wait(futures, timeout=0.5, return_when=FIRST_EXCEPTION)
        for f in futures:
            f.result()


def replay(paths: Sequence[Path], agent: str | None = None, trials: int = 1, parallel: int = 1,
           tool_profile: str = "full", progress: Progress | None = None, purpose: str = "agent",
           on_record: Callable[[ReplayRecord], None] = lambda r: None) -> list[ReplayRecord]:
    """Replay each snapshot in `paths` `trials` times with `agent` (default: the scenario's baseline agent);
    returns one record per trial, snapshot by snapshot, in trial order. See the module docstring."""
    progress = progress or Progress()
    made: list[ReplayRecord] = []

    def record(rec: ReplayRecord) -> None:
        made.append(rec)
        on_record(rec)

    with open_snapshots(paths) as targets, Interrupts(progress.message) as interrupts:
        jobs = [Job(t, agent, numbers) for t in targets for numbers in trial_chunks(trials, parallel)]
        run_jobs(jobs, parallel, tool_profile, purpose, progress, interrupts, lambda job, rec: record(rec))
    order = {t.info.snapshot_id: i for i, t in enumerate(targets)}
    return sorted(made, key=lambda r: (order.get(r.snapshot_id, 0), r.trial))


def as_dicts(records: Sequence[ReplayRecord]) -> list[dict[str, Any]]:
    return [asdict(r) for r in records]


def render(records: Sequence[ReplayRecord]) -> str:
    """One line per trial: snapshot, trial, run, status, pass, seconds."""
    lines = [f"{'SNAPSHOT':<48} {'TRIAL':>5} {'RUN':<24} {'STATUS':<11} {'PASS':<5} {'SECONDS':>7}"]
    for r in records:
        verdict = "-" if r.passed is None else ("yes" if r.passed else "no")
        lines.append(f"{r.snapshot_id:<48} {r.trial:>5} {r.run_id or '-':<24} {r.status:<11} {verdict:<5} "
                     f"{r.elapsed:>7.1f}" + (f"  {r.reason[:120]}" if r.reason and r.status != "completed" else ""))
    return "\n".join(lines)


@dataclass(frozen=True)
class BaselineReplay:
    """One replay of the scenario's baseline agent on a verified snapshot (`opsbench snapshot verify`)."""

    run_id: str
    status: str
    seconds: float
    scores: dict[str, Any]
    problem: str = ""
    """Empty when the snapshot served a whole trial: it completed and every evaluator scored the agent's output."""

    @property
    def ok(self) -> bool:
        return not self.problem

    def summary(self) -> str:
        """`completed in 7.2 s, diagnosis: fl_pass 1.0` or the problem."""
        if self.problem:
            return self.problem
        from orchestrator.results import DECIDERS  # the deciding score of each evaluator, as results use it

        parts = [f"{name}: {key} {self.scores[name][key]}" for name, key in DECIDERS
                 if isinstance(self.scores.get(name), dict) and key in self.scores[name]]
        return f"{self.status} in {self.seconds:.1f} s" + (f", {', '.join(parts)}" if parts else "")


def replay_baseline(path: Path, progress: Any = None) -> BaselineReplay:
    """Replay the scenario's baseline agent once on the snapshot at `path` (directory or archive; verify it first):
    proof that the snapshot serves a whole trial (its frozen Prometheus starts on the TSDB, the gateway answers
    the agent, the evaluators score). The run is tagged `verify`, so results leave it out."""
    records = replay([Path(path)], None, 1, progress=progress, purpose="verify")
    if not records:
        return BaselineReplay("", "not run", 0.0, {}, "the baseline agent's replay did not run")
    rec = records[0]
    problem = ""
    if rec.status != "completed":
        problem = f"the baseline agent's replay ended {rec.status}" + (f": {rec.reason}" if rec.reason else "")
    else:
        unscored = sorted(name for name, sc in rec.scores.items()
                          if isinstance(sc, dict) and sc.get("status") not in (None, "scored"))
        if unscored or not rec.scores:
            problem = ("the baseline agent's replay was not scored: " + ", ".join(
                f"{n} {rec.scores[n].get('status')}" for n in unscored)) if unscored else \
                "the baseline agent's replay has no scores"
    return BaselineReplay(rec.run_id, rec.status, rec.elapsed, rec.scores, problem)
