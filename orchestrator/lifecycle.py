"""The step engine: one run, one ansible-runner invocation per step, every step recorded.

deploy -> baseline -> inject -> manifestation -> handover -> agent -> collect -> evaluate
  -> revoke -> remove -> recovery -> teardown

`Run` is the public face the run shapes drive (`orchestrator/trials.py`: campaign, replay, verify and recording
trials; `execute` here is the single run): `step` runs one playbook step, `forward` a sequence of them until one
fails, `cleanup` every undo step still owed, `save` writes run.json. Undo steps (revoke, remove, teardown) run
whenever the step they undo has *started*, whatever happened after it: a failed step, a step timeout,
Ctrl-C/SIGTERM, a crashed agent. run.json is written before each step, so after a SIGKILL ``opsbench cleanup``
finishes the same undo steps.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

from orchestrator import paths, store
from orchestrator.agent import AgentResult, kill_group, run_command_agent
from orchestrator.agent_api import AgentAPI
from orchestrator.interrupts import Interrupts
from orchestrator.ports import free_port_base
from orchestrator.progress import Progress
from orchestrator.run_vars import environment_vars, new_run_id, run_state, step_extravars
from orchestrator.runner import EventHandler, StepResult, run_playbook, terminate_playbook
from orchestrator.spec import Scenario, load_scenario

FORWARD = ["deploy", "baseline", "inject", "manifestation", "handover", "agent", "collect", "evaluate"]
CLEANUP = ["revoke", "remove", "recovery", "teardown"]
PLAYBOOKS = {
    "deploy": "deploy.yml", "baseline": "check.yml", "inject": "inject.yml",
    "manifestation": "check.yml", "handover": "handover.yml", "collect": "collect.yml",
    "evaluate": "evaluate.yml", "revoke": "revoke.yml", "remove": "remove.yml",
    "recovery": "check.yml", "teardown": "teardown.yml", "pristine": "pristine.yml",
    # Recording a snapshot at handover instead of running an agent (orchestrator/harness/record.py).
    "snapshot": "snapshot_record.yml",
    # A replay trial's collect, evaluate and revoke in one invocation (see FINISH_STEPS).
    "finish": "finish.yml",
    # verify-scenarios on a scenario with a reference solution: evaluate the untouched incident (must not pass),
    # apply the reference (`solve`), evaluate again (must pass). See `trials.verify_trial`.
    "evaluate_untouched": "evaluate.yml", "solve": "solve.yml", "evaluate_reference": "evaluate.yml",
}
# A replay trial's collect, evaluate and revoke run as one playbook, `finish` (see `trials.replay_trial`).
FINISH_STEPS = ["collect", "evaluate", "revoke"]
FINISH_STATS = {"collect": ("collect",), "evaluate": ("evaluations",), "revoke": ("revoke",)}
"""Which of the finish playbook's set_stats keys belong to which of its steps."""
# Undo step -> the step whose start makes it necessary.
UNDOES = {"revoke": "handover", "remove": "inject", "teardown": "deploy"}
DEFAULT_TIMEOUTS = {"job": 600, "idle": 300}


