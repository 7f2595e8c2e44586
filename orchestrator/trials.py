"""The run shapes beyond a single run, each a short sequence over the step engine's public face (`lifecycle.Run`).

- a *trial on a host* (`trial_on`): a run of its own on an environment another run deployed and owns (campaigns,
  verify-scenarios, recordings); its playbooks see the host's run id and directory;
- `agent_trial`: a campaign's trial (no deploy, no teardown; faults removed while the agent is scored when no
  evaluator reads the world);
- `verify_trial`: verify-scenarios' proof that a scenario manifests and recovers (and that its reference solution
  passes where it has one), no agent;
- `replay_trial`: an agent on a frozen incident (`replay_host` deploys the snapshot as the environment);
- `recording_trial`: a live trial cut at handover for the snapshot step (orchestrator/harness/record.py).
"""

from __future__ import annotations

import json
import shutil
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from orchestrator import store
from orchestrator.lifecycle import FORWARD, Run, as_json, failure_status
from orchestrator.progress import Progress
from orchestrator.run_vars import environment_vars, new_run_id, run_state, trial_vars
from orchestrator.spec import Scenario

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
# A recording: the live trial up to handover, where the snapshot step takes the agent's place.
RECORD_FORWARD = ["baseline", "inject", "manifestation", "handover"]
CHECK_AFTER = ["collect", "evaluate"]
"""With `snapshot record --check`: the live trial's steps after the snapshot (the agent ran before it)."""
SNAPSHOT_ROLE = "env_snapshot"
WORLD_EVALUATORS = frozenset({"evaluate_mitigation", "evaluate_cost", "evaluate_ciso", "evaluate_ciso_kyverno",
                              "evaluate_workspace"})
"""Evaluator roles that read the live environment (Prometheus, the cluster, the CIS target host the agent's fetcher
runs against, the workspace tree that is rebuilt): while one of them is still to run, the faults stay in. Any other
evaluator scores only files (the agent's output, its trajectory, the ground truth), so a trial on a kept environment
removes its faults while the agent is scored (`agent_trial`).
tests/unit/test_lifecycle_overlap.py fails when an evaluator role reads the world without being listed here."""
LIVE_ONLY_KINDS = frozenset({"mitigate", "fix", "write-tests"})
"""Task kinds that need the live world (a mitigation, a cost mitigation, is scored by what it changed; a DevOps fix
or tests by building and testing the agent's workspace tree)."""


# -- creating runs on a host ---------------------------------------------------------------
def trial_on(host: Run, scn: Scenario, agent: str | None, tool_profile: str = "full",
             visible_since: float | None = None, purpose: str | None = None) -> Run:
    """A run of `scn` on `host`'s deployed environment: recorded as a run of its own (own id, phases, run.json
    and artifacts under ``<host dir>/trials/<id>``), while its playbooks see the host's run id and directory,
    which is where the environment, its faults' state and the per-run files of the roles live.
    `visible_since`: when the previous trial left the environment back at baseline; the agent's gateway
    shows no telemetry from before it. `purpose`: as for `Run.create`; by default the host's."""
    purpose = store.check_purpose(purpose or host.state.get("purpose", store.AGENT))
    run_id = new_run_id()
    record_dir = host.run_dir / "trials" / run_id
    record_dir.mkdir(parents=True)
    state = run_state(scn, run_id, host.run_dir, agent=agent, purpose=purpose,
                      keep=True,  # the host owns the environment
                      tool_profile=tool_profile, common=dict(host.state["common"]),
                      environment=host.state["vars"]["environment"])
    state.update({"host": host.id, "record_dir": str(record_dir), "steps_dir": str(record_dir / "steps"),
                  "visible_since": round(visible_since, 3) if visible_since is not None else None})
    store.create_run({**state, "run_dir": str(record_dir)})
    store.write_run_json(record_dir, state)
    trial = Run(state, host.progress)
    trial.interrupts = host.interrupts
    return trial


def replay_host(scn: Scenario, snapshot: Path, snapshot_id: str, progress: Progress | None = None,
                purpose: str = store.AGENT) -> Run:
    """A run whose environment is the frozen incident in `snapshot` (roles/env_snapshot instead of the scenario's
    environment role): deployed once, replay trials run on it (`replay_trial_on`), torn down at the end (which
    stops its frozen Prometheus, also from `opsbench cleanup` after a SIGKILL)."""
    host = Run.create(scn, agent=None, keep=False, progress=progress, purpose=purpose)
    host.state["vars"]["environment"] = environment_vars(SNAPSHOT_ROLE, {"path": str(snapshot), "scenario": scn.id})
    tag_replay(host, snapshot_id)
    return host


def replay_trial_on(host: Run, scn: Scenario, agent: str | None, tool_profile: str = "full") -> Run:
    """A replay trial on `host` (see `replay_host`), recorded as a run of its own with mode ``replay``."""
    trial = trial_on(host, scn, agent, tool_profile)
    tag_replay(trial, str(host.state["snapshot_id"]))
    return trial


