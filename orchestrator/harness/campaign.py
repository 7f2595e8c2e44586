"""``opsbench campaign``: scenarios x agents x trials, on shared environments, resumable.

Scenarios that share an environment (same application and arguments, see `verify.environment_key`) share one
deployment, the *host*: it is deployed once, every trial on it is a run of its own (`Run.trial_on`: faults
injected, the agent run, evaluated, faults removed, recovery and leftover checks), and it is torn down at the
end. After a trial whose recovery or leftover check failed the host is redeployed before the next one; a
scenario whose spec says ``environment.reuse: false`` gets a fresh environment per trial. Up to ``parallel``
hosts run at once. Each finished trial is appended to ``<state dir>/campaigns/<name>/trials.jsonl``; running
the same campaign again skips the trials recorded there as completed or invalid and redoes the rest.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from orchestrator import paths
from orchestrator.catalog import find_scenario
from orchestrator.errors import OpsBenchError
from orchestrator.harness.verify import environment_key, tagged_progress
from orchestrator.interrupts import Interrupts
from orchestrator.lifecycle import Run
from orchestrator.progress import Progress
from orchestrator.results import DECIDERS
from orchestrator.spec import Scenario
from orchestrator.trials import agent_trial, trial_on

FINAL = ("completed", "invalid")
"""Trial statuses a resumed campaign does not redo (an invalid trial is a scenario defect, not bad luck)."""


@dataclass(frozen=True)
class Cell:
    """One trial to run: which scenario, which agent, which repeat."""

    scenario: str
    agent: str
    trial: int

    @property
    def key(self) -> str:
        return f"{self.scenario}|{self.agent}|{self.trial}"


@dataclass
class TrialRecord:
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
    snapshot_id: str = ""
    """Set for a replay trial (`campaign --snapshots`): its cell is the snapshot, not the scenario."""

    @property
    def key(self) -> str:
        if self.snapshot_id:
            return f"{self.snapshot_id}|{self.agent}|{self.trial}"
        return Cell(self.scenario, self.agent, self.trial).key


def plan(scenarios: Iterable[Scenario], agents: Iterable[str], trials: int) -> list[Cell]:
    """Every cell of the matrix, scenario-major (trials of one scenario next to each other)."""
    return [Cell(s.id, a, t) for s in scenarios for a in agents for t in range(1, trials + 1)]


def passed(summary: dict[str, Any]) -> bool | None:
    """The run's pass/fail by the scenario's deciding score (as the results use it); None when unscored."""
    evaluations = summary.get("evaluations") or {}
    for evaluator, key in DECIDERS:
        value = (evaluations.get(evaluator) or {}).get(key)
        if isinstance(value, (int, float)):
            return bool(value >= 1.0)
    return None


class Campaign:
    """A named campaign's record of finished trials (see module docstring)."""

    def __init__(self, name: str) -> None:
        if not name or "/" in name or name.startswith("."):
            raise OpsBenchError(f"campaign name {name!r}: use letters, digits, '-' or '_'")
        self.name = name
        self.dir = paths.state_dir() / "campaigns" / name
        self.dir.mkdir(parents=True, exist_ok=True)
        self.file = self.dir / "trials.jsonl"
        self._lock = threading.Lock()

    def records(self) -> list[TrialRecord]:
        if not self.file.is_file():
            return []
        out = []
        for line in self.file.read_text().splitlines():
            try:
                out.append(TrialRecord(**json.loads(line)))
            except (ValueError, TypeError):
                continue  # a line cut short by a killed process: that trial is redone
        return out

    def finished(self) -> set[str]:
        return {r.key for r in self.records() if r.status in FINAL}

    def append(self, record: TrialRecord) -> None:
        with self._lock, self.file.open("a") as fh:
            fh.write(json.dumps(asdict(record), sort_keys=True) + "\n")


