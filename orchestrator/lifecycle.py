"""The lifecycle of one run, one ansible-runner invocation per step.

deploy -> baseline -> inject -> manifestation -> handover -> agent -> collect -> evaluate
  -> revoke -> remove -> recovery -> teardown

Undo steps (revoke, remove, teardown) run whenever the step they undo has *started*, whatever
happened after it: a failed step, a step timeout, Ctrl-C/SIGTERM, a crashed agent. run.json is
written before each step, so after a SIGKILL ``opsbench cleanup`` finishes the same undo steps.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from orchestrator import paths, store
from orchestrator.agent import AgentResult, kill_group, run_command_agent
from orchestrator.agent_api import AgentAPI
from orchestrator.argspecs import resolve_role_vars
from orchestrator.evaluation.outputs import SCHEMAS
from orchestrator.runner import EventHandler, StepResult, run_playbook, terminate_playbook
from orchestrator.spec import Scenario, load_scenario

FORWARD = ["deploy", "baseline", "inject", "manifestation", "handover", "agent", "collect", "evaluate"]
CLEANUP = ["revoke", "remove", "recovery", "teardown"]
PLAYBOOKS = {
    "deploy": "deploy.yml", "baseline": "check.yml", "inject": "inject.yml",
    "manifestation": "check.yml", "handover": "handover.yml", "collect": "collect.yml",
    "evaluate": "evaluate.yml", "revoke": "revoke.yml", "remove": "remove.yml",
    "recovery": "check.yml", "teardown": "teardown.yml", "pristine": "pristine.yml",
    # Recording a snapshot at handover instead of running an agent (orchestrator/snapshots/record.py).
    "snapshot": "snapshot_record.yml",
    # A replay trial's collect, evaluate and revoke in one invocation (see FINISH_STEPS).
    "finish": "finish.yml",
    # verify-scenarios on a scenario with a reference solution: evaluate the untouched incident (must not pass),
    # apply the reference (`solve`), evaluate again (must pass). See `Run.trial`.
    "evaluate_untouched": "evaluate.yml", "solve": "solve.yml", "evaluate_reference": "evaluate.yml",
}
# One trial on an environment that stays up (verify-scenarios, campaigns): no agent, no deploy.
TRIAL_FORWARD = ["baseline", "inject", "manifestation"]
TRIAL_CLEANUP = ["remove", "recovery", "pristine"]
# After manifestation, on a scenario with a reference solution: the untouched incident must fail its evaluation, the
# reference must pass it.
REFERENCE_STEPS = ["evaluate_untouched", "solve", "evaluate_reference"]
# One replay trial on a frozen environment (roles/env_snapshot): the incident was recorded at handover, so there is
# nothing to inject or remove; revoke is its only undo step, and the host's teardown stops the frozen Prometheus.
# Two playbook invocations instead of five (each costs 2-5 s of start-up on 2 cores): handover, then `finish`
# (playbooks/finish.yml imports collect.yml, evaluate.yml and revoke.yml, one play each), recorded as the three
# steps it ran, timed by its plays' starts. A failed play stops it; revoke is then owed and runs on its own.
REPLAY_FORWARD = ["handover", "agent", "finish"]
FINISH_STEPS = ["collect", "evaluate", "revoke"]
FINISH_STATS = {"collect": ("collect",), "evaluate": ("evaluations",), "revoke": ("revoke",)}
"""Which of the finish playbook's set_stats keys belong to which of its steps."""
SNAPSHOT_ROLE = "env_snapshot"
WORLD_EVALUATORS = frozenset({"evaluate_mitigation", "evaluate_cost", "evaluate_ciso", "evaluate_ciso_kyverno",
                              "evaluate_workspace"})
"""Evaluator roles that read the live environment (Prometheus, the cluster, the CIS target host the agent's fetcher
runs against, the workspace tree that is rebuilt): while one of them is still to run, the faults stay in. Any other
evaluator scores only files (the agent's output, its trajectory, the ground truth), so a trial on a kept environment
removes its faults while the agent is scored (`Run.execute_trial`).
tests/unit/test_lifecycle_overlap.py fails when an evaluator role reads the world without being listed here."""
LIVE_ONLY_KINDS = frozenset({"mitigate", "fix", "write-tests"})
"""Task kinds that need the live world (a mitigation, a cost mitigation, is scored by what it changed; a DevOps fix
or tests by building and testing the agent's workspace tree)."""
# Undo step -> the step whose start makes it necessary.
UNDOES = {"revoke": "handover", "remove": "inject", "teardown": "deploy"}
DEFAULT_TIMEOUTS = {"job": 600, "idle": 300}
DEFAULT_AGENT = f"{sys.executable} -m orchestrator.agents.heuristic"
# The baseline agent when a run names none: by task kind (the heuristic SRE agent cannot assess), else by domain.
KIND_AGENTS = {"assess": f"{sys.executable} -m orchestrator.agents.ciso"}
DOMAIN_AGENTS = {"FinOps": f"{sys.executable} -m orchestrator.agents.finops",
                 "DevOps": f"{sys.executable} -m orchestrator.agents.devops"}
PORT_BLOCK = 10


def default_agent(scn: Scenario) -> str:
    """The baseline agent for the scenario: what runs when none is named."""
    kinds = {t["kind"] for t in scn.data["tasks"]}
    by_kind = next((KIND_AGENTS[k] for k in sorted(kinds) if k in KIND_AGENTS), None)
    return by_kind or DOMAIN_AGENTS.get(scn.data["metadata"]["domain"], DEFAULT_AGENT)


