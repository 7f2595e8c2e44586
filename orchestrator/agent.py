"""Running a command agent: its own process group, a budget, and logs kept with the run."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator import sandbox
from orchestrator.agents.presets.route import model_route
from orchestrator.errors import OpsBenchError


@dataclass
class AgentResult:
    status: str  # exited | crashed | timeout | interrupted | not_started
    exit_code: int | None
    elapsed: float
    detail: str = ""
    # what contained the agent (orchestrator/sandbox/: sandbox.prepare's record), or why nothing did
    isolation: dict[str, Any] = field(default_factory=dict)


# The orchestrator's own credentials: an agent must not get them (the judge's key, the agent API's key, and the
# variables that name where those keys live). The agent's own (OPSBENCH_LLM_*) stay: the LLM agent needs its key.
ORCHESTRATOR_SECRETS = frozenset({"OPSBENCH_JUDGE_API_KEY", "OPSBENCH_JUDGE_API_KEY_FILE", "OPSBENCH_AGENT_API_KEY",
                                  "OPSBENCH_AGENT_API_KEY_FILE"})


def agent_environ(environ: Mapping[str, str], extra: Mapping[str, str], hide: Iterable[str] = ()) -> dict[str, str]:
    """The environment a command agent gets: the caller's, less the orchestrator's own secrets and ``hide``, plus
    ``extra``."""
    hidden = set(ORCHESTRATOR_SECRETS) | set(hide)
    judge_key_env = environ.get("OPSBENCH_JUDGE_API_KEY_ENV")  # the judge may read its key from another variable
    if judge_key_env and not judge_key_env.startswith("OPSBENCH_LLM_"):
        hidden.add(judge_key_env)
    return {**{k: v for k, v in environ.items() if k not in hidden}, **extra}


def kill_group(pid: int, grace: float = 5.0) -> None:
    """SIGTERM the agent's process group, then SIGKILL whatever is left after ``grace`` s."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 0.0)):
        try:
            os.killpg(pid, sig)
        except (ProcessLookupError, PermissionError):
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                os.killpg(pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.1)


def run_agent(
    command: str,
    agent_dir: Path,
    env: dict[str, str],
    budget_seconds: int,
    interrupted: Callable[[], bool],
    on_start: Callable[[int], None],
    secret_files: Iterable[Path] = (),
    sandbox_environ: Mapping[str, str] | None = None,
    hide: Iterable[str] = (),
) -> AgentResult:
    """Run ``command`` through /bin/sh in ``agent_dir/workspace`` (contained: orchestrator/sandbox/) until it
    exits or the budget ends. ``secret_files``: files the agent must not read wherever they are;
    ``sandbox_environ``: the settings the sandbox reads, when not the process's; ``hide``: variables kept from it."""
    try:
        prepared = sandbox.prepare(command, agent_dir, os.environ if sandbox_environ is None else sandbox_environ,
                                   secret_files)
    except (sandbox.SandboxUnavailable, ValueError) as exc:
        return AgentResult("not_started", None, 0.0, str(exc), isolation={"sandbox": "none", "reason": str(exc)})
    try:
        result = _supervise(prepared, agent_dir, prepared.environ(agent_environ(os.environ, env, hide)),
                            budget_seconds, interrupted, on_start)
    finally:
        prepared.close()
    result.isolation = prepared.isolation
    if (result.status == "crashed" and prepared.isolation.get("sandbox") == "namespaces"
            and "No such file or directory" in result.detail):
        result.detail += (" (the agent sandbox hides the project tree and the state directory but for the agent's "
                          "own files: OPSBENCH_AGENT_VISIBLE=path:path shows more, see docs/agents.md)")
    return result


def run_command_agent(command: str, agent_dir: Path, run_id: str, budget_seconds: int,
                      interrupted: Callable[[], bool], on_start: Callable[[int], None],
                      secret_files: Iterable[Path] = ()) -> AgentResult:
    """A run's agent step: `command` with the manifest of `agent_dir` (the handover wrote it) and the OPSBENCH_*
    variables that name its files, contained and within the budget. Past the budget nothing counts: a late
    output.json is kept aside as output.late.json and the run scores no submission. A preset's model traffic goes
    through the recording proxy (orchestrator/agents/presets/route.py) for as long as the agent runs."""
    env = {"OPSBENCH_MANIFEST": str(agent_dir / "manifest.json"), "OPSBENCH_OUTPUT": str(agent_dir / "output.json"),
           "OPSBENCH_TRAJECTORY": str(agent_dir / "trajectory.jsonl"), "OPSBENCH_RUN_ID": run_id}
    with contextlib.ExitStack() as stack:
        try:
            route = stack.enter_context(model_route(command, agent_dir, os.environ))
        except (OpsBenchError, ValueError) as exc:
            return AgentResult("not_started", None, 0.0, str(exc), isolation={"sandbox": "none", "reason": str(exc)})
        result = run_agent(command, agent_dir, {**env, **route.env}, budget_seconds, interrupted, on_start,
                           secret_files, route.sandbox_environ, route.hide)
        if route.proxy is not None:
            result.isolation["model_proxy"] = route.record()
    if result.status in ("timeout", "interrupted") and (agent_dir / "output.json").exists():
        (agent_dir / "output.json").replace(agent_dir / "output.late.json")
    return result


def _supervise(
    prepared: sandbox.Prepared,
    agent_dir: Path,
    env: dict[str, str],
    budget_seconds: int,
    interrupted: Callable[[], bool],
    on_start: Callable[[int], None],
) -> AgentResult:
    stdout = (agent_dir / "stdout.log").open("wb")
    stderr = (agent_dir / "stderr.log").open("wb")
    start = time.monotonic()
    try:
        proc = subprocess.Popen(
            prepared.argv, cwd=agent_dir / "workspace", env=env,
            stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr, start_new_session=True,
        )
    except OSError as exc:
        return AgentResult("not_started", None, 0.0, f"could not start {prepared.argv[0]}: {exc}")
    finally:
        stdout.close()
        stderr.close()
    on_start(proc.pid)
    try:
        prepared.started(proc.pid)
    except RuntimeError as exc:
        kill_group(proc.pid, grace=0.0)
        proc.wait()
        return AgentResult("not_started", None, time.monotonic() - start, f"the agent sandbox's network: {exc}")
    deadline = start + budget_seconds
    while True:
        code = proc.poll()
        if code is not None:
            break
        if interrupted() or time.monotonic() > deadline:
            kill_group(proc.pid)
            proc.wait()
            status = "interrupted" if interrupted() else "timeout"
            detail = "stopped by the user" if status == "interrupted" else \
                f"still running after its budget of {budget_seconds}s; stopped"
            return AgentResult(status, None, time.monotonic() - start, detail)
        time.sleep(0.1)
    kill_group(proc.pid, grace=1.0)  # leftovers the agent started in the background
    elapsed = time.monotonic() - start
    if code == 0:
        return AgentResult("exited", 0, elapsed)
    tail = (agent_dir / "stderr.log").read_text(errors="replace").strip().splitlines()[-3:]
    if code == 125 and tail and tail[-1].startswith(sandbox.SETUP_FAILED):
        return AgentResult("not_started", None, elapsed, f"the agent sandbox could not be set up: {' | '.join(tail)}")
    hint = " (command not found: check the --agent command)" if code == 127 else ""
    return AgentResult("crashed", code, elapsed,
                       f"agent exited with code {code}{hint}: {' | '.join(tail) or 'no stderr'}")