def tag_replay(run: Run, snapshot_id: str) -> None:
    run.state["mode"], run.state["snapshot_id"] = store.REPLAY, snapshot_id
    run.save()
    store.update_run(run.id, mode=store.REPLAY, snapshot_id=snapshot_id)


def _finalize(trial: Run) -> None:
    """A trial's last words: its per-run files into its own directory, run.json and the store's outcome."""
    trial.archive()
    trial.save()
    store.update_run(trial.id, status=trial.state["status"], outcome=as_json(trial.summary()))


# -- campaign trials ----------------------------------------------------------------------
def agent_trial(trial: Run, healthy: bool = False) -> dict[str, Any]:
    """The run's forward steps without deploy (and without baseline when the host says the environment was
    just proven healthy), then revoke, remove, recovery and the leftover check; never teardown. The per-run
    files the roles wrote into the host's directory are moved into this run's own directory at the end."""
    forward = [s for s in FORWARD if s != "deploy" and not (healthy and s == "baseline")]
    total = len(forward) + 4
    try:
        if restores_early(trial):
            # Once the agent is done the faults can go while the agent is scored: `finish` (collect, evaluate,
            # revoke in one playbook) runs beside remove, then recovery beside the leftover check.
            head = forward[:forward.index("agent") + 1]
            total = len(head) + 4
            trial.forward(head, total)
            if trial.state["status"] == "completed":
                restorer = threading.Thread(target=restore, args=(trial, len(head) + 2, total),
                                            name=f"restore-{trial.id}", daemon=True)
                restorer.start()
                try:
                    trial.forward(["finish"], total, first_index=len(head) + 1)
                finally:
                    restorer.join()
        else:
            trial.forward(forward, total)
        trial.cleanup(first_index=total - 3, total=total)
        if "leftovers" not in trial.state and ("remove" in trial.state["done"]
                                               or "inject" not in trial.state["started"]):
            check_leftovers(trial, total, total)
    finally:
        _finalize(trial)
    return trial.summary()


def restores_early(run: Run) -> bool:
    """Whether this trial's faults may be removed while its agent is scored: no evaluator reads the world."""
    return not {e["role"] for e in run.state["vars"]["evaluators"]} & WORLD_EVALUATORS


def restore(run: Run, index: int, total: int) -> None:
    """remove, then recovery beside the leftover check (both only look; neither changes what the other sees).
    Runs beside `finish`; what fails here is owed and `cleanup` finishes it (remove is retried, recovery
    runs only after a removal that succeeded)."""
    if run.step("remove", index, total, cleanup=True).status != "successful":
        return
    leftovers = threading.Thread(target=check_leftovers, args=(run, index + 2, total),
                                 name=f"leftovers-{run.id}", daemon=True)
    leftovers.start()
    try:
        run.step("recovery", index + 1, total, cleanup=True)
    finally:
        leftovers.join()


def check_leftovers(run: Run, index: int, total: int) -> None:
    """The `pristine` step: what the faults left behind, into the state as `leftovers`."""
    pristine = run.step("pristine", index, total, cleanup=True)
    with run.lock:
        run.state["leftovers"] = pristine.stats.get("leftovers", []) if pristine.ok else ["leftover check failed"]


# -- replay trials ------------------------------------------------------------------------
def replay_trial(trial: Run) -> dict[str, Any]:
    """handover -> agent -> finish (collect, evaluate, revoke), and revoke on its own when `finish` did not get
    to it; never deploy, inject, remove or teardown (the host owns the frozen environment). Per-run files are
    moved into this run's own directory at the end."""
    total = len(REPLAY_FORWARD)
    try:
        trial.forward(list(REPLAY_FORWARD), total)
        trial.cleanup(first_index=total, total=total)
    finally:
        _finalize(trial)
    return trial.summary()


# -- verify-scenarios trials --------------------------------------------------------------
def use_scenario(run: Run, scn: Scenario) -> None:
    """Point the run's fault and check steps at another scenario of the same environment."""
    run.state["vars"].update(trial_vars(scn))
    run.state["scenario_id"] = scn.id
    trial_steps = set(TRIAL_FORWARD + TRIAL_CLEANUP + REFERENCE_STEPS)
    run.state["started"] = [s for s in run.state["started"] if s not in trial_steps]
    run.state["done"] = [s for s in run.state["done"] if s not in trial_steps]
    for step in trial_steps:
        run.state["results"].pop(step, None)
    run.save()


