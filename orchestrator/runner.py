"""One lifecycle step = one ansible-runner invocation with its own private data dir.

Secrets never reach the artifacts: ansible-runner records the child's whole environment
in ``artifacts/<id>/command``, so the child gets an allow-listed environment (the
orchestrator's own environment, which may hold API keys, is not inherited), env files are
suppressed, and secrets travel only as paths to 0600 files, never as extra vars.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ptyprocess

from orchestrator import paths

EventHandler = Callable[[dict[str, Any]], None]

# Variables the playbook process may inherit; everything else is dropped.
_ENV_ALLOW = {"PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TERM", "TZ", "USER", "LOGNAME",
              "CONTAINERS_CONF", "CONTAINERS_STORAGE_CONF", "KUBECONFIG", "OPSBENCH_HOME",
              # The optional LLM judge's configuration; the key itself travels as a file path.
              "OPSBENCH_JUDGE_URL", "OPSBENCH_JUDGE_MODEL", "OPSBENCH_JUDGE_API_KEY_ENV",
              "OPSBENCH_JUDGE_API_KEY_FILE"}
_ENV_ALLOW_PREFIXES = ("ANSIBLE_", "AWX_", "RUNNER_")
# ANSIBLE_* keys that can carry secrets are dropped even though they match the prefix.
_ENV_DENY = {"ANSIBLE_VAULT_PASSWORD", "ANSIBLE_BECOME_PASS", "ANSIBLE_NET_PASSWORD"}


@dataclass
class StepResult:
    step: str
    status: str  # successful | failed | timeout | canceled | error
    rc: int
    elapsed: float
    stats: dict[str, Any] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    artifact_dir: Path | None = None
    timing: dict[str, float] = field(default_factory=dict)
    """Where the step's time went (seconds): `startup` from the step's start to the playbook's first event (process
    start, Ansible's imports, inventory and playbook loading), `work` from there to the play recap (the tasks),
    `exit` from the recap to the step's end (Ansible's exit, ansible-runner's artifacts)."""

    @property
    def ok(self) -> bool:
        return self.status == "successful"


def ansible_env() -> dict[str, str]:
    """Environment for every Ansible child: our config, our home and temp dirs, the venv first on PATH."""
    home = paths.ansible_home()
    venv_bin = str(Path(sys.executable).parent)
    path = os.environ.get("PATH", "/usr/bin:/bin")
    env = {
        "PATH": venv_bin + os.pathsep + path if venv_bin not in path.split(os.pathsep) else path,
        "ANSIBLE_CONFIG": str(paths.ANSIBLE_CFG),
        "ANSIBLE_HOME": str(home),
        "ANSIBLE_LOCAL_TEMP": str(home / "tmp"),
        "ANSIBLE_REMOTE_TEMP": str(home / "tmp"),
        "ANSIBLE_FORCE_COLOR": "0",
        "ANSIBLE_NOCOLOR": "1",
        "OPSBENCH_HOME": str(paths.state_dir()),
    }
    # Only once `make setup` wrote them: podman refuses to start when CONTAINERS_CONF names a
    # missing file, and the roles' own "images not built" errors are clearer.
    for var, name in (("CONTAINERS_CONF", "containers.conf"), ("CONTAINERS_STORAGE_CONF", "storage.conf")):
        if (paths.containers_conf_dir() / name).is_file():
            env[var] = str(paths.containers_conf_dir() / name)
    return env


def scrub_env(env: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in env.items()
            if (k in _ENV_ALLOW or k.startswith(_ENV_ALLOW_PREFIXES)) and k not in _ENV_DENY}


