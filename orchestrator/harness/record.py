"""Record live incidents as snapshots: the library behind `opsbench snapshot record`.

A recording is a live trial cut at handover: baseline -> inject -> manifestation -> handover, then the `snapshot`
step (playbooks/snapshot_record.yml, one ansible-runner invocation like every step), then revoke -> remove ->
recovery and the leftover check exactly as a campaign trial does (`trials.recording_trial`, the lifecycle's own undo
machinery: Ctrl-C, a failed step or `opsbench cleanup` after a SIGKILL end the same way as for any run).
Scenarios of one environment share one deployment, as `verify-scenarios` and campaigns do: the host is deployed
once, each recording is a run of its own on it (`trials.trial_on`, purpose `record`, left out of results), and it is
torn down at the end. A trial that leaves the host dirty gets the rest a fresh host.

The evidence window runs from when the trial's evidence starts (the previous trial's recovery on a shared host,
else the host's deploy) to handover, the frozen now, and is capped at `DEFAULT_WINDOW_CAP_S` (a setting,
`--window-cap`). The snapshot is written to a hidden staging directory and renamed to `<out>/<snapshot id>` only
once the step succeeded, so an interrupted or failed recording leaves no half snapshot in the corpus.
"""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from orchestrator import store
from orchestrator.catalog import checked, find_scenario
from orchestrator.errors import OpsBenchError
from orchestrator.harness.campaign import close_host
from orchestrator.harness.verify import environment_key, tagged_progress
from orchestrator.interrupts import Interrupts
from orchestrator.lifecycle import Run
from orchestrator.progress import Progress
from orchestrator.spec import Scenario, load_scenario, spec_files
from orchestrator.trials import RECORD_FORWARD, recording_trial, trial_on

RECORD = "record"
"""The purpose (store.PURPOSES) of recording runs: the harness's own, never counted as agent results."""
SNAPSHOT_STEP = "snapshot"
REPLAYABLE_KINDS = frozenset({"diagnose"})
"""Task kinds a frozen incident can pose: they read evidence. Mitigation changes the world; CISO assessments read
evidence the snapshot does not capture (host files, cluster state)."""
BILLING_KINDS = frozenset({"analyze"})
"""Task kinds a frozen FinOps data environment can pose too: analyses of the billing table, which a snapshot holds."""
BILLING_APPLICATIONS = frozenset({"finops_data"})
"""Environments whose evidence is the billing table (roles/env_finops_data): the `billing` family of a snapshot."""
REPLAYABLE_BILLING_STORES = frozenset({"duckdb"})
REPLAYABLE_BACKENDS = frozenset({"local"})
LIVE_ONLY_APPLICATIONS = frozenset({"workspace"})
DEFAULT_WINDOW_CAP_S = 1800.0
"""At most 30 minutes of evidence before handover: what an agent can usefully read, and it bounds the size."""
STAGING_PREFIX = ".recording-"


def replayable_templates() -> tuple[str, ...]:
    """Every template of the catalog whose instances can be frozen (`--all-templates`)."""
    from orchestrator.catalog import find_scenario, template_ids

    return tuple(t for t in template_ids() if not not_replayable(find_scenario(t)))


def not_replayable(scn: Scenario) -> str | None:
    """Why `scn` cannot be recorded for replay, or None when it can."""
    if scn.backend not in REPLAYABLE_BACKENDS:
        return f"runs on the {scn.backend} backend; recording needs the local backend (its Prometheus and telemetry)"
    if scn.data["environment"]["application"] in LIVE_ONLY_APPLICATIONS:
        return ("runs in a DevOps workspace: its evidence is what a terminal finds in a live container (processes, "
                "builds), which a snapshot does not freeze")
    application = scn.data["environment"]["application"]
    replayable = REPLAYABLE_KINDS | (BILLING_KINDS if application in BILLING_APPLICATIONS else frozenset())
    store = str((scn.data["environment"].get("args") or {}).get("store") or "duckdb")
    if application in BILLING_APPLICATIONS and store not in REPLAYABLE_BILLING_STORES:
        return (f"keeps its billing data in {store}: a replay serves the recorded table with DuckDB, whose answers "
                f"(column names, types) differ from {store}'s")
    kinds = sorted({t["kind"] for t in scn.data["tasks"]} - replayable)
    if kinds:
        return (f"has {', '.join(kinds)} task(s): a frozen incident can only pose "
                f"{', '.join(sorted(REPLAYABLE_KINDS))} tasks (mitigation and DevOps work need the live world)")
    return None