def host_chunks(todo: list[Cell], scenarios: dict[str, Scenario], parallel: int) -> list[list[Cell]]:
    """Cells grouped by shared environment and split across up to `parallel` hosts; a scenario that may not
    share (environment.reuse false) gets one host per cell."""
    groups: dict[str, list[Cell]] = {}
    alone: list[list[Cell]] = []
    for cell in todo:
        scn = scenarios[cell.scenario]
        if scn.environment.get("reuse", True):
            groups.setdefault(environment_key(scn), []).append(cell)
        else:
            alone.append([cell])
    chunks: list[list[Cell]] = []
    for cells in groups.values():
        by_scenario: dict[str, list[Cell]] = {}
        for cell in cells:
            by_scenario.setdefault(cell.scenario, []).append(cell)
        k = max(1, min(parallel, len(by_scenario)))
        # Whole scenarios per host: their trials run back to back on one environment.
        buckets: list[list[Cell]] = [[] for _ in range(k)]
        for i, scenario_cells in enumerate(by_scenario.values()):
            buckets[i % k].extend(scenario_cells)
        chunks += [b for b in buckets if b]
    return chunks + alone


class Eta:
    """Overall progress: trials done of total, and an estimate from the mean trial time so far (trials run
    `parallel` at a time)."""

    def __init__(self, total: int, parallel: int) -> None:
        self.total, self.parallel, self.done = total, max(1, parallel), 0
        self.durations: list[float] = []
        self.started = time.monotonic()
        self._lock = threading.Lock()

    def tick(self, seconds: float) -> str:
        with self._lock:
            self.done += 1
            self.durations.append(seconds)
            mean = sum(self.durations) / len(self.durations)
            left = mean * (self.total - self.done) / self.parallel
            spent = time.monotonic() - self.started
            return f"{self.done}/{self.total} trials, {spent / 60:.1f} min so far, about {left / 60:.1f} min left"


def _run_host(cells: list[Cell], scenarios: dict[str, Scenario], campaign: Campaign, progress: Progress,
              interrupts: Interrupts, eta: Eta, record: Callable[[TrialRecord], None], tool_profile: str,
              purpose: str = "agent") -> None:
    """Deploy one environment, run `cells` on it (redeploying after a trial that left it dirty), tear it down."""
    host: Run | None = None
    healthy = False
    since: float | None = None  # when the environment was last proved back at baseline after a trial
    try:
        for cell in cells:
            if interrupts.set:
                return
            scn = scenarios[cell.scenario]
            if host is None:
                host = Run.create(scn, agent=None, keep=False, progress=progress, purpose=purpose)
                host.interrupts = interrupts
                host.state["status"] = "hosting"
                progress.message(f"environment {host.id} ({scn.environment['application']}) for "
                                 f"{len(cells)} trial(s)")
                deploy = host.step("deploy", 1, 1)
                healthy = False
                since = None
                if deploy.status != "successful":
                    reason = f"deploy {deploy.status}: {'; '.join(deploy.failures)[:300]}"
                    for rest in cells[cells.index(cell):]:
                        record(TrialRecord(rest.scenario, rest.agent, rest.trial, "", "error", None, 0.0,
                                           reason, host.id))
                    return
            progress.message(f"{cell.scenario} / {cell.agent or 'baseline agent'} / trial {cell.trial}")
            start = time.monotonic()
            trial = trial_on(host, scn, cell.agent, tool_profile, visible_since=since, purpose=purpose)
            summary = agent_trial(trial, healthy)
            since = time.time()
            clean = summary.get("recovered") is not False and not summary.get("leftovers") \
                and summary.get("cleanup") == "done"
            elapsed = round(time.monotonic() - start, 1)
            record(TrialRecord(cell.scenario, cell.agent, cell.trial, trial.id, summary["status"],
                               passed(summary), elapsed, summary.get("reason", ""), host.id,
                               summary.get("evaluations") or {}))
            progress.message(eta.tick(elapsed))
            # A clean trial proved the baseline again (recovery checks + no leftovers): skip the next baseline
            # when its checks are the same; a dirty one gets a fresh environment.
            healthy = clean and summary.get("recovered") is True
            if not clean or not scn.environment.get("reuse", True):
                progress.message(f"environment {host.id} is not back at baseline: redeploying")
                close_host(host)
                host = None
    finally:
        if host is not None:
            close_host(host)


