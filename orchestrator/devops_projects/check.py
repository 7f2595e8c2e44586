"""Build and test a fetched project through its check contract (`opsbench.mk`), offline, on a scratch copy, timed:
on the host's toolchains, or in the DevOps workspace image the tasks use.

The fetched tree in the cache stays pristine (task generation will copy it, as this does). `build` and `check` are
timed apart, each under the project's limit, killed with all it started when over it. In the workspace image the
copy is mounted at /workspace/<id> and the offline caches (deps/) read-only at /opt/opsbench-deps, in a container
with the workspace's own limits and no network, as evaluate_workspace runs `make check`.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import tempfile
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from orchestrator import paths
from orchestrator.devops_projects.catalogue import Project
from orchestrator.devops_projects.fetch import CONTRACT_FILE, Cache, StepFailed, private_home, run_limited
from orchestrator.evaluation.workspace import count_report

REPORT_KIND = {"go": "gotest", "java": "surefire", "python": "junit"}
WORKSPACE_IMAGE = "localhost/opsbench-workspace:current"
WORKSPACE_DEPS = "/opt/opsbench-deps"
WORKSPACE_UID = 1000
# The workspace container's limits (roles/env_workspace/defaults/main.yml).
WORKSPACE_LIMITS = ["--memory=2g", "--memory-swap=2g", "--cpus=1.5", "--pids-limit=512"]


@dataclass
class CheckResult:
    """One project's build and test at one place: times in seconds, the report's counts."""

    where: str
    built: bool
    tests_passed: bool
    build_s: float
    test_s: float
    passed: int
    failed: int
    toolchain: str = ""
    load: float = 0.0
    """The machine's 1-minute load average when the test step ended: the times are only as good as the load was
    low (2 cores, shared)."""

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def _podman_env() -> dict[str, str]:
    conf = paths.containers_conf_dir()
    env = {}
    if (conf / "containers.conf").is_file():
        env["CONTAINERS_CONF"] = str(conf / "containers.conf")
    if (conf / "storage.conf").is_file():
        env["CONTAINERS_STORAGE_CONF"] = str(conf / "storage.conf")
    return env


def _make(target: str, deps: str) -> list[str]:
    return ["make", "-s", "-f", CONTRACT_FILE, target, f"DEPS={deps}"]


def _host_env(scratch: Path) -> dict[str, str | None]:
    """A private HOME (Maven's and pip's own files) and nothing that reaches a registry (GOPROXY off; pip and Maven
    are offline by the contract). Go's build cache is the caller's own (GOCACHE, else under XDG_CACHE_HOME, which
    the Makefile points into .opsbench): a cold one rebuilds the standard library for tests first (about 2
    minutes here), which is no project's build time. Go's telemetry is off in that HOME."""
    home = private_home(scratch.parent / "home")
    gocache = os.environ.get("GOCACHE") or str(Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
                                               / "go-build")
    return {"HOME": str(home), "GOCACHE": gocache, "GOPATH": str(home / "go"), "GOPROXY": "off",
            "PIP_CONFIG_FILE": os.devnull, "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": None}


def _toolchain(language: str, run: list[str], env: Mapping[str, str | None] | None = None) -> str:
    probe = {"go": ["go", "version"], "java": ["java", "-version"], "python": ["python3", "--version"]}[language]
    full = {k: v for k, v in {**os.environ, **(env or {})}.items() if v is not None}
    proc = subprocess.run([*run, *probe], capture_output=True, text=True, env=full, check=False, timeout=120)
    return (proc.stdout + proc.stderr).strip().splitlines()[0] if proc.returncode == 0 else "unknown"


def _step(project: Project, step: str, argv: list[str], cwd: Path, timeout: int,
          env: Mapping[str, str | None] | None) -> tuple[float, str, int]:
    """(seconds, the output's last lines, exit status); a build that exits non-zero is a `StepFailed` at once (a
    test run's exit status is judged with its report)."""
    started = time.monotonic()
    proc = run_limited(argv, cwd=cwd, timeout=timeout, env=env, project=project.id, step=step)
    elapsed = round(time.monotonic() - started, 1)
    lines = [line for line in proc.stdout.strip().splitlines() if line.strip()]
    tail = " | ".join(lines[-6:])[-1500:]
    if proc.returncode != 0 and step == "build":
        raise StepFailed(project.id, step, f"`make build` exited {proc.returncode}: {tail}")
    return elapsed, tail, proc.returncode


def check_on_host(project: Project, cache: Cache) -> CheckResult:
    """`make build` then `make check` on a scratch copy with the host's go, mvn and python3."""
    with tempfile.TemporaryDirectory(prefix=f"opsbench-{project.id}-") as tmp:
        scratch = Path(tmp) / project.id
        shutil.copytree(cache.tree(project), scratch, symlinks=True)
        env = _host_env(scratch)
        build_s, _, _ = _step(project, "build", _make("build", str(cache.deps)), scratch, project.limits.build_s,
                              env)
        test_s, tail, rc = _step(project, "test", _make("check", str(cache.deps)), scratch, project.limits.test_s,
                                 env)
        passed, failed, found = count_report(scratch, REPORT_KIND[project.language])
        result = CheckResult("host", True, rc == 0 and found and failed == 0 and passed > 0, build_s, test_s,
                             passed, failed, _toolchain(project.language, [], env), round(os.getloadavg()[0], 1))
    if not result.tests_passed:
        raise _tests_failed(project, result, found, tail, rc)
    return result


def _tests_failed(project: Project, result: CheckResult, found: bool, tail: str, rc: int) -> StepFailed:
    """Why a pristine project's check did not pass: no report, failed tests, or an exit status that is not 0
    with a report that counts no failure (a test JVM that died, a crashed runner: the report is partial)."""
    if not found:
        return StepFailed(project.id, "test", f"`make check` left no test report ({result.where}): {tail}")
    if result.failed == 0 and result.passed > 0:
        return StepFailed(project.id, "test", f"`make check` exited {rc} though its report counts {result.passed} "
                                              f"passed and no failure ({result.where}; a partial report): {tail}")
    return StepFailed(project.id, "test", f"{result.failed} test(s) failed, {result.passed} passed before any "
                                          f"change ({result.where}): the project is dropped until they pass")


def check_in_workspace(project: Project, cache: Cache, image: str = WORKSPACE_IMAGE) -> CheckResult:
    """`make build` then `make check` in one container of the workspace image (no network, the workspace's limits,
    user dev), on a scratch copy owned by that user; the container is removed whatever happens."""
    env = _podman_env()
    exists = subprocess.run(["podman", "image", "exists", image], env={**os.environ, **env}, check=False,
                            capture_output=True)
    if exists.returncode != 0:
        raise StepFailed(project.id, "build", f"the workspace image {image} is not built: run `make images`")
    name = f"ob-devops-{project.id}-{secrets.token_hex(3)}"
    root = f"/workspace/{project.id}"
    with tempfile.TemporaryDirectory(prefix=f"opsbench-{project.id}-", dir=cache.root) as tmp:
        scratch = Path(tmp) / project.id
        shutil.copytree(cache.tree(project), scratch, symlinks=True)
        subprocess.run(["chown", "-R", f"{WORKSPACE_UID}:{WORKSPACE_UID}", str(scratch)], check=True)
        start = ["podman", "run", "--detach", f"--name={name}", "--network=none", *WORKSPACE_LIMITS, "--init",
                 "--security-opt=no-new-privileges", f"--user={WORKSPACE_UID}:{WORKSPACE_UID}",
                 "--tmpfs=/tmp:rw,nosuid,nodev,size=512m,mode=1777",
                 f"--mount=type=bind,source={scratch},destination={root}",
                 f"--mount=type=bind,source={cache.deps},destination={WORKSPACE_DEPS},ro",
                 f"--workdir={root}", f"--env=GOCACHE={root}/.gocache", image, "sleep", "infinity"]
        try:
            proc = subprocess.run(start, env={**os.environ, **env}, capture_output=True, text=True, check=False)
            if proc.returncode != 0:
                raise StepFailed(project.id, "build", f"cannot start a workspace container: {proc.stderr.strip()}")
            exec_ = ["podman", "exec", name]
            # The container's processes do not inherit the podman client's priority: lower it inside as well.
            low = ["nice", "-n", "19"]
            build_s, _, _ = _step(project, "build", [*exec_, *low, *_make("build", WORKSPACE_DEPS)], scratch,
                                  project.limits.build_s, env)
            test_s, tail, rc = _step(project, "test", [*exec_, *low, *_make("check", WORKSPACE_DEPS)], scratch,
                                     project.limits.test_s, env)
            toolchain = _toolchain(project.language, exec_, env)
        finally:
            subprocess.run(["podman", "rm", "-f", "-t", "0", name], env={**os.environ, **env}, capture_output=True,
                           check=False)
        passed, failed, found = count_report(scratch, REPORT_KIND[project.language])
        result = CheckResult("workspace", True, rc == 0 and found and failed == 0 and passed > 0, build_s, test_s,
                             passed, failed, toolchain, round(os.getloadavg()[0], 1))
        subprocess.run(["chown", "-R", f"{os.getuid()}:{os.getgid()}", str(scratch)], check=False)
    if not result.tests_passed:
        raise _tests_failed(project, result, found, tail, rc)
    return result