def replayable_scenarios() -> list[Scenario]:
    """Every scenario `record --all` records: diagnosis-only scenarios of the local backend and the FinOps data
    analyses (DuckDB store), validated."""
    return [checked(s) for s in map(load_scenario, spec_files()) if not_replayable(s) is None]


def choose(ids: tuple[str, ...] | list[str], every: bool) -> list[Scenario]:
    """The scenarios to record: `ids`, or every replayable one; a scenario that cannot be replayed is an error."""
    if every and ids:
        raise OpsBenchError("give scenario ids or --all, not both")
    if every:
        return replayable_scenarios()
    if not ids:
        raise OpsBenchError("no scenarios: give scenario ids or --all (see `opsbench list`)")
    chosen = [find_scenario(i) for i in ids]
    for scn in chosen:
        why = not_replayable(scn)
        if why:
            raise OpsBenchError(f"scenario {scn.id} cannot be recorded as a snapshot: it {why}")
    return chosen


@dataclass
class Recording:
    """One recording's outcome: the snapshot made (or why none was) and where the time went."""

    scenario: str
    repeat: int
    status: str  # recorded | invalid | error | timeout | interrupted | not-injected (no environment fit for it)
    reason: str = ""
    snapshot_id: str = ""
    path: str = ""
    bytes: int = 0
    files: int = 0
    families: list[str] = field(default_factory=list)
    window: list[float] = field(default_factory=list)
    run_id: str = ""
    host: str = ""
    seconds: dict[str, float] = field(default_factory=dict)
    recovered: bool | None = None
    """The recovery checks after the removal passed (None: they did not run)."""
    leftovers: list[str] = field(default_factory=list)
    """What the leftover check found after the removal."""

    @property
    def ok(self) -> bool:
        return self.status == "recorded"

    @property
    def clean(self) -> bool:
        """Recorded, and the environment came back: removal and recovery passed, nothing left over. Such a
        recording is also verify-scenarios' proof that the incident manifests and recovers."""
        return self.ok and not self.reason and self.recovered is True and not self.leftovers


def evidence_window(frozen_now: float, floor: float, cap_s: float) -> tuple[float, float]:
    """(start, end) of the evidence window: from `floor` (when the trial's evidence starts) to the frozen now,
    never longer than `cap_s`."""
    start = max(min(floor, frozen_now), frozen_now - cap_s)
    return round(start, 3), round(frozen_now, 3)


