"""End-to-end: the workspace environment of DevOps tasks (roles/env_workspace) on the local backend.

One deployment serves the module, made the way the orchestrator makes it (playbooks/deploy.yml through ansible-runner
with the role's resolved arguments): the projects' own builds and tests pass inside the container with no network
(Maven from Debian's repository, Go with GOPROXY=off, pip from the image's wheel cache), the container reaches no
network and nothing of the host, a fork bomb stops at the pids limit, pristine sees a changed project, and teardown
leaves nothing. The last test tears down; the fixture tears down again in case a test before it failed.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.evaluation.workspace import count_report, load_projects

from .workspace_env import NEEDS_WORKSPACE, Workspace, deployed, podman

PROJECTS = ["stockkeeper", "ratelimit", "invoicer"]
PIDS_LIMIT = 512

pytestmark = [pytest.mark.e2e, NEEDS_WORKSPACE]


def ok(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 0, f"rc={proc.returncode}\nstdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"
    return proc.stdout


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workspace]:
    with deployed(tmp_path_factory.mktemp("workspace"), "wstest", Workspace) as w:
        yield w


def test_deploy_publishes_a_locked_down_workspace(ws: Workspace) -> None:
    assert ws.environment["application"] == "workspace"
    assert ws.environment["workspace"] == {
        "container": f"ob-{ws.run_id}-workspace", "root": "/workspace", "user": "dev", "uid": 1000, "gid": 1000,
        "projects": PROJECTS, "tree": str(ws.run_dir / "env" / "workspace"), "baseline": "opsbench-baseline",
        # no upstream project in this workspace: nothing of one is published, and no dependency cache is mounted
        "upstream": [], "upstream_src": "", "deps": "", "deps_mount": ""}
    assert ws.deploy.stats["environment"]["container"] == ws.container
    assert ws.environment["tool_families"] == ["terminal", "topology"]  # no telemetry: nothing else to offer
    topology = ws.environment["topology"]
    services = {e["id"] for e in topology["entities"] if e["kind"] == "process"}  # monitoring's background services
    assert len(services) == 7
    assert {e["id"] for e in topology["entities"]} - services == {"workspace", *PROJECTS,
                                                                 *(f"{p}-build" for p in PROJECTS)}
    assert {(e["source"], e["target"]) for e in topology["edges"] if e["target"] not in services} == {
        *(("workspace", p) for p in PROJECTS), *((p, f"{p}-build") for p in PROJECTS)}
    info = json.loads(ok(podman("container", "inspect", ws.container)))[0]
    host = info["HostConfig"]
    assert info["State"]["Status"] == "running"
    assert host["NetworkMode"] == "none"
    assert host["PidsLimit"] == PIDS_LIMIT
    assert host["Memory"] == 2 * 1024**3 and host["MemorySwap"] == host["Memory"]
    assert host["NanoCpus"] == 1_500_000_000
    assert info["Config"]["User"] == "1000:1000"
    assert info["Config"]["Labels"]["opsbench.run"] == ws.run_id
    mounts = {m["Destination"]: m for m in info["Mounts"]}
    assert mounts["/workspace"]["Source"] == ws.environment["workspace"]["tree"] and mounts["/workspace"]["RW"]
    assert host["Tmpfs"].keys() == {"/tmp"}
    # The tree on the host is the workspace user's; inside, every project is a repository at its baseline.
    tree = Path(ws.environment["workspace"]["tree"])
    assert sorted(p.name for p in tree.iterdir()) == sorted(PROJECTS)
    assert {(p.stat().st_uid, p.stat().st_gid) for p in [tree, *tree.rglob("*")]} == {(1000, 1000)}
    out = ok(ws.sh('id -un; for p in */; do git -C "$p" describe --tags; git -C "$p" status --porcelain; done'))
    assert out.split() == ["dev"] + ["opsbench-baseline"] * len(PROJECTS)


def test_a_second_deploy_changes_nothing(ws: Workspace) -> None:
    changed: list[str] = []
    again = ws.step("deploy.yml", changed=changed)
    assert again.ok, again.failures
    assert changed == [], f"a second deploy changed: {changed}"


def test_the_maven_project_builds_and_tests_offline(ws: Workspace) -> None:
    out = ok(ws.sh("mvn -q package && ls target/*.jar && cat target/surefire-reports/*.txt",
                cwd="/workspace/stockkeeper"))
    assert "target/stockkeeper-1.4.0.jar" in out
    runs = [line for line in out.splitlines() if line.startswith("Tests run:")]
    assert len(runs) == 3 and all("Failures: 0, Errors: 0" in line for line in runs), out
    # A failing test fails the build (the harness can tell a broken project from a working one).
    broken = ws.sh("sed -i 's/return cases \\* caseSize;/return cases * caseSize + 1;/' "
                    "src/main/java/org/opsbench/stockkeeper/ReorderPolicy.java && mvn -q test; rc=$?; "
                    "git checkout -q -- . && exit $rc", cwd="/workspace/stockkeeper")
    assert broken.returncode != 0 and "ReorderPolicyTest" in broken.stdout + broken.stderr, broken


def test_the_go_module_tests_pass_offline(ws: Workspace) -> None:
    out = ok(ws.sh("go env GOPROXY GOFLAGS && go vet ./... && go test ./... && "
                    "go build -o bin/limitcheck ./cmd/limitcheck && printf '0 a\\n1 a\\n' | bin/limitcheck -burst 1",
                cwd="/workspace/ratelimit"))
    assert out.splitlines()[:2] == ["off", "-mod=readonly"]
    assert "ok  \topsbench.local/ratelimit\t" in out and "0 a allow\n1 a deny" in out


def test_the_python_project_installs_from_the_wheel_cache(ws: Workspace) -> None:
    out = ok(ws.sh("python3 -m venv .venv && .venv/bin/pip install -q -e '.[test]' && .venv/bin/pytest -q && "
                    ".venv/bin/pip list --format=freeze", cwd="/workspace/invoicer"))
    assert " passed" in out and "python-dateutil==2.9.0.post0" in out and "invoicer==0.9.2" in out
    # The index is off: a requirement the cache does not hold cannot be installed.
    missing = ws.sh(".venv/bin/pip install requests", cwd="/workspace/invoicer", timeout=60)
    assert missing.returncode != 0 and "No matching distribution" in missing.stderr, missing


def test_make_check_is_each_projects_gate_with_the_test_count_projects_yml_declares(ws: Workspace) -> None:
    """What evaluate_workspace relies on: `make -s check` passes on the pristine project and its report counts
    exactly the tests projects.yml declares (the floor a fix must reach)."""
    for project, meta in load_projects().items():
        ok(ws.sh(meta["check"], cwd=f"/workspace/{project}", timeout=400))
        passed, failed, found = count_report(ws.run_dir / "env" / "workspace" / project, meta["report"])
        assert found and (passed, failed) == (meta["tests"], 0), (project, passed, failed)


def test_the_container_has_no_network_and_reaches_nothing_of_the_host(ws: Workspace) -> None:
    assert ok(ws.sh("ip -o link show | awk -F': ' '{print $2}'")).split() == ["lo"]
    with socket.socket() as listener:  # a port open on the host's loopback
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        probe = ("import socket, sys\n"
                 "for host, port in (('127.0.0.1', int(sys.argv[1])), ('10.0.2.2', 80), ('151.101.2.132', 80)):\n"
                 "    try:\n"
                 "        socket.create_connection((host, port), timeout=3).close(); print('connected', host)\n"
                 "    except OSError as exc:\n"
                 "        print('refused', host, type(exc).__name__)\n")
        out = ok(ws.sh(f"python3 -c {shlex.quote(probe)} {port}", timeout=60))
    assert "connected" not in out and out.count("refused") == 3, out
    assert ws.sh("getent hosts deb.debian.org", timeout=30).returncode != 0


def _pids_cgroup(container: str) -> Path:
    """The container's cgroup of the pids controller (cgroup v1 here; the unified hierarchy otherwise)."""
    pid = ok(podman("container", "inspect", "--format", "{{.State.Pid}}", container)).strip()
    lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "pids" in controllers.split(","):
            return Path("/sys/fs/cgroup/pids") / path.lstrip("/")
    return Path("/sys/fs/cgroup") / lines[0].split(":", 2)[2].lstrip("/")