def close_host(host: Run) -> None:
    """End a shared host: mark it hosted (no agent ran on it) and tear it down with the usual clean-up."""
    host.state["status"] = "hosted"
    host.cleanup()


def run_campaign(campaign: Campaign, scenarios: list[Scenario], agents: list[str], trials: int, parallel: int,
                 progress: Progress, on_record: Callable[[TrialRecord], None] = lambda r: None,
                 tool_profile: str = "full", purpose: str = "agent") -> list[TrialRecord]:
    """Run every cell not already finished in `campaign`; returns the records made by this call. `purpose`
    tags its runs (store.PURPOSES): ``agent`` for agents being measured, ``bench`` for the harness's own."""
    by_id = {s.id: s for s in scenarios}
    cells = plan(scenarios, agents, trials)
    finished = campaign.finished()
    todo = [c for c in cells if c.key not in finished]
    if len(todo) < len(cells):
        progress.message(f"resuming: {len(cells) - len(todo)} of {len(cells)} trial(s) already finished")
    made: list[TrialRecord] = []
    lock = threading.Lock()
    eta = Eta(len(todo), parallel)

    def record(rec: TrialRecord) -> None:
        campaign.append(rec)
        with lock:
            made.append(rec)
            on_record(rec)

    chunks = host_chunks(todo, by_id, parallel)
    with Interrupts(progress.message) as interrupts:
        if parallel <= 1 or len(chunks) <= 1:
            for chunk in chunks:
                if interrupts.set:
                    break
                _run_host(chunk, by_id, campaign, progress, interrupts, eta, record, tool_profile, purpose)
        else:
            with ThreadPoolExecutor(max_workers=parallel) as pool:
                futures = [pool.submit(_run_host, chunk, by_id, campaign, tagged_progress(progress, f"env{i + 1}"),
                                       interrupts, eta, record, tool_profile, purpose)
                           for i, chunk in enumerate(chunks)]
                while not all(f.done() for f in futures):
                    wait(futures, timeout=0.5, return_when=FIRST_EXCEPTION)
                for f in futures:
                    f.result()
    return made


def load_campaign_file(path: Path) -> dict[str, Any]:
    """A campaign file: ``name``, ``scenarios`` (ids), ``agents`` (commands; default the heuristic agent),
    ``trials`` (default 1), ``parallel`` (default 1). Errors name the file and the field."""
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise OpsBenchError(f"{path}: cannot read the campaign file: {exc}") from None
    if not isinstance(data, dict):
        raise OpsBenchError(f"{path}: a campaign file is a mapping with name, scenarios, agents, trials, parallel")
    unknown = sorted(set(data) - {"name", "scenarios", "agents", "trials", "parallel", "tool_profile"})
    if unknown:
        raise OpsBenchError(f"{path}: unknown field(s) {', '.join(unknown)}")
    if not isinstance(data.get("scenarios"), list) or not data["scenarios"] \
            or not all(isinstance(s, str) for s in data["scenarios"]):
        raise OpsBenchError(f"{path}: scenarios: a non-empty list of scenario ids")
    agents = data.get("agents", [""])  # not given: "", each scenario's domain baseline
    if "agents" in data and (not isinstance(agents, list) or not agents
                             or not all(isinstance(a, str) and a.strip() for a in agents)):
        raise OpsBenchError(f"{path}: agents: a non-empty list of agent commands")
    for key in ("trials", "parallel"):
        value = data.get(key, 1)
        if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= 100:
            raise OpsBenchError(f"{path}: {key}: an integer from 1 to 100, not {value!r}")
    return {"name": str(data.get("name") or path.stem), "scenarios": data["scenarios"], "agents": agents,
            "trials": data.get("trials", 1), "parallel": data.get("parallel", 1),
            "tool_profile": str(data.get("tool_profile", "full"))}


def resolve(ids: Iterable[str]) -> list[Scenario]:
    return [find_scenario(i) for i in ids]