def verify_trial(run: Run, scn: Scenario, idempotency: bool = False, healthy: bool = False) -> dict[str, Any]:
    """baseline -> inject -> manifestation, then always remove -> recovery and pristine (at the same time).

    The environment must be deployed (and stays up). Returns each step's result; the
    run's interrupt flag stops the forward steps, never the clean-up ones. With
    ``idempotency`` the faults are first removed without having been injected (must be a
    no-op) and then injected twice (must equal once); recovery and the leftover check
    after the single removal prove both. ``healthy`` says the previous trial on this
    environment just passed its recovery checks and leftover check, which are the
    baseline checks: the baseline step is then skipped."""
    use_scenario(run, scn)
    forward = (["remove", "baseline", "inject", "inject", "manifestation"] if idempotency
               else list(TRIAL_FORWARD))
    if healthy:
        forward.remove("baseline")
    proving = len(REFERENCE_STEPS) if scn.reference else 0
    total = len(forward) + proving + len(TRIAL_CLEANUP)
    outcome, reason = "passed", ""
    for index, step in enumerate(forward, 1):
        if run.interrupted():
            outcome, reason = "interrupted", f"interrupted before {step}"
            break
        result = run.step(step, index, total)
        if result.status != "successful":
            outcome, reason = failure_status(step, result)
            break
        if step == "remove":  # the no-op removal must not count as the trial's removal
            run.state["done"] = [s for s in run.state["done"] if s != "remove"]
            run.state["started"] = [s for s in run.state["started"] if s != "remove"]
    if outcome == "passed" and scn.reference and not run.interrupted():
        outcome, reason = _prove_reference(run, len(forward) + 1, total)
    if "inject" in run.state["started"]:
        restore(run, len(forward) + proving + 1, total)
    if "pristine" not in run.state["results"]:  # the removal failed, or nothing was injected
        check_leftovers(run, total, total)
    for step in TRIAL_CLEANUP:
        res = run.state["results"].get(step)
        if res and res["status"] != "successful" and outcome == "passed":
            outcome, reason = "failed", f"{step} {res['status']}: {'; '.join(res['failures'])[:500]}"
    leftovers = run.state["results"].get("pristine", {}).get("stats", {}).get("leftovers", [])
    if leftovers and outcome == "passed":
        outcome, reason = "failed", "leftovers: " + "; ".join(leftovers)[:500]
    return {"outcome": outcome, "reason": reason, "leftovers": leftovers,
            "results": {k: v for k, v in run.state["results"].items()
                        if k in TRIAL_FORWARD + TRIAL_CLEANUP + REFERENCE_STEPS}}


def _prove_reference(run: Run, index: int, total: int) -> tuple[str, str]:
    """The incident untouched must fail its evaluation; with the reference solution applied it must pass.
    Returns the trial's (outcome, reason). Earlier trials' answers and scores on this environment go first."""
    for name in ("artifacts", "evaluation", "agent"):
        shutil.rmtree(run.run_dir / name, ignore_errors=True)
    verdicts: dict[str, bool | None] = {}
    for offset, step in enumerate(REFERENCE_STEPS):
        result = run.step(step, index + offset, total)
        if result.status != "successful":
            return failure_status(step, result)
        if step != "solve":
            verdicts[step] = decided_pass(result.stats.get("evaluations", {}))
    if verdicts["evaluate_untouched"] is not False:
        return "failed", ("the untouched incident is not scored as a failure "
                          f"({'passed' if verdicts['evaluate_untouched'] else 'no deciding score'}): "
                          "an agent that does nothing would pass")
    if verdicts["evaluate_reference"] is not True:
        detail = json.dumps(run.state["results"]["evaluate_reference"]["stats"].get("evaluations", {}))[:400]
        return "failed", f"the reference solution does not pass: {detail}"
    return "passed", ""


def decided_pass(evaluations: dict[str, Any]) -> bool | None:
    """Whether the deciding evaluator (results.DECIDERS) says pass; None when none of them scored."""
    from orchestrator.results import DECIDERS
    for evaluator, key in DECIDERS:
        if isinstance(evaluations.get(evaluator), dict):
            return bool(evaluations[evaluator].get(key) == 1)
    return None


# -- recordings ---------------------------------------------------------------------------
def recording_trial(trial: Run, snapshot: Callable[[int, int], None], *, healthy: bool,
                    live_trial: bool = False) -> dict[str, Any]:
    """The forward steps up to handover (no baseline when the host just proved it healthy), then `snapshot` (the
    caller's snapshot step, given its index and the total), then revoke, remove, recovery and the leftover check.
    `live_trial` (`snapshot record --check`): the run's agent runs right after handover, before the snapshot (whose
    frozen now stays the handover), and the trial is collected and evaluated after it, as a live run is."""
    forward = [s for s in RECORD_FORWARD if not (healthy and s == "baseline")] + (["agent"] if live_trial else [])
    after = CHECK_AFTER if live_trial else []
    total = len(forward) + len(after) + 5
    try:
        try:
            trial.forward(forward, total)
            if trial.state["status"] == "completed":
                snapshot(len(forward) + 1, total)
            if after and trial.state["status"] == "completed":
                trial.forward(after, total, first_index=len(forward) + 2)
        finally:  # whatever the snapshot step raised, the faults come out and the token is revoked
            trial.cleanup(first_index=len(forward) + len(after) + 2, total=total)
            if "remove" in trial.state["done"] or "inject" not in trial.state["started"]:
                check_leftovers(trial, total, total)
    finally:
        _finalize(trial)
    return trial.summary()