def _kill_all_but_the_init(container: str, cgroup: Path) -> int:
    """Freeze the container, SIGKILL from the host every process in it but its init and `sleep infinity`, thaw it.
    Frozen processes cannot fork, so none escapes (a fork bomb's processes are orphans of the init, outside any
    process group a `timeout` could kill). Returns how many processes were killed."""
    init = int(ok(podman("container", "inspect", "--format", "{{.State.Pid}}", container)).strip())
    ok(podman("pause", container))
    killed = 0
    try:
        for pid in map(int, (cgroup / "cgroup.procs").read_text().split()):
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
                ppid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            if pid == init or (ppid == init and cmdline == b"sleep\0infinity\0"):
                continue
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
                killed += 1
    finally:
        ok(podman("unpause", container))
    return killed


def test_a_fork_bomb_is_contained(ws: Workspace) -> None:
    cgroup = _pids_cgroup(ws.container)
    assert (cgroup / "pids.max").read_text().strip() == str(PIDS_LIMIT)
    peak = [0]
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            with contextlib.suppress(OSError, ValueError):
                peak[0] = max(peak[0], int((cgroup / "pids.current").read_text()))
            time.sleep(0.1)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        # The classic bomb: each process starts two in the background and returns, so the processes are orphans of
        # the container's init at once and outlive the command that started them.
        ok(ws.sh("(b() { b | b & }; b) </dev/null >/dev/null 2>&1", timeout=30))
        time.sleep(5)
        # The host stays usable while the bomb runs: a new process starts at once.
        t0 = time.monotonic()
        subprocess.run(["true"], check=True, timeout=10)
        host_latency = time.monotonic() - t0
        running = int((cgroup / "pids.current").read_text())
        killed = _kill_all_but_the_init(ws.container, cgroup)
    finally:
        stop.set()
        watcher.join()
    assert PIDS_LIMIT - 64 <= running <= PIDS_LIMIT, f"{running} processes while the bomb ran (limit {PIDS_LIMIT})"
    assert peak[0] <= PIDS_LIMIT and killed >= PIDS_LIMIT - 64, (peak, killed)
    assert host_latency < 5, f"starting a process on the host took {host_latency:.1f}s during the bomb"
    # The workspace is usable afterwards, with its own processes left (init, sleep, and the shell and `ps` asking).
    out = ok(ws.sh("echo alive && ps -e --no-headers -o args", timeout=30)).splitlines()
    assert out[0] == "alive" and len(out) <= 5 and not any("b | b" in line for line in out), out
    assert ok(podman("container", "inspect", "--format", "{{.State.Status}}", ws.container)).strip() == "running"