def _dead(pid: int) -> bool:
    """True once ``pid`` has exited (a zombie counts as exited: its parent reaps it later)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[-1].split()[0] == "Z"


def terminate_playbook(pid: int, grace: float = 15.0) -> None:
    """Stop an ansible-playbook process and everything it started.

    ansible-core >= 2.19 runs each worker in its own session (os.setsid), so killing the
    playbook's process group - what ansible-runner does on cancel or timeout - leaves the
    workers and their modules running. ansible-playbook's SIGTERM handler does kill the
    worker sessions, so send SIGTERM first and SIGKILL only if it does not exit in time.
    """
    try:
        pgid = os.getpgid(pid)
        os.killpg(pgid, signal.SIGTERM)
    except OSError:
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and not _dead(pid):
        time.sleep(0.1)
    with contextlib.suppress(OSError):
        os.killpg(pgid, signal.SIGKILL)


_PTY_CLOSE = ptyprocess.PtyProcess.close


def _handle_termination(cls: Any, pid: int, pidfile: str | None = None) -> None:
    terminate_playbook(pid)
    if pidfile:
        with contextlib.suppress(OSError):
            os.remove(pidfile)


def _result_text(res: dict[str, Any]) -> str:
    parts = [str(res[k]).strip() for k in ("msg", "stderr", "reason") if res.get(k)]
    if res.get("cmd"):
        cmd = res["cmd"]
        parts.append("command: " + (" ".join(map(str, cmd)) if isinstance(cmd, list) else str(cmd)))
    return " | ".join(parts) or "failed"


def failure_text(event: dict[str, Any]) -> str | None:
    if event.get("event") not in ("runner_on_failed", "runner_on_unreachable"):
        return None
    data = event.get("event_data", {})
    if data.get("ignore_errors"):
        return None
    res = data.get("res", {})
    # A failed loop says only "One or more items failed": report the failed items instead.
    failed_items = [r for r in res.get("results", []) if isinstance(r, dict) and r.get("failed")]
    texts = [_result_text(r) for r in failed_items] if failed_items else [_result_text(res)]
    msg = " | ".join(dict.fromkeys(texts))  # the same message from many items once
    return f"task '{data.get('task', '?')}' on {data.get('host', '?')}: {str(msg).strip()[:500]}"


def close_reaped(self: Any, force: bool = True) -> None:
    """ptyprocess's close() sleeps 0.1 s "to give the kernel time to update process status" before it checks the
    child. ansible-runner closes the pty only once the playbook has exited and been reaped (`terminated`), so for
    us that sleep is 0.1 s of every step for nothing (a twentieth of a short check step): skip it then, and keep it
    for a child that may still be running."""
    if self.terminated:
        self.delayafterclose = 0
    _PTY_CLOSE(self, force)


def run_playbook(
    step: str,
    playbook: str,
    extravars: dict[str, Any],
    private_data_dir: Path,
    *,
    job_timeout: int | None = None,
    idle_timeout: int | None = None,
    cancel: Callable[[], bool] | None = None,
    on_event: EventHandler | None = None,
    on_pid: Callable[[int], None] | None = None,
) -> StepResult:
    """Run ``playbooks/<playbook>`` once and return its status, failures and set_stats data."""
    import ansible_runner
    import ansible_runner.runner
    from ansible_runner.config.runner import RunnerConfig

    # Runner calls Runner.handle_termination by class name, so patch it there (see above).
    ansible_runner.runner.Runner.handle_termination = classmethod(_handle_termination)
    ptyprocess.PtyProcess.close = close_reaped

    private_data_dir.mkdir(parents=True, exist_ok=True)
    stats: dict[str, Any] = {}
    failures: list[str] = []

    pid_seen: list[int] = []
    marks: dict[str, float] = {}

    def handle(event: dict[str, Any]) -> bool:
        kind = event.get("event")
        if kind in ("playbook_on_start", "playbook_on_stats") and kind not in marks:
            marks[kind] = _created(event)
        pid = event.get("pid")
        if on_pid and isinstance(pid, int) and not pid_seen:
            pid_seen.append(pid)
            on_pid(pid)
        if event.get("event") == "playbook_on_stats":
            stats.update(event.get("event_data", {}).get("artifact_data") or {})
        text = failure_text(event)
        if text:
            failures.append(text)
        if on_event:
            on_event(event)
        return True

    rc_config = RunnerConfig(
        private_data_dir=str(private_data_dir),
        project_dir=str(paths.PLAYBOOKS_DIR),
        playbook=str(paths.PLAYBOOKS_DIR / playbook),
        inventory=str(paths.INVENTORY),
        extravars=extravars,
        envvars=ansible_env(),
        ident=step,
        quiet=True,
        suppress_env_files=True,
        timeout=job_timeout,
        settings={"idle_timeout": idle_timeout, "pexpect_timeout": 1},
        rotate_artifacts=1,
    )
    rc_config.prepare()
    # An inherited PYTHONPATH is dropped; ours makes the modules, the gateway and the helpers the roles start
    # import this checkout's orchestrator, whatever the venv has installed (e.g. another worktree's).
    rc_config.env = {**scrub_env(rc_config.env), "PYTHONPATH": str(paths.PROJECT_ROOT)}
    runner = ansible_runner.Runner(
        rc_config,
        event_handler=handle,
        cancel_callback=cancel or (lambda: False),
    )
    start, start_wall = time.monotonic(), time.time()
    try:
        runner.run()
    except Exception as exc:  # runner raises for an unstartable command
        return StepResult(step, "error", -1, time.monotonic() - start,
                          failures=[f"ansible-runner could not run {playbook}: {exc}"])
    status = str(runner.status)
    if status == "failed" and not failures:
        stdout = Path(rc_config.artifact_dir, "stdout")
        tail = stdout.read_text(errors="replace").strip().splitlines()[-5:] if stdout.is_file() else []
        failures.append(" | ".join(tail) or f"ansible-playbook exited with rc={runner.rc}")
    elapsed = time.monotonic() - start
    return StepResult(step, status, int(runner.rc if runner.rc is not None else -1),
                      elapsed, stats.get("opsbench", {}) if stats else {},
                      failures, Path(rc_config.artifact_dir), play_timing(start_wall, elapsed, marks))


def _created(event: dict[str, Any]) -> float:
    """When the callback in the playbook process made the event (Unix seconds); when it says nothing, now."""
    from datetime import UTC, datetime

    try:
        created = datetime.fromisoformat(str(event.get("created", "")))
    except ValueError:
        return time.time()
    return (created if created.tzinfo else created.replace(tzinfo=UTC)).timestamp()


def play_timing(start: float, elapsed: float, marks: dict[str, float]) -> dict[str, float]:
    """StepResult.timing from the step's start, its length and the playbook's first and last events."""
    first, recap = marks.get("playbook_on_start"), marks.get("playbook_on_stats")
    if first is None or recap is None or not start <= first <= recap:
        return {}
    end = start + elapsed
    return {"startup": round(first - start, 3), "work": round(recap - first, 3), "exit": round(max(end - recap, 0), 3)}