def summarize(records: list[TrialRecord]) -> list[dict[str, Any]]:
    """Per (scenario, agent): trials, passed, pass rate, median trial time, statuses."""
    groups: dict[tuple[str, str], list[TrialRecord]] = {}
    for r in records:
        groups.setdefault((r.scenario, r.agent), []).append(r)
    rows = []
    for (scenario, agent), recs in sorted(groups.items()):
        scored = [r for r in recs if r.passed is not None]
        times = sorted(r.elapsed for r in recs)
        rows.append({"scenario": scenario, "agent": agent, "trials": len(recs),
                     "passed": sum(1 for r in scored if r.passed),
                     "pass_rate": round(sum(1 for r in scored if r.passed) / len(scored), 3) if scored else None,
                     "median_s": times[len(times) // 2] if times else None,
                     "statuses": sorted({r.status for r in recs})})
    return rows


@dataclass(frozen=True)
class CampaignRequest:
    """What to run, from the command line's arguments over a campaign file's fields over the defaults."""

    name: str
    scenarios: list[Scenario]
    agents: list[str]
    trials: int
    parallel: int
    tool_profile: str


def request(scenario_ids: Iterable[str], campaign_file: Path | None = None, name: str | None = None,
            agents: Iterable[str] = (), trials: int | None = None, parallel: int | None = None,
            tool_profile: str | None = None) -> CampaignRequest:
    """Merge the options with the campaign file (options win) and resolve the scenarios (validated)."""
    conf: dict[str, Any] = load_campaign_file(campaign_file) if campaign_file else {}
    ids = list(scenario_ids) or conf.get("scenarios") or []
    if not ids:
        raise OpsBenchError("no scenarios: give scenario ids or --file (see `opsbench list`)")
    chosen = resolve(ids)
    return CampaignRequest(name=name or conf.get("name") or "default", scenarios=chosen,
                           agents=list(agents) or conf.get("agents") or [""],  # "": each scenario's domain baseline
                           trials=trials or conf.get("trials", 1), parallel=parallel or conf.get("parallel", 1),
                           tool_profile=tool_profile or conf.get("tool_profile", "full"))


def outcome(campaign: Campaign, req: CampaignRequest) -> tuple[list[dict[str, Any]], int, int]:
    """The requested matrix's latest records summarized per (scenario, agent), the number of trials wanted and
    how many of them are unfinished (neither completed nor invalid)."""
    wanted = {(s.id, a, t) for s in req.scenarios for a in req.agents for t in range(1, req.trials + 1)}
    latest = {r.key: r for r in campaign.records() if (r.scenario, r.agent, r.trial) in wanted}
    rows = summarize(list(latest.values()))
    missing = len(wanted) - sum(1 for r in latest.values() if r.status in ("completed", "invalid"))
    return rows, len(wanted), missing


def describe_record(r: TrialRecord) -> str:
    """One finished trial as a progress line."""
    return (f"  {r.scenario} #{r.trial}: {r.status}"
            + ("" if r.passed is None else " pass" if r.passed else " fail")
            + f" in {r.elapsed}s" + (f" ({r.reason[:200]})" if r.reason else ""))


def render_outcome(rows: list[dict[str, Any]], wanted: int, missing: int) -> str:
    """The per-scenario table and how many trials finished (with how to resume the others)."""
    lines = [f"{'SCENARIO':<44} {'TRIALS':>6} {'PASSED':>6} {'MEDIAN s':>8}  STATUSES"]
    for r in rows:
        lines.append(f"{r['scenario']:<44} {r['trials']:>6} {r['passed']:>6} {r['median_s'] or '-':>8}  "
                     f"{','.join(r['statuses'])}")
    lines.append(finished_line(wanted, missing))
    return "\n".join(lines)


def finished_line(wanted: int, missing: int, kind: str = "trial(s)") -> str:
    """How many trials finished, and how to resume the rest (a campaign's record makes the same command resume)."""
    return f"{wanted - missing}/{wanted} {kind} finished" + (
        f"; run the same command again to resume the other {missing}" if missing else "")