def test_pristine_reports_a_changed_project_until_it_is_restored(ws: Workspace) -> None:
    clean = ws.step("pristine.yml")
    assert clean.ok and clean.stats.get("leftovers") == [], clean.stats
    ok(ws.sh("echo '<!-- drift -->' >> pom.xml && touch NOTES.txt && (nohup sleep 300 >/dev/null 2>&1 &)",
          cwd="/workspace/stockkeeper"))
    dirty = ws.step("pristine.yml")
    leftovers = dirty.stats.get("leftovers")
    assert isinstance(leftovers, list)
    assert "project stockkeeper: changed pom.xml" in leftovers and "project stockkeeper: changed NOTES.txt" in leftovers
    assert any(item.startswith("process ") and item.endswith("sleep 300") for item in leftovers), leftovers
    ok(ws.sh("git checkout -q -- . && git clean -qfx -e target && pkill -f '^sleep 300$'; true",
          cwd="/workspace/stockkeeper"))
    again = ws.step("pristine.yml")
    assert again.stats.get("leftovers") == [], again.stats


def test_teardown_leaves_nothing(ws: Workspace) -> None:
    result = ws.teardown()
    assert result.ok, result.failures
    assert podman("container", "exists", ws.container).returncode == 1
    label = f"label=opsbench.run={ws.run_id}"
    assert ok(podman("ps", "-a", "--filter", label, "--format", "{{.Names}}")).strip() == ""
    assert ok(podman("volume", "ls", "--filter", label, "--format", "{{.Name}}")).strip() == ""
    assert not (ws.run_dir / "env").exists() and not (ws.run_dir / "environment.json").exists()
    assert ws.run_id not in subprocess.run(["pgrep", "-af", ws.run_id], capture_output=True, text=True,
                                           check=False).stdout
    # A second teardown (`opsbench cleanup` after an interrupted one) finds nothing to do.
    changed: list[str] = []
    again = ws.step("teardown.yml", changed=changed)
    assert again.ok and changed == [], (again.failures, changed)
