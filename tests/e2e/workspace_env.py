"""A deployed DevOps workspace environment (roles/env_workspace) for end-to-end tests that drive its playbooks
directly: deployed the way the orchestrator deploys it (playbooks/deploy.yml through ansible-runner with the role's
resolved arguments), commands run in it the way the gateway's terminal runs them, torn down at the end."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest

from orchestrator.argspecs import resolve_role_vars
from orchestrator.ports import free_port_base
from orchestrator.runner import StepResult, ansible_env, run_playbook
from orchestrator.spec import environment_role

ROLE = environment_role("workspace")
IMAGE = "localhost/opsbench-workspace:current"
PODMAN_ENV = {**os.environ, **{k: v for k, v in ansible_env().items() if k.startswith("CONTAINERS_")}}


def image_exists() -> bool:
    if shutil.which("podman") is None:
        return False
    proc = subprocess.run(["podman", "image", "exists", IMAGE], env=PODMAN_ENV, capture_output=True, check=False)
    return proc.returncode == 0


NEEDS_WORKSPACE = pytest.mark.skipif(os.geteuid() != 0 or not image_exists(),
                                     reason=f"needs root and the image {IMAGE} (make images)")


def podman(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["podman", *args], env=PODMAN_ENV, capture_output=True, text=True, timeout=timeout,
                          check=False)


@dataclass
class Workspace:
    run_id: str
    run_dir: Path
    work: Path
    extravars: dict[str, Any]
    deploy: StepResult
    environment: dict[str, Any]
    torn_down: list[StepResult] = field(default_factory=list)

    @property
    def container(self) -> str:
        return str(self.environment["workspace"]["container"])

    def step(self, playbook: str, *, changed: list[str] | None = None, timeout: int = 300,
             **extra: Any) -> StepResult:
        """`playbook` with the deployment's variables (and `extra`); `changed` collects the tasks that changed."""
        def on_event(event: dict[str, Any]) -> None:
            data = event.get("event_data", {})
            if changed is not None and event.get("event") in ("runner_on_ok", "runner_item_on_ok") \
                    and data.get("res", {}).get("changed"):
                changed.append(str(data.get("task", "?")))

        name = playbook.removesuffix(".yml")
        return run_playbook(name, playbook, {**self.extravars, **extra}, self.work / f"{name}-{uuid.uuid4().hex[:6]}",
                            job_timeout=timeout, on_event=on_event)

    def sh(self, script: str, *, cwd: str = "/workspace", timeout: float = 240,
           user: str = "1000:1000") -> subprocess.CompletedProcess[str]:
        """`script` in the container as the terminal tools run commands (podman exec, bash -c, as the user)."""
        return podman("exec", f"--user={user}", f"--workdir={cwd}", self.container, "bash", "-c", script,
                      timeout=timeout)

    def teardown(self) -> StepResult:
        result = self.step("teardown.yml")
        self.torn_down.append(result)
        return result


W = TypeVar("W", bound=Workspace)


@contextlib.contextmanager
def deployed(work: Path, prefix: str, cls: type[W]) -> Iterator[W]:
    """One workspace deployment under `work` (run id `<prefix>-<hex>`), torn down on leaving unless a test did."""
    run_id = f"{prefix}-{uuid.uuid4().hex[:8]}"
    run_dir = work / "run"
    run_dir.mkdir()
    extravars = {"opsbench_run_id": run_id, "opsbench_run_dir": str(run_dir), "opsbench_port_base": free_port_base(),
                 "opsbench_environment": {"name": "environment", "role": ROLE,
                                          "vars": resolve_role_vars(ROLE, "deploy", {})}}
    deploy = run_playbook("deploy", "deploy.yml", extravars, work / "deploy", job_timeout=300)
    environment = json.loads((run_dir / "environment.json").read_text()) if deploy.ok else {}
    w = cls(run_id, run_dir, work, extravars, deploy, environment)
    try:
        assert deploy.ok, f"deploy failed: {deploy.failures}"
        yield w
    finally:
        if not w.torn_down:
            w.step("teardown.yml")