def _snapshot_step(trial: Run, out: Path, staging: Path, index: int, total: int, floor: float,
                   cap_s: float) -> None:
    """The snapshot step at handover: the evidence window's vars for playbooks/snapshot_record.yml, the step, and the
    staging directory renamed into the corpus once it succeeded."""
    if trial.interrupted():
        trial.state["status"], trial.state["reason"] = "interrupted", f"interrupted before {SNAPSHOT_STEP}"
        return
    frozen_now = float(trial.state["results"]["handover"]["ended_at"])
    start, end = evidence_window(frozen_now, floor, cap_s)
    shutil.rmtree(staging, ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    trial.state["vars"]["steps"] = {SNAPSHOT_STEP: {
        "opsbench_snapshot_out": str(staging), "opsbench_scenario_id": trial.state["scenario_id"],
        "opsbench_spec_version": int(trial.state["spec_version"]), "opsbench_frozen_now": end,
        "opsbench_window_start": start,
        **({"opsbench_visible_since": trial.state["visible_since"]}
           if trial.state.get("visible_since") is not None else {}),
    }}
    result = trial.step(SNAPSHOT_STEP, index, total)
    made = result.stats.get("snapshot") if result.ok else None
    if not isinstance(made, dict) or not made.get("snapshot_id"):
        why = "; ".join(result.failures)[:1000] or f"the step reported no snapshot ({result.status})"
        trial.state["status"] = "interrupted" if result.status == "canceled" else "error"
        trial.state["reason"] = f"step {SNAPSHOT_STEP} {result.status}: {why}"
        return
    target = out / str(made["snapshot_id"])
    staging.rename(target)
    trial.state["snapshot"] = {**made, "path": str(target), "window": [start, end]}
    trial.save()


def execute_recording(trial: Run, out: Path, *, healthy: bool, floor: float, cap_s: float = DEFAULT_WINDOW_CAP_S,
                      live_trial: bool = False) -> dict[str, Any]:
    """A recording trial (`trials.recording_trial`) whose snapshot is written to a staging directory of `out` and
    renamed into it only once complete; the summary carries `snapshot`."""
    staging = Path(out) / f"{STAGING_PREFIX}{trial.id}"
    try:
        return recording_trial(
            trial, lambda index, total: _snapshot_step(trial, Path(out), staging, index, total, floor, cap_s),
            healthy=healthy, live_trial=live_trial)
    finally:
        shutil.rmtree(staging, ignore_errors=True)  # a recording cut short: never half a snapshot


def _recording(scn: Scenario, repeat: int, trial: Run, summary: dict[str, Any], host: Run,
               deploy_s: float | None, wall_s: float) -> Recording:
    phases = trial.state["results"]
    secs = {k: float(v.get("elapsed") or 0.0) for k, v in phases.items()}
    seconds = {"lifecycle": round(sum(secs.get(s, 0.0) for s in RECORD_FORWARD), 1),
               "snapshot": round(secs.get(SNAPSHOT_STEP, 0.0), 1),
               "cleanup": round(sum(secs.get(s, 0.0) for s in ("revoke", "remove", "recovery", "pristine")), 1),
               "trial": round(wall_s, 1)}
    if deploy_s is not None:
        seconds["deploy"] = round(deploy_s, 1)
    seconds["total"] = round(wall_s + (deploy_s or 0.0), 1)
    made = summary.get("snapshot") or {}
    status = "recorded" if made and summary["status"] == "completed" else summary["status"]
    if status == "completed":
        status = "error"
    if status not in ("recorded", "interrupted") and "inject" not in phases:
        status = "not-injected"  # the environment was not fit (its baseline failed): nothing of the scenario ran
    reason = summary.get("reason", "")
    leftovers = [str(x) for x in summary.get("leftovers") or []]
    if made and summary.get("cleanup") != "done":
        reason = f"recorded, but clean-up failed: {'; '.join(summary.get('cleanup_problems', []))[:300]}"
    elif made and summary.get("recovered") is False:
        failures = phases.get("recovery", {}).get("failures") or []
        reason = f"recorded, but the recovery checks failed: {'; '.join(map(str, failures))[:300]}"
    elif made and leftovers:
        reason = f"recorded, but the removal left: {'; '.join(leftovers)[:300]}"
    return Recording(scn.id, repeat, status, reason, str(made.get("snapshot_id") or ""), str(made.get("path") or ""),
                     int(made.get("bytes") or 0), int(made.get("files") or 0), list(made.get("families") or []),
                     list(made.get("window") or []), trial.id, host.id, seconds, summary.get("recovered"), leftovers)


def _record_on_hosts(cells: list[tuple[Scenario, int]], out: Path, progress: Progress, interrupts: Interrupts,
                     emit: Callable[[Recording], None], cap_s: float, live_trial: bool = False) -> None:
    """Deploy one environment, record every cell on it (a fresh one after a trial that left it dirty), tear down."""
    host: Run | None = None
    healthy, since, deploy_s = False, None, None
    try:
        for scn, repeat in cells:
            if interrupts.set:
                emit(Recording(scn.id, repeat, "interrupted", "interrupted"))
                continue
            if host is None:
                host = Run.create(scn, agent=None, keep=False, progress=progress, purpose=RECORD)
                host.interrupts = interrupts
                host.state["status"] = "hosting"
                progress.message(f"environment {host.id} ({scn.environment['application']}) for recording")
                deploy = host.step("deploy", 1, 1)
                healthy, since, deploy_s = False, None, deploy.elapsed
                if deploy.status != "successful":
                    reason = f"deploy {deploy.status}: {'; '.join(deploy.failures)[:300]}"
                    # Nothing of the scenario ran: its environment did not come up (or the deploy was cut short).
                    emit(Recording(scn.id, repeat, "interrupted" if deploy.status == "canceled" else "not-injected",
                                   reason, host=host.id))
                    close_host(host)
                    host = None
                    continue
            progress.message(f"{scn.id}: recording {repeat}")
            floor = since if since is not None else float(host.state["results"]["deploy"]["started_at"])
            start = time.monotonic()
            trial = trial_on(host, scn, agent=None, visible_since=since, purpose=RECORD)
            summary = execute_recording(trial, out, healthy=healthy, floor=floor, cap_s=cap_s, live_trial=live_trial)
            since = time.time()
            emit(_recording(scn, repeat, trial, summary, host, deploy_s, time.monotonic() - start))
            deploy_s = None
            clean = summary.get("recovered") is not False and not summary.get("leftovers") \
                and summary.get("cleanup") == "done"
            healthy = clean and summary.get("recovered") is True
            if not clean or not scn.environment.get("reuse", True):
                progress.message(f"environment {host.id} is not back at baseline: a fresh one for the rest")
                close_host(host)
                host = None
    finally:
        if host is not None:
            close_host(host)



def remove_stale_staging(out: Path) -> list[Path]:
    """Delete staging directories left in `out` by a killed recorder (its trial's process is gone)."""
    from orchestrator.runs import alive

    removed = []
    for staging in sorted(Path(out).glob(f"{STAGING_PREFIX}*")) if Path(out).is_dir() else []:
        row = store.get_run(staging.name.removeprefix(STAGING_PREFIX))
        if row is None or row["status"] != "running" or not alive(row["pid"]):
            shutil.rmtree(staging, ignore_errors=True)
            removed.append(staging)
    return removed


def record(scenarios: list[Scenario], out: Path, repeats: int, progress: Progress,
           on_recording: Callable[[Recording], None] = lambda r: None,
           cap_s: float = DEFAULT_WINDOW_CAP_S, live_trial: bool = False, parallel: int = 1) -> list[Recording]:
    """Record every scenario `repeats` times into `out`, scenarios of one environment on one shared host.
    `live_trial`: also run, collect and evaluate the baseline agent live on each recording (`record --check`).
    `parallel` K > 1: an environment's recordings are dealt over up to K hosts that record at once (each its own
    deployment and port block, as `verify-scenarios --parallel`)."""
    if cap_s <= 0:
        raise OpsBenchError("the evidence window cap must be positive")
    out = Path(out).resolve()  # the snapshot step's playbook runs in another working directory
    out.mkdir(parents=True, exist_ok=True)
    remove_stale_staging(out)
    groups: dict[str, list[tuple[Scenario, int]]] = {}
    for scn in scenarios:
        groups.setdefault(environment_key(scn), []).extend((scn, r) for r in range(1, repeats + 1))
    chunks = [cells[i::k] for cells in groups.values() for k in [max(1, min(parallel, len(cells)))]
              for i in range(k)]
    made: list[Recording] = []
    lock = threading.Lock()

    def emit(rec: Recording) -> None:
        with lock:
            made.append(rec)
            on_recording(rec)

    with Interrupts(progress.message) as interrupts:
        if parallel <= 1:
            for cells in chunks:
                _record_on_hosts(cells, out, progress, interrupts, emit, cap_s, live_trial)
        else:
            with ThreadPoolExecutor(max_workers=parallel) as pool:
                futures = [pool.submit(_record_on_hosts, cells, out, tagged_progress(progress, f"env{i + 1}"),
                                       interrupts, emit, cap_s, live_trial) for i, cells in enumerate(chunks)]
                while not all(f.done() for f in futures):  # short slices: the main thread handles signals
                    wait(futures, timeout=0.5, return_when=FIRST_EXCEPTION)
                for f in futures:
                    f.result()
    return made


def as_dicts(recordings: list[Recording]) -> list[dict[str, Any]]:
    return [asdict(r) for r in recordings]


def describe(rec: Recording) -> str:
    """One finished recording as a progress line."""
    if rec.ok:
        return (f"  {rec.scenario} #{rec.repeat}: {rec.snapshot_id} ({rec.bytes / 1e6:.1f} MB, "
                f"window {rec.window[1] - rec.window[0]:.0f}s) in {rec.seconds.get('total', 0):.0f}s")
    return f"  {rec.scenario} #{rec.repeat}: {rec.status} ({rec.reason[:300]})"


def render(recordings: list[Recording]) -> str:
    """The table `snapshot record` prints: per recording its snapshot, size and where the time went."""
    head = ("SCENARIO", "#", "STATUS", "SNAPSHOT", "MB", "WINDOW s", "DEPLOY s", "TO HANDOVER s", "SNAPSHOT s",
            "CLEANUP s", "TOTAL s")
    rows = [(r.scenario, str(r.repeat), r.status, r.snapshot_id or "-", f"{r.bytes / 1e6:.1f}" if r.ok else "-",
             f"{r.window[1] - r.window[0]:.0f}" if r.window else "-", f"{r.seconds.get('deploy', 0):.0f}",
             f"{r.seconds.get('lifecycle', 0):.0f}", f"{r.seconds.get('snapshot', 0):.0f}",
             f"{r.seconds.get('cleanup', 0):.0f}", f"{r.seconds.get('total', 0):.0f}") for r in recordings]
    widths = [max(len(x[i]) for x in [head, *rows]) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in [head, *rows]]
    lines += [f"  {r.scenario} #{r.repeat}: {r.reason}" for r in recordings if r.reason]
    ok = sum(r.ok for r in recordings)
    lines.append(f"{ok}/{len(recordings)} recording(s) made")
    return "\n".join(lines)