def new_run_id() -> str:
    """Sortable by start time, unique across concurrent runs."""
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"


PORT_RANGE_LOW = 20000
EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")


def port_range(ephemeral: Path = EPHEMERAL_RANGE) -> tuple[int, int]:
    """Where run port blocks are taken: from PORT_RANGE_LOW up to the kernel's ephemeral ports. A port in the ephemeral
    range can become any outgoing connection's source port (Prometheus' scrapes, the load generator) between the
    moment a block is chosen and the moment a step binds it (a trial's gateway, minutes later on a kept
    environment): a bind then fails. Below the range, only another listener can take it. Where the ephemeral range
    starts too low to leave room (a tuned kernel), the whole span up to 60000 is used, as before."""
    try:
        low = int(ephemeral.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768  # Linux's default
    return (PORT_RANGE_LOW, low) if low - PORT_RANGE_LOW >= 100 * PORT_BLOCK else (PORT_RANGE_LOW, 60000)


def free_port_base(tries: int = 200) -> int:
    """A block of PORT_BLOCK loopback ports that are free right now (in `port_range`)."""
    rng = secrets.SystemRandom()
    low, high = port_range()
    for _ in range(tries):
        base = rng.randrange(low, high - PORT_BLOCK + 1, PORT_BLOCK)
        try:
            for port in range(base, base + PORT_BLOCK):
                with socket.socket() as sock:
                    sock.bind(("127.0.0.1", port))
        except OSError:
            continue
        return base
    raise RuntimeError("no free block of loopback ports found")


class Interrupts:
    """SIGINT/SIGTERM set a flag instead of raising, so clean-up always gets to run.

    The third signal raises KeyboardInterrupt (the run state stays on disk for
    ``opsbench cleanup``)."""

    def __init__(self, notify: Callable[[str], None]) -> None:
        self.count = 0
        self.notify = notify
        self._old: dict[int, Any] = {}

    def __enter__(self) -> Interrupts:
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._old[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._old.items():
            signal.signal(sig, handler)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.count += 1
        if self.count >= 3:
            raise KeyboardInterrupt
        self.notify("interrupted: stopping, then removing faults and tearing down "
                    "(signal twice more to abandon clean-up; finish it later with `opsbench cleanup`)")

    @property
    def set(self) -> bool:
        return self.count > 0


@dataclass
class Progress:
    """Receives lifecycle progress; the CLI renders it."""

    step_started: Callable[[str, int, int], None] = lambda step, i, n: None
    step_ended: Callable[[str, str, float, str], None] = lambda step, status, secs, detail: None
    task: Callable[[str, str], None] = lambda step, task: None
    message: Callable[[str], None] = lambda text: None


class Run:
    """One trial of one scenario."""

    def __init__(self, state: dict[str, Any], progress: Progress | None = None) -> None:
        self.state = state
        self.progress = progress or Progress()
        self.run_dir = Path(state["run_dir"])
        self.interrupts: Interrupts | None = None
        # A remote agent's API server (orchestrator/agent_api.py); set by the caller, never persisted.
        self.remote: AgentAPI | None = None
        # Per step running or run: when each of its plays started and its first failed task (see `_finish`).
        self._plays: dict[str, list[tuple[float, str | None]]] = {}
        # Steps of one trial may run at the same time (`execute_trial`): the state and its run.json change under it.
        self._lock = threading.RLock()

    # -- creation -------------------------------------------------------------------------
    @classmethod
    def create(cls, scn: Scenario, agent: str | None, keep: bool = False,
               progress: Progress | None = None, tool_profile: str = "full", purpose: str = store.AGENT) -> Run:
        """A new run, recorded before anything happens. `purpose` (store.PURPOSES): ``agent`` for an agent being
        measured; the harness's own runs (``bench``, ``verify``) say so, and results leave them out."""
        store.check_purpose(purpose)
        cluster_vars: dict[str, Any] = {}
        if scn.backend == "kubernetes":
            # Fail in seconds, before any state exists, when no cluster answers.
            from orchestrator.k8s import require_cluster

            cluster = require_cluster(scn.id)
            cluster_vars = {"opsbench_kubeconfig": str(cluster.kubeconfig.resolve()),
                            "opsbench_k8s_context": os.environ.get("OPSBENCH_K8S_CONTEXT", "")}
        run_id = new_run_id()
        run_dir = paths.runs_dir() / run_id
        (run_dir / "steps").mkdir(parents=True)
        env = scn.environment
        state: dict[str, Any] = {
            "id": run_id,
            "scenario_id": scn.id,
            "spec_path": str(scn.path),
            "spec_version": scn.version,
            "spec_digest": scn.digest,
            "run_dir": str(run_dir),
            "agent": agent or default_agent(scn),
            "purpose": purpose,
            "keep": keep,
            "tool_profile": tool_profile,
            "status": "running",
            "started": [],
            "done": [],
            "pid": os.getpid(),
            "common": {
                "opsbench_run_id": run_id,
                "opsbench_run_dir": str(run_dir),
                "opsbench_port_base": free_port_base(),
                **cluster_vars,
            },
            "vars": {
                "environment": {
                    "name": "environment", "role": scn.environment_role,
                    "vars": resolve_role_vars(scn.environment_role, "deploy", env["args"]),
                },
                **scenario_vars(scn, run_id, run_dir),
            },
            "budget": scn.data["budget"],
            "timeouts": scn.data.get("timeouts", {}),
            "results": {},
        }
        store.create_run({**state, "status": "running"})
        store.write_run_json(run_dir, state)
        return cls(state, progress)

    @classmethod
    def trial_on(cls, host: Run, scn: Scenario, agent: str | None, tool_profile: str = "full",
                 visible_since: float | None = None, purpose: str | None = None) -> Run:
        """A run of `scn` on `host`'s deployed environment: recorded as a run of its own (own id, phases, run.json
        and artifacts under ``<host dir>/trials/<id>``), while its playbooks see the host's run id and directory,
        which is where the environment, its faults' state and the per-run files of the roles live.
        `visible_since`: when the previous trial left the environment back at baseline; the agent's gateway
        shows no telemetry from before it. `purpose`: as for `create`; by default the host's."""
        purpose = store.check_purpose(purpose or host.state.get("purpose", store.AGENT))
        run_id = new_run_id()
        record_dir = host.run_dir / "trials" / run_id
        record_dir.mkdir(parents=True)
        state: dict[str, Any] = {
            "id": run_id,
            "host": host.id,
            "scenario_id": scn.id,
            "spec_path": str(scn.path),
            "spec_version": scn.version,
            "spec_digest": scn.digest,
            "run_dir": str(host.run_dir),
            "record_dir": str(record_dir),
            "steps_dir": str(record_dir / "steps"),
            "agent": agent or default_agent(scn),
            "purpose": purpose,
            "keep": True,  # the host owns the environment
            "tool_profile": tool_profile,
            "visible_since": round(visible_since, 3) if visible_since is not None else None,
            "status": "running",
            "started": [],
            "done": [],
            "pid": os.getpid(),
            "common": dict(host.state["common"]),
            "vars": {"environment": host.state["vars"]["environment"],
                     **scenario_vars(scn, run_id, host.run_dir)},
            "budget": scn.data["budget"],
            "timeouts": scn.data.get("timeouts", {}),
            "results": {},
        }
        store.create_run({**state, "run_dir": str(record_dir)})
        store.write_run_json(record_dir, state)
        trial = cls(state, host.progress)
        trial.interrupts = host.interrupts
        return trial

    @classmethod
    def replay_host(cls, scn: Scenario, snapshot: Path, snapshot_id: str, progress: Progress | None = None,
                    purpose: str = store.AGENT) -> Run:
        """A run whose environment is the frozen incident in `snapshot` (roles/env_snapshot instead of the scenario's
        environment role): deployed once, replay trials run on it (`replay_trial_on`), torn down at the end (which
        stops its frozen Prometheus, also from `opsbench cleanup` after a SIGKILL)."""
        host = cls.create(scn, agent=None, keep=False, progress=progress, purpose=purpose)
        host.state["vars"]["environment"] = {
            "name": "environment", "role": SNAPSHOT_ROLE,
            "vars": resolve_role_vars(SNAPSHOT_ROLE, "deploy", {"path": str(snapshot), "scenario": scn.id})}
        host._tag_replay(snapshot_id)
        return host

    @classmethod
    def replay_trial_on(cls, host: Run, scn: Scenario, agent: str | None, tool_profile: str = "full") -> Run:
        """A replay trial on `host` (see `replay_host`), recorded as a run of its own with mode ``replay``."""
        trial = cls.trial_on(host, scn, agent, tool_profile)
        trial._tag_replay(str(host.state["snapshot_id"]))
        return trial

    def _tag_replay(self, snapshot_id: str) -> None:
        self.state["mode"], self.state["snapshot_id"] = store.REPLAY, snapshot_id
        self._save()
        store.update_run(self.id, mode=store.REPLAY, snapshot_id=snapshot_id)

    @classmethod
    def load(cls, run_id: str, progress: Progress | None = None) -> Run:
        run_dir = paths.runs_dir() / run_id
        if not (run_dir / "run.json").is_file():  # a campaign's trial keeps its run.json under its host's dir
            row = store.get_run(run_id)
            if row and (Path(row["run_dir"]) / "run.json").is_file():
                run_dir = Path(row["run_dir"])
        if not (run_dir / "run.json").is_file():
            from orchestrator.errors import OpsBenchError
            raise OpsBenchError(f"no run '{run_id}' under {paths.runs_dir()} (see `opsbench runs`)")
        return cls(store.read_run_json(run_dir), progress)

    # -- bookkeeping ----------------------------------------------------------------------
    @property
    def id(self) -> str:
        return str(self.state["id"])

    @property
    def record_dir(self) -> Path:
        """Where run.json lives: the run dir, or a trial's own dir under its host's (see `trial_on`)."""
        return Path(self.state.get("record_dir") or self.run_dir)

    def _save(self) -> None:
        with self._lock:
            store.write_run_json(self.record_dir, self.state)

    def _interrupted(self) -> bool:
        return bool(self.interrupts and self.interrupts.set)

    def extravars(self, step: str) -> dict[str, Any]:
        v = self.state["vars"]
        ev: dict[str, Any] = dict(self.state["common"])
        if step in ("deploy", "teardown", "pristine"):
            ev["opsbench_environment"] = v["environment"]
        elif step in ("baseline", "manifestation", "recovery"):
            ev["opsbench_checks"] = v["checks"][step]
        elif step in ("inject", "remove"):
            ev["opsbench_faults"] = v["faults"]
        elif step == "handover":
            ev["opsbench_manifest"] = v["manifest"]
            ev["opsbench_tool_profile"] = self.state.get("tool_profile", "full")
            if self.state.get("visible_since") is not None:
                ev["opsbench_visible_since"] = self.state["visible_since"]
        elif step == "solve":
            ev["opsbench_reference"] = v.get("reference", [])
        elif step in ("evaluate_untouched", "evaluate_reference"):
            # The scenario's own evaluators: the process metrics need an agent's trajectory, which a check has not.
            ev["opsbench_evaluators"] = [e for e in v["evaluators"] if e["role"] != "evaluate_process"]
            ev["opsbench_ground_truth"] = v["ground_truth"]
            ev["opsbench_timeline"] = {}
        elif step in ("evaluate", "finish"):
            ev["opsbench_evaluators"] = v["evaluators"]
            ev["opsbench_ground_truth"] = v["ground_truth"]
            # When each phase ran and how the agent ended: MTTD/MTTR and the process metrics.
            ev["opsbench_timeline"] = {
                k: {f: r[f] for f in ("status", "started_at", "ended_at", "exit_code", "budget") if f in r}
                for k, r in self.state["results"].items()}
        return ev

    # -- steps ----------------------------------------------------------------------------
    def _step(self, step: str, index: int, total: int, cleanup: bool = False) -> StepResult:
        """Run one playbook step and record it. Clean-up steps ignore interrupts. Thread-safe: the bookkeeping
        holds the run's lock, the playbook runs without it."""
        with self._lock:
            self.state["started"] = [*self.state["started"], step]
            self._save()
            self.progress.step_started(step, index, total)
            seq = store.start_phase(self.id, step)
            started_at = time.time()
            limits = {**DEFAULT_TIMEOUTS, **self.state["timeouts"].get(step, {})}
            if cleanup and self.state["results"].get(step, {}).get("status") == "timeout":
                # An undo step retried (`opsbench cleanup`) after timing out: its limit proved too short.
                limits = {k: max(v, DEFAULT_TIMEOUTS[k]) for k, v in limits.items()}
            extravars = self.extravars(step)
        on_event: EventHandler = self._event_handler(step)
        result = run_playbook(
            step, PLAYBOOKS[step], extravars,
            Path(self.state.get("steps_dir") or self.run_dir / "steps") / f"{seq:02d}-{step}",
            job_timeout=limits["job"], idle_timeout=limits["idle"],
            cancel=(lambda: False) if cleanup else self._interrupted, on_event=on_event,
            on_pid=lambda pid: self._record_step_pid(step, pid),
        )
        with self._lock:
            return self._record_step(step, seq, started_at, result)

    def _record_step(self, step: str, seq: int, started_at: float, result: StepResult) -> StepResult:
        """A step's outcome into the state, run.json and the store (the caller holds the lock)."""
        pids = self.state.get("step_pids", {})
        pids.pop(step, None)
        if not pids:
            self.state.pop("step_pids", None)
        status = result.status
        if result.ok and step in ("baseline", "manifestation", "recovery"):
            failed = [n for n, c in result.stats.get("checks", {}).items() if not c.get("ok")]
            missing = [c["name"] for c in self.state["vars"]["checks"][step]
                       if c["name"] not in result.stats.get("checks", {})]
            if failed or missing:
                status = "negative"
                result.failures = [f"check '{n}': {result.stats['checks'][n].get('detail', 'not ok')}"
                                   for n in failed] + [f"check '{n}' reported nothing" for n in missing]
        detail = "; ".join(result.failures)[:2000] or None
        store.end_phase(self.id, seq, status, detail)
        self.state["results"][step] = {"status": status, "elapsed": round(result.elapsed, 2),
                                       "started_at": round(started_at, 3), "ended_at": round(time.time(), 3),
                                       "stats": result.stats, "failures": result.failures,
                                       **({"timing": result.timing} if result.timing else {})}
        if result.ok and status == "successful":
            self.state["done"] = [*self.state["done"], step]
        self._save()
        self.progress.step_ended(step, status, result.elapsed, detail or "")
        result.status = status
        return result

    def _record_step_pid(self, step: str, pid: int) -> None:
        with self._lock:
            self.state["step_pids"] = {**self.state.get("step_pids", {}), step: pid}
            self._save()

    def _stop_orphaned_step(self) -> None:
        """Playbooks still running from a killed orchestrator would race with clean-up: stop them."""
        pids = list(self.state.pop("step_pids", {}).values())
        if (old := self.state.pop("step_pid", None)) is not None:  # run.json written before steps overlapped
            pids.append(old)
        for pid in pids:
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if b"ansible-playbook" in cmdline and self.id.encode() in cmdline:
                self.progress.message(f"stopping step playbook {pid} left running by the killed orchestrator")
                terminate_playbook(int(pid))

    def _event_handler(self, step: str) -> EventHandler:
        plays: list[tuple[float, str | None]] = []
        self._plays[step] = plays

        def handle(event: dict[str, Any]) -> None:
            kind, data = event.get("event"), event.get("event_data", {})
            if kind == "playbook_on_task_start":
                self.progress.task(step, data.get("task", ""))
            elif kind == "playbook_on_play_start":
                plays.append((time.time(), None))
            elif kind in ("runner_on_failed", "runner_on_unreachable") and not data.get("ignore_errors") and plays \
                    and plays[-1][1] is None:
                plays[-1] = (plays[-1][0], str(data.get("task", "?")))
        return handle

    def _agent(self, index: int, total: int) -> AgentResult:
        self.state["started"] = [*self.state["started"], "agent"]
        self._save()
        self.progress.step_started("agent", index, total)
        seq = store.start_phase(self.id, "agent")
        started_at = time.time()
        agent_dir = self.run_dir / "agent"
        budget = int(self.state["budget"]["wallClockSeconds"])
        if self.remote is not None:
            result = self._remote_agent(agent_dir, budget)
        else:
            result = self._command_agent(agent_dir, budget)
        if result.status in ("timeout", "interrupted") and (agent_dir / "output.json").exists():
            # A remote agent's late answer (a command agent's was already put aside): not scored.
            (agent_dir / "output.json").replace(agent_dir / "output.late.json")
        self.state.pop("agent_pid", None)
        self.state["done"] = [*self.state["done"], "agent"]
        self.state["results"]["agent"] = {"status": result.status, "exit_code": result.exit_code,
                                          "elapsed": round(result.elapsed, 2), "detail": result.detail,
                                          "started_at": round(started_at, 3), "ended_at": round(time.time(), 3),
                                          "budget": budget, "isolation": result.isolation}
        self._save()
        store.end_phase(self.id, seq, result.status, result.detail or None)
        self.progress.step_ended("agent", result.status, result.elapsed, result.detail)
        return result

    def _remote_agent(self, agent_dir: Path, budget: int) -> AgentResult:
        """Hand the manifest to the remote agent through the agent API and wait for it."""
        from orchestrator.agent_api import wait_for_remote
        assert self.remote is not None
        manifest = json.loads((agent_dir / "manifest.json").read_text())
        token = (self.run_dir / "secrets" / "agent_token").read_text().strip()
        start = time.monotonic()
        self.remote.ready(manifest, token, agent_dir / "output.json")
        self.progress.message(f"manifest ready for the remote agent at {self.remote.url}/v1/manifest")
        status, detail = wait_for_remote(self.remote, budget, self._interrupted)
        self.remote.close()
        (agent_dir / "agent-api.jsonl").write_text(
            "".join(json.dumps(e) + "\n" for e in self.remote.state.events))
        return AgentResult(status, 0 if status == "exited" else None, time.monotonic() - start, detail,
                           isolation={"sandbox": "remote",
                                      "reason": "reaches the benchmark only through the agent API and the gateway"})

    def _command_agent(self, agent_dir: Path, budget: int) -> AgentResult:
        def on_start(pid: int) -> None:
            self.state["agent_pid"] = pid
            self._save()

        return run_command_agent(self.state["agent"], agent_dir, self.id, budget, self._interrupted, on_start,
                                 secret_files=self._scenario_files())

    def _scenario_files(self) -> list[Path]:
        """The run's scenario spec and ground truth (hidden from a command agent even outside the project)."""
        spec = Path(self.state["spec_path"])
        if not spec.is_file():
            return []
        try:
            truth = load_scenario(spec).ground_truth_path
        except Exception:  # a spec edited since the run began and now invalid: hide its usual neighbour
            truth = spec.parent / "ground_truth.yaml"
        return [spec, *([truth] if truth.is_file() else [])]

    # -- the whole run --------------------------------------------------------------------
    def execute(self) -> dict[str, Any]:
        with Interrupts(self.progress.message) as interrupts:
            self.interrupts = interrupts
            total = len(FORWARD) + len(CLEANUP) - (1 if self.state["keep"] else 0)
            self._forward(FORWARD, total)
            self.cleanup(first_index=len(FORWARD) + 1, total=total)
        return self.summary()

    def _forward(self, steps: list[str], total: int, first_index: int = 1) -> None:
        """Run `steps` in order until one fails or an interrupt arrives; record the run's status and reason."""
        status, reason = "completed", ""
        for index, step in enumerate(steps, first_index):
            if self._interrupted():
                status, reason = "interrupted", f"interrupted before {step}"
                break
            if step == "agent":
                agent = self._agent(index, total)
                if agent.status == "not_started":  # ours, not the agent's: never scored as an agent failure
                    status, reason = "error", f"agent not started: {agent.detail}"
                    break
                continue
            if step == "finish":
                failed_step, result = self._finish(index, total)
                if failed_step:
                    status, reason = _failure_status(failed_step, result)
                    break
                continue
            result = self._step(step, index, total)
            if result.status != "successful":
                status, reason = _failure_status(step, result)
                break
        if self._interrupted() and status == "completed":
            status, reason = "interrupted", "interrupted"
        with self._lock:
            self.state["status"], self.state["reason"] = status, reason
            self._save()

    # -- agent trials on a host's environment (campaigns) ----------------------------------
    def execute_trial(self, healthy: bool = False) -> dict[str, Any]:
        """The run's forward steps without deploy (and without baseline when the host says the environment was
        just proven healthy), then revoke, remove, recovery and the leftover check; never teardown. The per-run
        files the roles wrote into the host's directory are moved into this run's own directory at the end."""
        forward = [s for s in FORWARD if s != "deploy" and not (healthy and s == "baseline")]
        total = len(forward) + 4
        try:
            if self.restores_early():
                # Once the agent is done the faults can go while the agent is scored: `finish` (collect, evaluate,
                # revoke in one playbook) runs beside remove, then recovery beside the leftover check.
                head = forward[:forward.index("agent") + 1]
                total = len(head) + 4
                self._forward(head, total)
                if self.state["status"] == "completed":
                    restore = threading.Thread(target=self._restore, args=(len(head) + 2, total),
                                               name=f"restore-{self.id}", daemon=True)
                    restore.start()
                    try:
                        self._forward(["finish"], total, first_index=len(head) + 1)
                    finally:
                        restore.join()
            else:
                self._forward(forward, total)
            self.cleanup(first_index=total - 3, total=total)
            if "leftovers" not in self.state and ("remove" in self.state["done"]
                                                  or "inject" not in self.state["started"]):
                self._check_leftovers(total, total)
        finally:
            self.archive()
            self._save()
            store.update_run(self.id, status=self.state["status"], outcome=_json(self.summary()))
        return self.summary()

    def restores_early(self) -> bool:
        """Whether this trial's faults may be removed while its agent is scored: no evaluator reads the world."""
        return not {e["role"] for e in self.state["vars"]["evaluators"]} & WORLD_EVALUATORS

    def _restore(self, index: int, total: int) -> None:
        """remove, then recovery beside the leftover check (both only look; neither changes what the other sees).
        Runs beside `finish`; what fails here is owed and `cleanup` finishes it (remove is retried, recovery
        runs only after a removal that succeeded)."""
        if self._step("remove", index, total, cleanup=True).status != "successful":
            return
        leftovers = threading.Thread(target=self._check_leftovers, args=(index + 2, total),
                                     name=f"leftovers-{self.id}", daemon=True)
        leftovers.start()
        try:
            self._step("recovery", index + 1, total, cleanup=True)
        finally:
            leftovers.join()

    def _check_leftovers(self, index: int, total: int) -> None:
        """The `pristine` step: what the faults left behind, into the state as `leftovers`."""
        pristine = self._step("pristine", index, total, cleanup=True)
        with self._lock:
            self.state["leftovers"] = pristine.stats.get("leftovers", []) if pristine.ok else ["leftover check failed"]

    def _finish(self, index: int, total: int) -> tuple[str | None, StepResult]:
        """Run the `finish` step (collect + evaluate + revoke in one playbook) and record it as those three steps:
        each one's time from its play's start (the first also carries the playbook's start-up), its share of the
        stats, done when its play ended without a failure. Returns the first step that did not succeed (None when
        all did) and the playbook's result."""
        result = self._step("finish", index, total)
        with self._lock:
            return self._record_finish(result)

    def _record_finish(self, result: StepResult) -> tuple[str | None, StepResult]:
        """`_finish`'s record of its three steps (the caller holds the lock)."""
        res = self.state["results"].pop("finish")
        plays = self._plays.get("finish", [])
        # `finish` is an implementation detail of the record: the run shows the steps it ran.
        self.state["started"] = [s for s in self.state["started"] if s != "finish"]
        self.state["done"] = [s for s in self.state["done"] if s != "finish"]
        self.state["finish"] = {"elapsed": res["elapsed"], "plays": len(plays)}
        first_failed: str | None = None
        for i, step in enumerate(FINISH_STEPS):
            if i >= len(plays):
                first_failed = first_failed or step
                break
            started_at = res["started_at"] if i == 0 else plays[i][0]
            ended_at = plays[i + 1][0] if i + 1 < len(plays) else res["ended_at"]
            failed_task = plays[i][1]
            last = i + 1 == len(plays)
            status = "failed" if failed_task else (res["status"] if last else "successful")
            failures = [f for f in res["failures"] if failed_task and f"'{failed_task}'" in f] or (
                res["failures"] if status != "successful" else [])
            self.state["started"] = [*self.state["started"], step]
            self.state["results"][step] = {
                "status": status, "elapsed": round(ended_at - started_at, 2), "started_at": round(started_at, 3),
                "ended_at": round(ended_at, 3), "failures": failures,
                "stats": {k: res["stats"][k] for k in FINISH_STATS[step] if k in res["stats"]}}
            if status == "successful":
                self.state["done"] = [*self.state["done"], step]
            elif first_failed is None:
                first_failed = step
                result.failures = failures
                result.status = status
        if first_failed and result.status == "successful":
            result.status = res["status"] if res["status"] != "successful" else "failed"
        self._save()
        return first_failed, result

    def execute_replay_trial(self) -> dict[str, Any]:
        """handover -> agent -> finish (collect, evaluate, revoke), and revoke on its own when `finish` did not get
        to it; never deploy, inject, remove or teardown (the host owns the frozen environment). Per-run files are
        moved into this run's own directory at the end."""
        total = len(REPLAY_FORWARD)
        try:
            self._forward(list(REPLAY_FORWARD), total)
            self.cleanup(first_index=total, total=total)
        finally:
            self.archive()
            self._save()
            store.update_run(self.id, status=self.state["status"], outcome=_json(self.summary()))
        return self.summary()

    def archive(self) -> None:
        """Move this run's per-run files (agent, artifacts, evaluation, gateway) from the shared run dir into
        its own directory, so the next trial on the environment starts with none."""
        if self.record_dir == self.run_dir:
            return
        for name in ("agent", "artifacts", "evaluation", "gateway"):
            src = self.run_dir / name
            if src.exists():
                src.replace(self.record_dir / name)

    # -- trials on a kept environment ------------------------------------------------------
    def use_scenario(self, scn: Scenario) -> None:
        """Point the run's fault and check steps at another scenario of the same environment."""
        v = self.state["vars"]
        v["faults"] = [{"name": f["name"], "role": f["role"], "vars": resolve_role_vars(f["role"], "inject", f["args"])}
                       for f in scn.faults]
        v["checks"] = {phase: [{"name": c["name"], "role": c["role"], "timeout": c["timeout"],
                                "vars": resolve_role_vars(c["role"], "main", c["args"])}
                               for c in scn.checks(phase)]
                       for phase in ("baseline", "manifestation", "recovery")}
        v["ground_truth"] = str(scn.ground_truth_path.resolve())
        v["evaluators"] = evaluator_vars(scn)
        v["reference"] = reference_vars(scn)
        self.state["scenario_id"] = scn.id
        trial_steps = set(TRIAL_FORWARD + TRIAL_CLEANUP + REFERENCE_STEPS)
        self.state["started"] = [s for s in self.state["started"] if s not in trial_steps]
        self.state["done"] = [s for s in self.state["done"] if s not in trial_steps]
        for step in trial_steps:
            self.state["results"].pop(step, None)
        self._save()

    def trial(self, scn: Scenario, idempotency: bool = False, healthy: bool = False) -> dict[str, Any]:
        """baseline -> inject -> manifestation, then always remove -> recovery and pristine (at the same time).

        The environment must be deployed (and stays up). Returns each step's result; the
        run's interrupt flag stops the forward steps, never the clean-up ones. With
        ``idempotency`` the faults are first removed without having been injected (must be a
        no-op) and then injected twice (must equal once); recovery and the leftover check
        after the single removal prove both. ``healthy`` says the previous trial on this
        environment just passed its recovery checks and leftover check, which are the
        baseline checks: the baseline step is then skipped."""
        self.use_scenario(scn)
        forward = (["remove", "baseline", "inject", "inject", "manifestation"] if idempotency
                   else list(TRIAL_FORWARD))
        if healthy:
            forward.remove("baseline")
        proving = len(REFERENCE_STEPS) if scn.reference else 0
        total = len(forward) + proving + len(TRIAL_CLEANUP)
        outcome, reason = "passed", ""
        for index, step in enumerate(forward, 1):
            if self._interrupted():
                outcome, reason = "interrupted", f"interrupted before {step}"
                break
            result = self._step(step, index, total)
            if result.status != "successful":
                outcome, reason = _failure_status(step, result)
                break
            if step == "remove":  # the no-op removal must not count as the trial's removal
                self.state["done"] = [s for s in self.state["done"] if s != "remove"]
                self.state["started"] = [s for s in self.state["started"] if s != "remove"]
        if outcome == "passed" and scn.reference and not self._interrupted():
            outcome, reason = self._prove_reference(len(forward) + 1, total)
        if "inject" in self.state["started"]:
            self._restore(len(forward) + proving + 1, total)
        if "pristine" not in self.state["results"]:  # the removal failed, or nothing was injected
            self._check_leftovers(total, total)
        for step in TRIAL_CLEANUP:
            res = self.state["results"].get(step)
            if res and res["status"] != "successful" and outcome == "passed":
                outcome, reason = "failed", f"{step} {res['status']}: {'; '.join(res['failures'])[:500]}"
        leftovers = self.state["results"].get("pristine", {}).get("stats", {}).get("leftovers", [])
        if leftovers and outcome == "passed":
            outcome, reason = "failed", "leftovers: " + "; ".join(leftovers)[:500]
        return {"outcome": outcome, "reason": reason, "leftovers": leftovers,
                "results": {k: v for k, v in self.state["results"].items()
                            if k in TRIAL_FORWARD + TRIAL_CLEANUP + REFERENCE_STEPS}}

    def _prove_reference(self, index: int, total: int) -> tuple[str, str]:
        """The incident untouched must fail its evaluation; with the reference solution applied it must pass.
        Returns the trial's (outcome, reason). Earlier trials' answers and scores on this environment go first."""
        for name in ("artifacts", "evaluation", "agent"):
            shutil.rmtree(self.run_dir / name, ignore_errors=True)
        verdicts: dict[str, bool | None] = {}
        for offset, step in enumerate(REFERENCE_STEPS):
            result = self._step(step, index + offset, total)
            if result.status != "successful":
                return _failure_status(step, result)
            if step != "solve":
                verdicts[step] = decided_pass(result.stats.get("evaluations", {}))
        if verdicts["evaluate_untouched"] is not False:
            return "failed", ("the untouched incident is not scored as a failure "
                              f"({'passed' if verdicts['evaluate_untouched'] else 'no deciding score'}): "
                              "an agent that does nothing would pass")
        if verdicts["evaluate_reference"] is not True:
            detail = json.dumps(self.state["results"]["evaluate_reference"]["stats"].get("evaluations", {}))[:400]
            return "failed", f"the reference solution does not pass: {detail}"
        return "passed", ""

    def pending_cleanup(self) -> list[str]:
        started, done = set(self.state["started"]), set(self.state["done"])
        pending = [u for u in ("revoke", "remove") if UNDOES[u] in started and u not in done
                   # Every fault lives in the environment (its containers, their network namespaces, its
                   # namespace on a cluster): once teardown is done there is nothing left to remove, and the
                   # teardown step forgot the saved fault state. The gateway and token are not in it: revoke stays.
                   and not (u == "remove" and "teardown" in done)]
        # Recovery checks the environment after removal; once it is torn down there is nothing left to check.
        if ("remove" in pending or "remove" in done) and "recovery" not in started and "teardown" not in done:
            pending.append("recovery")
        if "deploy" in started and "teardown" not in done and not self.state["keep"]:
            pending.append("teardown")
        return pending

    def cleanup(self, first_index: int = 1, total: int | None = None) -> None:
        """Run every undo step still owed; record failures without stopping the rest."""
        self._stop_orphaned_step()
        if (pid := self.state.get("agent_pid")) is not None:
            kill_group(int(pid))  # an agent left behind by a killed orchestrator
            self.state.pop("agent_pid", None)
        pending = self.pending_cleanup()
        total = total or len(pending)
        problems: list[str] = []
        retried: list[str] = []
        for offset, step in enumerate(pending):
            if step == "recovery" and self.state["results"].get("remove", {}).get("status") != "successful":
                continue  # no point checking recovery when removal itself failed
            result = self._step(step, first_index + offset, total, cleanup=True)
            if result.status == "timeout":
                # The environment must still go back to baseline: retry at once, with at least the default limits
                # (`_step` raises them for an undo step that timed out), before the next undo step needs it done.
                retried.append(f"{step}: timed out; retried with the default limits")
                result = self._step(step, first_index + offset, total, cleanup=True)
                retried[-1] += f": {result.status}"
            if result.status != "successful":
                problems.append(f"{step}: {result.status}" + (f": {'; '.join(result.failures)[:300]}"
                                                              if result.failures else ""))
        self.state["cleanup"] = "failed" if problems else "done"
        self.state["cleanup_problems"] = problems
        if retried:
            self.state["cleanup_retried"] = [*self.state.get("cleanup_retried", []), *retried]
        self._save()
        store.update_run(self.id, status=self.state["status"], outcome=_json(self.summary()))

    def summary(self) -> dict[str, Any]:
        res = self.state["results"]
        evaluations = res.get("evaluate", {}).get("stats", {}).get("evaluations", {})
        return {
            "run_id": self.id,
            "scenario": self.state["scenario_id"],
            "status": self.state["status"],
            "reason": self.state.get("reason", ""),
            "agent": res.get("agent", {}),
            "evaluations": evaluations,
            "cleanup": self.state.get("cleanup", "pending"),
            "cleanup_problems": self.state.get("cleanup_problems", []),
            "recovered": res.get("recovery", {}).get("status") == "successful"
            if "recovery" in res else None,
            "phases": {k: {"status": v["status"], "elapsed": v.get("elapsed")} for k, v in res.items()},
            "run_dir": str(self.record_dir),
            **({"host": self.state["host"], "leftovers": self.state.get("leftovers")} if "host" in self.state else {}),
            **({"mode": self.state["mode"], "snapshot_id": self.state.get("snapshot_id")} if "mode" in self.state
               else {}),
            **({"cleanup_interrupted": self.state["cleanup_interrupted"]} if "cleanup_interrupted" in self.state
               else {}),
            **({"cleanup_retried": self.state["cleanup_retried"]} if "cleanup_retried" in self.state else {}),
        }


def _failure_status(step: str, result: StepResult) -> tuple[str, str]:
    why = "; ".join(result.failures) or result.status
    if step == "manifestation" and result.status == "negative":
        return "invalid", f"fault did not manifest (scenario defect, not an agent failure): {why}"
    if result.status == "canceled":
        return "interrupted", f"interrupted during {step}"
    if result.status == "timeout":
        return "timeout", f"step {step} exceeded its time limit"
    if step == "baseline" and result.status == "negative":
        return "error", f"environment not healthy before injection: {why}"
    return "error", f"step {step} {result.status}: {why}"


def decided_pass(evaluations: dict[str, Any]) -> bool | None:
    """Whether the deciding evaluator (results.DECIDERS) says pass; None when none of them scored."""
    from orchestrator.results import DECIDERS
    for evaluator, key in DECIDERS:
        if isinstance(evaluations.get(evaluator), dict):
            return bool(evaluations[evaluator].get(key) == 1)
    return None


def _json(data: Any) -> str:
    return json.dumps(data, sort_keys=True)


def scenario_vars(scn: Scenario, run_id: str, run_dir: Path) -> dict[str, Any]:
    """The steps' inputs that come from the scenario (everything but the environment's)."""
    return {
        "faults": [
            {"name": f["name"], "role": f["role"], "vars": resolve_role_vars(f["role"], "inject", f["args"])}
            for f in scn.faults
        ],
        "checks": {
            phase: [{"name": c["name"], "role": c["role"], "timeout": c["timeout"],
                     "vars": resolve_role_vars(c["role"], "main", c["args"])}
                    for c in scn.checks(phase)]
            for phase in ("baseline", "manifestation", "recovery")
        },
        "evaluators": evaluator_vars(scn),
        "reference": reference_vars(scn),
        "ground_truth": str(scn.ground_truth_path.resolve()),
        "manifest": build_manifest(scn, run_id, run_dir),
    }


def evaluator_vars(scn: Scenario) -> list[dict[str, Any]]:
    return [{"name": e["role"].removeprefix("evaluate_"), "role": e["role"],
             "vars": resolve_role_vars(e["role"], "main", e["params"])}
            for e in with_process_evaluator(scn.evaluators)]


def reference_vars(scn: Scenario) -> list[dict[str, Any]]:
    return [{"name": r["name"], "role": r["role"], "vars": resolve_role_vars(r["role"], "main", r["args"])}
            for r in scn.reference]


def with_process_evaluator(evaluators: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The scenario's evaluators, then evaluate_process (process metrics for every run) unless listed."""
    if any(e["role"] == "evaluate_process" for e in evaluators):
        return evaluators
    return [*evaluators, {"role": "evaluate_process", "params": {}}]


def build_manifest(scn: Scenario, run_id: str, run_dir: Path) -> dict[str, Any]:
    """What the agent gets: goal, tasks, budget, where to write. Nothing about the fault."""
    budget = scn.data["budget"]
    kinds = [t["kind"] for t in scn.data["tasks"]]
    schemas = {k: str(paths.SCHEMAS_DIR / f"{SCHEMAS[k]}.schema.json") for k in kinds}
    return {
        "manifest_version": "opsbench/manifest/v1",
        "run": run_id,
        "tasks": [{"id": t["id"], "kind": t["kind"], "goal": t["goal"]} for t in scn.data["tasks"]],
        "budget": budget,
        "observability": scn.environment["observability"],
        "output": {
            "path": str(run_dir / "agent" / "output.json"),
            # One JSON file answers every task: it must match the schema of each task's kind.
            "schema": schemas[kinds[0]] if kinds else None,
            "schemas": schemas,
        },
        "trajectory": str(run_dir / "agent" / "trajectory.jsonl"),
    }
