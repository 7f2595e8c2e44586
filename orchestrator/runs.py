"""One run as the command line starts it, and the runs on record as it finishes them.

The library behind ``opsbench run``, ``show`` and ``cleanup``: resolving the scenario and the agent (a command or a
remote agent behind the agent API), recording a run stopped by a full disk, finding the runs whose orchestrator
is gone and finishing their clean-up.
"""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from orchestrator import store
from orchestrator.agent_api import AgentAPI
from orchestrator.errors import OpsBenchError
from orchestrator.lifecycle import Run
from orchestrator.progress import Progress

EXIT_CODES = {"completed": 0, "invalid": 3, "error": 4, "timeout": 4, "interrupted": 130}
"""Process exit status of ``opsbench run`` by run status (5: completed, but clean-up did not finish)."""


def remote_agent_api(port: int) -> AgentAPI:
    """Start the agent API for a remote agent with the operator's key (env var or key file)."""
    key = os.environ.get("OPSBENCH_AGENT_API_KEY", "")
    key_file = os.environ.get("OPSBENCH_AGENT_API_KEY_FILE")
    if not key and key_file:
        try:
            key = Path(key_file).read_text().strip()
        except OSError as exc:
            raise OpsBenchError(f"cannot read OPSBENCH_AGENT_API_KEY_FILE {key_file}: {exc.strerror}") from exc
    if len(key) < 16:
        raise OpsBenchError("--remote-agent needs a key of 16+ characters in OPSBENCH_AGENT_API_KEY "
                            "(or OPSBENCH_AGENT_API_KEY_FILE); the remote agent sends it as a bearer token")
    try:
        api = AgentAPI(key, port=port)
    except OSError as exc:
        raise OpsBenchError(f"cannot serve the agent API on port {port}: {exc.strerror}") from exc
    return api.__enter__()


def run_scenario(scenario: str, agent: str | None, *, keep: bool, tool_profile: str, remote_port: int | None,
                 backend: str | None, progress: Progress, echo: Callable[[str], None]) -> dict[str, Any]:
    """Run SCENARIO end to end and return the run's summary; ``echo`` gets the lines an operator wants to see
    before the run starts (its id and state dir, the agent API's address)."""
    from orchestrator.catalog import find_scenario

    scn = find_scenario(scenario)
    if backend is not None and backend != scn.backend:
        raise OpsBenchError(f"scenario {scn.id} runs on the {scn.backend} backend, not {backend} "
                            f"(environment.backend in {scn.path}); its kubernetes counterparts are listed by "
                            "`opsbench list` with ids k8s-*")
    remote = None
    if remote_port is not None:
        if agent:
            raise OpsBenchError("give either --agent or --remote-agent, not both")
        remote = remote_agent_api(remote_port)
        agent = f"remote agent via {remote.url}"
    the_run = Run.create(scn, agent, keep=keep, progress=progress, tool_profile=tool_profile)
    the_run.remote = remote
    echo(f"run {the_run.id}: scenario {scn.id} (state in {the_run.run_dir})")
    if remote is not None:
        echo(f"agent API at {remote.url}: the manifest is served at /v1/manifest once the incident is handed over")
    try:
        summary: dict[str, Any] = the_run.execute()
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        record_full_disk(the_run, exc)
    finally:
        if remote is not None:
            remote.close()
    return summary


def exit_code(summary: dict[str, Any]) -> int:
    """The exit status for a run's summary (see EXIT_CODES)."""
    code = EXIT_CODES.get(summary["status"], 4)
    if code == 0 and summary["cleanup"] != "done":
        code = 5
    return code


def record_full_disk(the_run: Run, exc: OSError) -> NoReturn:
    """The state dir filled up mid-run: record the run as errored with the cause (best effort: the disk is full)
    and stop with a message saying how to finish it. Never an agent failure."""
    reason = (f"the state dir is full ({exc.strerror}: {exc.filename or 'a state file'}); free space, then run "
              "`opsbench cleanup` to finish the run's clean-up")
    the_run.state["status"], the_run.state["reason"] = "error", reason
    try:
        store.update_run(the_run.id, status="error", outcome=json.dumps(the_run.summary()))
    except Exception as db_exc:  # the index may sit on the same full disk
        reason += f" (not recorded in the index either: {db_exc})"
    raise OpsBenchError(f"run {the_run.id} stopped: {reason}") from None


def load_run(run_id: str) -> dict[str, Any]:
    """A recorded run with its phases and its outcome decoded (``opsbench show``)."""
    run = store.get_run(run_id)
    if run is None:
        raise OpsBenchError(f"no run '{run_id}' (see `opsbench runs`)")
    run["outcome"] = json.loads(run["outcome"]) if run.get("outcome") else None
    return run


def alive(pid: Any) -> bool:
    """Whether a process with this pid exists (one we may not signal counts)."""
    if not pid:
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def orphaned(row: dict[str, Any], teardown: bool = False) -> bool:
    """A run whose orchestrator is gone and that still owes clean-up steps."""
    if row["status"] == "running" and alive(row["pid"]):
        return False
    try:
        the_run = Run.load(row["id"])
        if teardown:
            the_run.state["keep"] = False
        return bool(the_run.pending_cleanup())
    except (OpsBenchError, OSError, ValueError):
        return False


def cleanup_runs(run_ids: list[str], teardown: bool, progress: Callable[[], Progress]) -> list[dict[str, Any]]:
    """Finish the owed undo steps of these runs (default: every orphaned run); one result per run: the steps
    run, the clean-up status and its problems. A run whose orchestrator still lives is refused. ``progress``
    makes each run's progress reporter."""
    ids = run_ids or [r["id"] for r in store.list_runs(limit=10_000) if orphaned(r, teardown)]
    results = []
    for run_id in ids:
        the_run = Run.load(run_id, progress())
        if the_run.state["status"] == "running":
            if alive(the_run.state.get("pid")):
                raise OpsBenchError(f"run {run_id} is still running (pid {the_run.state['pid']})")
            the_run.state["status"] = "interrupted"
            the_run.state["reason"] = "orchestrator died mid-run; finished by `opsbench cleanup`"
        elif "cleanup" not in the_run.state and not alive(the_run.state.get("pid")):
            # Killed during its own clean-up: the forward outcome stands; record where clean-up was cut short.
            unfinished = [s for s in the_run.state["started"] if s not in the_run.state["done"]]
            the_run.state["cleanup_interrupted"] = unfinished[-1] if unfinished else "between steps"
        if teardown:
            the_run.state["keep"] = False
        pending = the_run.pending_cleanup()
        the_run.cleanup()
        results.append({"run_id": run_id, "steps": pending, "cleanup": the_run.state["cleanup"],
                        "problems": the_run.state["cleanup_problems"]})
    return results