class Run:
    """One trial of one scenario."""

    def __init__(self, state: dict[str, Any], progress: Progress | None = None) -> None:
        self.state = state
        self.progress = progress or Progress()
        self.run_dir = Path(state["run_dir"])
        self.interrupts: Interrupts | None = None
        # A remote agent's API server (orchestrator/agent_api.py); set by the caller, never persisted.
        self.remote: AgentAPI | None = None
        # Per step running or run: when each of its plays started and its first failed task (see `finish`).
        self._plays: dict[str, list[tuple[float, str | None]]] = {}
        # Steps of one trial may overlap (`trials.agent_trial`): the state and its run.json change under them.
        self.lock = threading.RLock()

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
        common = {"opsbench_run_id": run_id, "opsbench_run_dir": str(run_dir),
                  "opsbench_port_base": free_port_base(), **cluster_vars}
        state = run_state(scn, run_id, run_dir, agent=agent, purpose=purpose, keep=keep, tool_profile=tool_profile,
                          common=common, environment=environment_vars(scn.environment_role, scn.environment["args"]))
        store.create_run({**state, "status": "running"})
        store.write_run_json(run_dir, state)
        return cls(state, progress)

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

    def save(self) -> None:
        """Write run.json (thread-safe: steps of one trial may overlap)."""
        with self.lock:
            store.write_run_json(self.record_dir, self.state)

    def interrupted(self) -> bool:
        """Whether Ctrl-C or SIGTERM arrived: forward steps stop, clean-up steps never do."""
        return bool(self.interrupts and self.interrupts.set)

    def extravars(self, step: str) -> dict[str, Any]:
        return step_extravars(self.state, step)

    # -- steps ----------------------------------------------------------------------------
    def step(self, step: str, index: int, total: int, cleanup: bool = False) -> StepResult:
        """Run one playbook step and record it. Clean-up steps ignore interrupts. Thread-safe: the bookkeeping
        holds the run's lock, the playbook runs without it."""
        with self.lock:
            self.state["started"] = [*self.state["started"], step]
            self.save()
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
            cancel=(lambda: False) if cleanup else self.interrupted, on_event=on_event,
            on_pid=lambda pid: self._record_step_pid(step, pid),
        )
        with self.lock:
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
        self.save()
        self.progress.step_ended(step, status, result.elapsed, detail or "")
        result.status = status
        return result

    def _record_step_pid(self, step: str, pid: int) -> None:
        with self.lock:
            self.state["step_pids"] = {**self.state.get("step_pids", {}), step: pid}
            self.save()

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

    def run_agent(self, index: int, total: int) -> AgentResult:
        self.state["started"] = [*self.state["started"], "agent"]
        self.save()
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
        self.save()
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
        status, detail = wait_for_remote(self.remote, budget, self.interrupted)
        self.remote.close()
        (agent_dir / "agent-api.jsonl").write_text(
            "".join(json.dumps(e) + "\n" for e in self.remote.state.events))
        return AgentResult(status, 0 if status == "exited" else None, time.monotonic() - start, detail,
                           isolation={"sandbox": "remote",
                                      "reason": "reaches the benchmark only through the agent API and the gateway"})

    def _command_agent(self, agent_dir: Path, budget: int) -> AgentResult:
        def on_start(pid: int) -> None:
            self.state["agent_pid"] = pid
            self.save()

        return run_command_agent(self.state["agent"], agent_dir, self.id, budget, self.interrupted, on_start,
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
            self.forward(FORWARD, total)
            self.cleanup(first_index=len(FORWARD) + 1, total=total)
        return self.summary()

    def forward(self, steps: list[str], total: int, first_index: int = 1) -> None:
        """Run `steps` in order until one fails or an interrupt arrives; record the run's status and reason."""
        status, reason = "completed", ""
        for index, step in enumerate(steps, first_index):
            if self.interrupted():
                status, reason = "interrupted", f"interrupted before {step}"
                break
            if step == "agent":
                agent = self.run_agent(index, total)
                if agent.status == "not_started":  # ours, not the agent's: never scored as an agent failure
                    status, reason = "error", f"agent not started: {agent.detail}"
                    break
                continue
            if step == "finish":
                failed_step, result = self.finish(index, total)
                if failed_step:
                    status, reason = failure_status(failed_step, result)
                    break
                continue
            result = self.step(step, index, total)
            if result.status != "successful":
                status, reason = failure_status(step, result)
                break
        if self.interrupted() and status == "completed":
            status, reason = "interrupted", "interrupted"
        with self.lock:
            self.state["status"], self.state["reason"] = status, reason
            self.save()

    def finish(self, index: int, total: int) -> tuple[str | None, StepResult]:
        """Run the `finish` step (collect + evaluate + revoke in one playbook) and record it as those three steps:
        each one's time from its play's start (the first also carries the playbook's start-up), its share of the
        stats, done when its play ended without a failure. Returns the first step that did not succeed (None when
        all did) and the playbook's result."""
        result = self.step("finish", index, total)
        with self.lock:
            return self._record_finish(result)

    def _record_finish(self, result: StepResult) -> tuple[str | None, StepResult]:
        """`finish`'s record of its three steps (the caller holds the lock)."""
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
        self.save()
        return first_failed, result

    def archive(self) -> None:
        """Move this run's per-run files (agent, artifacts, evaluation, gateway) from the shared run dir into
        its own directory, so the next trial on the environment starts with none."""
        if self.record_dir == self.run_dir:
            return
        for name in ("agent", "artifacts", "evaluation", "gateway"):
            src = self.run_dir / name
            if src.exists():
                src.replace(self.record_dir / name)

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
            result = self.step(step, first_index + offset, total, cleanup=True)
            if result.status == "timeout":
                # The environment must still go back to baseline: retry at once, with at least the default limits
                # (`_step` raises them for an undo step that timed out), before the next undo step needs it done.
                retried.append(f"{step}: timed out; retried with the default limits")
                result = self.step(step, first_index + offset, total, cleanup=True)
                retried[-1] += f": {result.status}"
            if result.status != "successful":
                problems.append(f"{step}: {result.status}" + (f": {'; '.join(result.failures)[:300]}"
                                                              if result.failures else ""))
        self.state["cleanup"] = "failed" if problems else "done"
        self.state["cleanup_problems"] = problems
        if retried:
            self.state["cleanup_retried"] = [*self.state.get("cleanup_retried", []), *retried]
        self.save()
        store.update_run(self.id, status=self.state["status"], outcome=as_json(self.summary()))

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
            **({"snapshot": self.state["snapshot"]} if "snapshot" in self.state else {}),
        }


def failure_status(step: str, result: StepResult) -> tuple[str, str]:
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


def as_json(data: Any) -> str:
    return json.dumps(data, sort_keys=True)
