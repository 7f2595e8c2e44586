"""``opsbench bench --backend kubernetes`` (``make bench-k8s``): what the local cluster of ``make cluster`` costs.

In order, with progress on stderr:

1. The build (roles/k8s_cluster, tasks/build.yml). With ``cold``: the build-only playbook into a temporary
   ``k8s_cluster_home`` with empty temporary Go caches (GOCACHE, GOMODCACHE): wall time, the compile time build.sh
   records (build.json ``build_seconds``), what was downloaded (the module cache's ``cache/download``, and the whole
   module cache) and the build cache's size after; then a warm rebuild (only the temporary binaries removed, the Go
   caches kept). The temporary folders (GBs) are removed after. Without ``cold``: the cached build's build.json
   (built earlier, not measured now); when nothing is cached it is built first with the user's Go caches, timed.
   Both builds run ``ansible-playbook`` itself, as ``make cluster-build`` does: ansible-runner would drop GOCACHE
   and GOMODCACHE from the playbook's environment (`orchestrator.runner`'s allow-list).
2. A cluster already up (its kubeconfig or run dir present) is refused before anything else: the bench measures a
   start from nothing and takes the cluster down at the end.
3. The start: ``playbooks/cluster.yml`` with the cached binaries (ansible-runner), wall time, the node-Ready wait
   and the slowest tasks from the playbook's events.
4. Memory, idle (after `IDLE_SETTLE_S`): each daemon's RSS and PSS (its pid file under <state>/cluster/run, VmRSS
   in /proc/<pid>/status, Pss in smaps_rollup: the kube-* daemons are one binary, so their RSS counts its shared
   pages six times and only PSS adds up), the containerd shims of this cluster (found by their socket address) and
   the pods (the
   kubepods memory cgroup, v1: usage and working set = usage - inactive file, as kubelet counts it); the same again
   with the shop deployed, sampled at the start of each k8s trial's inject step (deployed, baseline healthy, no
   fault yet), and the pods' peak over the whole k8s campaign (the cgroup's max_usage).
5. The lifecycle (`bench_lifecycle`'s machinery): a campaign of the k8s scenario(s) on the cluster, no-op agent,
   parallel 1; the cluster is taken down (6.) and then the same for the local backend's scenario(s), so neither
   backend's figures carry the other's idle load. Per-phase medians, runs/hour, their ratio.
6. ``playbooks/cluster_down.yml`` (what ``make cluster-down`` runs), timed, in a ``finally``: a cluster this bench
   started is always taken down.

The 1-minute load average at the start and the end is in the report: the figures are taken on a shared machine.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml

from orchestrator import paths
from orchestrator.errors import OpsBenchError
from orchestrator.harness.bench_lifecycle import NOOP_AGENT, PHASES, MemorySampler, phase_times, summary_stats
from orchestrator.harness.campaign import Campaign, run_campaign
from orchestrator.progress import Progress
from orchestrator.run_vars import new_run_id
from orchestrator.runner import ansible_env, run_playbook
from orchestrator.spec import Scenario

DAEMONS = ("containerd", "etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet",
           "kube-proxy", "coredns", "kube-router")
"""The cluster's host processes, each with ``<run dir>/<name>.pid`` (roles/k8s_cluster/vars: k8s_cluster__daemons)."""
DEFAULT_K8S_SCENARIO = "k8s-shop-checkout-oom-killed"
DEFAULT_LOCAL_SCENARIO = "shop-cart-down"
KUBEPODS = Path("/sys/fs/cgroup/memory/kubepods")
"""kubelet's pods (cgroupfs driver, cgroup v1: roles/k8s_cluster/templates/kubelet.yaml.j2)."""
SHIM_SOCKET_DIR = "/run/opsbench-cluster/"
"""The cluster's containerd socket dir (k8s_cluster__sock_dir): its shims carry it in their -address."""
NODE_READY_TASK = "Wait for the node to be Ready"
SAMPLE_AT_STEP = "inject"
IDLE_SETTLE_S = 20.0
ROLE_DIR = paths.ROLES_DIR / "k8s_cluster"
MIB = 1024.0**2


# -- where the cluster's files are -----------------------------------------------------------------------------------

def cluster_home() -> Path:
    """``k8s_cluster_home``: <state dir>/cluster (roles/k8s_cluster/defaults)."""
    return paths.state_dir() / "cluster"


def refuse_if_running(home: Path) -> None:
    """An OpsBenchError when a cluster is up (or half up) here: its kubeconfig or its run dir exists."""
    found = [str(p) for p in (home / "kubeconfig", home / "run") if p.exists()]
    if found:
        raise OpsBenchError(f"a local cluster is already up ({', '.join(found)}): the Kubernetes bench measures a "
                            "start from nothing and takes the cluster down at the end. Run `make cluster-down` "
                            "first, then the bench again.")


def default_release() -> str:
    """The role's pinned release (``k8s_cluster_release`` in roles/k8s_cluster/defaults/main.yml)."""
    return str(yaml.safe_load((ROLE_DIR / "defaults" / "main.yml").read_text())["k8s_cluster_release"])


def source_hash(src: Path) -> str:
    """The build cache key's hash, as build.yml computes it: ``find . -type f \\( -name '*.go' -o -name go.mod -o
    -name go.sum \\) | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -c1-12``."""
    found: list[str] = []
    for root, dirs, files in os.walk(src):
        dirs.sort()
        for name in files:
            full = Path(root) / name
            if (name.endswith(".go") or name in ("go.mod", "go.sum")) and full.is_file() and not full.is_symlink():
                found.append("./" + full.relative_to(src).as_posix())
    lines = b""
    for rel in sorted(found, key=lambda p: p.encode()):
        lines += f"{hashlib.sha256((src / rel).read_bytes()).hexdigest()}  {rel}\n".encode()
    return hashlib.sha256(lines).hexdigest()[:12]


def bin_dir(home: Path, release: str) -> Path:
    """Where build.yml caches the binaries of `release`: <home>/bin/<release>-<source hash>."""
    return home / "bin" / f"{release}-{source_hash(ROLE_DIR / 'files' / 'modules')}"


def read_build(bins: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((bins / "build.json").read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def dir_bytes(path: Path) -> int:
    """Apparent size of the files under `path` (symlinks not followed); 0 when it does not exist."""
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, name)).st_size
    return total


def remove_tree(path: Path) -> None:
    """rm -rf, also of Go's module cache (its folders are read-only)."""
    def unlock(func: Callable[..., Any], target: str, _exc: Any) -> None:
        with contextlib.suppress(OSError):
            os.chmod(os.path.dirname(target), stat.S_IRWXU)
            os.chmod(target, stat.S_IRWXU)
        func(target)

    if path.exists():
        shutil.rmtree(path, onerror=unlock)


def mib(n: float | None) -> float | None:
    return None if n is None else round(n / MIB, 1)


def load_1m() -> float:
    return round(os.getloadavg()[0], 2)


# -- memory ----------------------------------------------------------------------------------------------------------

def kb_field(text: str, field: str) -> int | None:
    """A ``Field:   123 kB`` line of a /proc file (status, smaps_rollup) in bytes; None when absent (a kernel thread
    or a zombie has no VmRSS)."""
    for line in text.splitlines():
        if line.startswith(field + ":"):
            parts = line.split()
            if len(parts) >= 2 and parts[1].isdigit():
                return int(parts[1]) * (1024 if len(parts) < 3 or parts[2] == "kB" else 1)
    return None


def vm_rss_bytes(status: str) -> int | None:
    """VmRSS of a /proc/<pid>/status text, in bytes."""
    return kb_field(status, "VmRSS")


def proc_memory(proc: Path, pid: int) -> tuple[int | None, int | None]:
    """(RSS, PSS) of `pid` in bytes: VmRSS from status; Pss from smaps_rollup (None when unreadable). RSS counts
    pages shared with other processes in full in each (the six kube-* daemons are one multi-call binary), PSS
    divides them among their sharers: PSS adds up, RSS does not."""
    rss = vm_rss_bytes((proc / str(pid) / "status").read_text())
    try:
        pss = kb_field((proc / str(pid) / "smaps_rollup").read_text(), "Pss")
    except OSError:
        pss = None
    return rss, pss


def process_memory(run_dir: Path, proc: Path = Path("/proc")) -> dict[str, tuple[int | None, int | None]]:
    """Each daemon's (RSS, PSS) in bytes, from its pid file; (None, None) when the file or the process is missing."""
    out: dict[str, tuple[int | None, int | None]] = {}
    for daemon in DAEMONS:
        try:
            out[daemon] = proc_memory(proc, int((run_dir / f"{daemon}.pid").read_text().strip()))
        except (OSError, ValueError):
            out[daemon] = (None, None)
    return out


def shim_memory(proc: Path = Path("/proc"), socket_dir: str = SHIM_SOCKET_DIR) -> tuple[int, int, int]:
    """(count, summed RSS, summed PSS) of the containerd shims whose arguments name this cluster's socket dir."""
    count = rss_total = pss_total = 0
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            if b"containerd-shim" not in argv[0] or not any(socket_dir.encode() in a for a in argv[1:]):
                continue
            rss, pss = proc_memory(proc, int(entry.name))
        except OSError:
            continue  # gone meanwhile
        count += 1
        rss_total += rss or 0
        pss_total += pss or 0
    return count, rss_total, pss_total


def pods_memory(root: Path = KUBEPODS) -> dict[str, Any] | None:
    """The kubepods memory cgroup (v1): usage, working set (usage - total_inactive_file, kubelet's figure), RSS,
    peak (max_usage_in_bytes, since the cgroup was made) and the number of pods; None without the cgroup."""
    try:
        usage = int((root / "memory.usage_in_bytes").read_text())
        statf = dict(line.split() for line in (root / "memory.stat").read_text().splitlines() if " " in line)
    except (OSError, ValueError):
        return None
    peak: int | None
    try:
        peak = int((root / "memory.max_usage_in_bytes").read_text())
    except (OSError, ValueError):
        peak = None
    inactive = int(statf.get("total_inactive_file", 0))
    pods = sum(1 for qos in (root, root / "burstable", root / "besteffort") if qos.is_dir()
               for d in qos.iterdir() if d.is_dir() and d.name.startswith("pod"))
    return {"pods": pods, "usage_mib": mib(usage), "working_set_mib": mib(max(usage - inactive, 0)),
            "rss_mib": mib(int(statf.get("total_rss", 0))), "peak_usage_mib": mib(peak)}


def memory_sample(run_dir: Path, proc: Path = Path("/proc"), kubepods: Path = KUBEPODS) -> dict[str, Any]:
    """One sample, MiB: each daemon's RSS and PSS and their sums, the shims', the pods' cgroup, and the total
    (daemons' PSS + shims' PSS + pods' working set: what the cluster takes, shared pages counted once)."""
    mem = process_memory(run_dir, proc)
    shims, shims_rss, shims_pss = shim_memory(proc)
    pods = pods_memory(kubepods)
    pss = sum(p for _, p in mem.values() if p)
    total = pss + shims_pss + (pods["working_set_mib"] * MIB if pods else 0)
    return {"at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "load_1m": load_1m(),
            "processes_rss_mib": {d: mib(r) for d, (r, _) in mem.items()},
            "processes_pss_mib": {d: mib(p) for d, (_, p) in mem.items()},
            "control_plane_rss_mib": mib(sum(r for r, _ in mem.values() if r)), "control_plane_pss_mib": mib(pss),
            "missing": [d for d, (r, _) in mem.items() if r is None],
            "shims": shims, "shims_rss_mib": mib(shims_rss), "shims_pss_mib": mib(shims_pss), "pods": pods,
            "total_mib": mib(total)}


def sampling_progress(progress: Progress, step: str, sample: Callable[[], None]) -> Progress:
    """`progress`, calling `sample` as each step named `step` starts (file reads only: milliseconds)."""
    def started(name: str, index: int, total: int) -> None:
        if name == step:
            with contextlib.suppress(OSError, ValueError):
                sample()
        progress.step_started(name, index, total)

    return dataclasses.replace(progress, step_started=started)


# -- playbooks -------------------------------------------------------------------------------------------------------

def _extra(release: str | None, **more: Any) -> dict[str, Any]:
    return {**({"k8s_cluster_release": release} if release else {}), **more}


def build(home: Path, release: str | None, log: Path, go_env: dict[str, str] | None = None) -> dict[str, Any]:
    """``ansible-playbook playbooks/cluster.yml -e opsbench_cluster_build_only=true`` into `home` (as ``make
    cluster-build``; GOCACHE / GOMODCACHE from `go_env`, else the caller's), timed; its build.json."""
    extra = _extra(release, opsbench_cluster_build_only=True, k8s_cluster_home=str(home))
    env = {**os.environ, **ansible_env(), **(go_env or {})}
    if go_env and "GOCACHE" in go_env:
        extra["k8s_cluster_go_cache"] = go_env["GOCACHE"]
    playbook = Path(sys.executable).parent / "ansible-playbook"
    argv = [str(playbook if playbook.exists() else "ansible-playbook"), str(paths.PLAYBOOKS_DIR / "cluster.yml"),
            "-e", json.dumps(extra)]
    start = time.monotonic()
    with log.open("w") as out:
        rc = subprocess.run(argv, cwd=paths.PROJECT_ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                            check=False).returncode
    wall = round(time.monotonic() - start, 1)
    if rc != 0:
        tail = " | ".join(log.read_text(errors="replace").strip().splitlines()[-8:])
        raise OpsBenchError(f"the cluster build failed (rc {rc}, {wall} s; log {log}): {tail}")
    bins = bin_dir(home, release or default_release())
    record = read_build(bins) or {}
    return {"wall_s": wall, "build_seconds": record.get("build_seconds"), "go": record.get("go"),
            "release": record.get("release"), "bin": str(bins)}


def cold_build(release: str | None, echo: Callable[[str], None]) -> dict[str, Any]:
    """A cold build (empty Go caches) then a warm rebuild (binaries removed, caches kept), in temporary folders
    under the state dir (the build needs GBs of disk, /tmp may be small), removed after; the playbooks' logs are
    kept beside them (<state dir>/bench-k8s-cold.log, -warm.log)."""
    tmp = Path(tempfile.mkdtemp(prefix="bench-k8s-cold-", dir=paths.state_dir()))
    try:
        home, gocache, gomodcache = tmp / "cluster", tmp / "gocache", tmp / "gomodcache"
        for d in (home, gocache, gomodcache):
            d.mkdir()
        go_env = {"GOCACHE": str(gocache), "GOMODCACHE": str(gomodcache)}
        echo(f"build, cold: empty Go caches under {tmp} (tens of minutes on 2 cores)")
        cold = build(home, release, paths.state_dir() / "bench-k8s-cold.log", go_env)
        cold.update(downloaded_mib=mib(dir_bytes(gomodcache / "cache" / "download")),
                    gomodcache_mib=mib(dir_bytes(gomodcache)), gocache_mib=mib(dir_bytes(gocache)))
        echo(f"  cold: {cold['wall_s']} s wall, {cold['build_seconds']} s compiling, "
             f"{cold['downloaded_mib']} MiB downloaded")
        remove_tree(home / "bin")
        echo("build, warm: the same with the Go caches kept")
        warm = build(home, release, paths.state_dir() / "bench-k8s-warm.log", go_env)
        warm.update(gocache_mib=mib(dir_bytes(gocache)))
        echo(f"  warm: {warm['wall_s']} s wall, {warm['build_seconds']} s compiling")
        return {"measured": True, "cold": cold, "warm": warm,
                "note": "cold: empty GOCACHE and GOMODCACHE; warm: binaries removed, Go caches kept"}
    finally:
        remove_tree(tmp)


def cached_build(home: Path, release: str | None, echo: Callable[[str], None], log: Path) -> dict[str, Any]:
    """The cached build's record (not measured now); when there is none, it is built first (user's Go caches)."""
    bins = bin_dir(home, release or default_release())
    record = read_build(bins)
    if record is not None:
        return {"measured": False, "bin": str(bins), "build_seconds": record.get("build_seconds"),
                "go": record.get("go"), "release": record.get("release"),
                "note": "the cached build's build.json (compile time when it was built, not measured now)"}
    echo(f"no cached build at {bins}: building it first (the user's Go caches)")
    done = build(home, release, log)
    return {"measured": True, **done, "note": "built now with the user's Go caches (nothing was cached)"}


@dataclasses.dataclass
class Timed:
    """A playbook run through ansible-runner: its outcome, wall time, per-task seconds and set_stats data."""

    ok: bool
    wall_s: float
    tasks: dict[str, float]
    stats: dict[str, Any]
    failures: list[str]


def run_timed(step: str, playbook: str, extravars: dict[str, Any], workdir: Path) -> Timed:
    """`run_playbook`, also collecting each task's duration (summed by name) and every set_stats key."""
    tasks: dict[str, float] = {}
    stats: dict[str, Any] = {}

    def on_event(event: dict[str, Any]) -> None:
        data = event.get("event_data") or {}
        if event.get("event") in ("runner_on_ok", "runner_on_failed") and isinstance(data.get("duration"),
                                                                                        (int, float)):
            name = str(data.get("task") or "?")
            tasks[name] = round(tasks.get(name, 0.0) + float(data["duration"]), 2)
        if event.get("event") == "playbook_on_stats":
            stats.update(data.get("artifact_data") or {})

    result = run_playbook(step, playbook, extravars, workdir / step, on_event=on_event)
    return Timed(result.ok, round(result.elapsed, 1), tasks, stats, result.failures)


def start_report(timed: Timed, top: int = 8) -> dict[str, Any]:
    cluster = timed.stats.get("k8s_cluster") or {}
    slowest = sorted(timed.tasks.items(), key=lambda kv: -kv[1])[:top]
    return {"ok": timed.ok, "wall_s": timed.wall_s, "node_ready_wait_s": timed.tasks.get(NODE_READY_TASK),
            "version": cluster.get("version"), "runtime": cluster.get("runtime"),
            "slowest_tasks_s": dict(slowest), "failures": timed.failures[:3]}


# -- lifecycle -------------------------------------------------------------------------------------------------------

def measure_backend(scenarios: list[Scenario], trials: int, progress: Progress,
                    podman_memory: bool = False) -> dict[str, Any]:
    """A parallel-1 campaign of `scenarios` x `trials` with the no-op agent (as `bench_lifecycle.bench` at K=1)."""
    name = f"bench-k8s-{new_run_id()}-{scenarios[0].backend}"
    since = new_run_id()[:15]
    start = time.monotonic()
    sampler = MemorySampler(since) if podman_memory else contextlib.nullcontext()
    with sampler:
        records = run_campaign(Campaign(name), scenarios, [NOOP_AGENT], trials, 1, progress, purpose="bench")
    wall = time.monotonic() - start
    phases, per_trial, host_costs = phase_times(records)
    done = [r for r in records if r.status in ("completed", "invalid")]
    amortized = [t + sum(host_costs) / len(per_trial) for t in per_trial] if per_trial else []
    out = {"campaign": name, "scenarios": [s.id for s in scenarios], "wall_s": round(wall, 1),
           "planned": len(scenarios) * trials, "trials": len(records), "finished": len(done),
           "statuses": sorted({r.status for r in records}),
           "runs_per_hour": round(len(done) / (wall / 3600), 1) if wall > 0 else None,
           "phases_s": {p: summary_stats(v) for p, v in phases.items()},
           "trial_lifecycle_without_agent_s": summary_stats(per_trial),
           "trial_lifecycle_with_deploy_share_s": summary_stats(amortized)}
    if isinstance(sampler, MemorySampler):
        out["peak_memory_mib"], out["peak_containers"] = sampler.peak_mib, sampler.peak_containers
    return out


def compare(k8s: dict[str, Any] | None, local: dict[str, Any] | None) -> dict[str, Any]:
    """Per phase, both backends' medians and their ratio (kubernetes / local); the same for runs/hour."""
    def median(side: dict[str, Any] | None, key: str) -> float | None:
        stats = ((side or {}).get("phases_s") or {}).get(key) if key in PHASES else (side or {}).get(key)
        return stats.get("median") if isinstance(stats, dict) else None

    def ratio(a: float | None, b: float | None) -> float | None:
        return round(a / b, 2) if a is not None and b else None

    rows = {}
    for key in [*PHASES, "trial_lifecycle_without_agent_s", "trial_lifecycle_with_deploy_share_s"]:
        a, b = median(k8s, key), median(local, key)
        if a is not None or b is not None:
            rows[key] = {"kubernetes": a, "local": b, "ratio": ratio(a, b)}
    rk, rl = (k8s or {}).get("runs_per_hour"), (local or {}).get("runs_per_hour")
    return {"phases_median_s": rows, "runs_per_hour": {"kubernetes": rk, "local": rl, "ratio": ratio(rk, rl)}}


@contextlib.contextmanager
def local_kubeconfig(path: Path) -> Iterator[None]:
    """KUBECONFIG set to the local cluster's for the k8s trials (a user's KUBECONFIG would point them elsewhere)."""
    before = os.environ.get("KUBECONFIG")
    os.environ["KUBECONFIG"] = str(path)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("KUBECONFIG", None)
        else:
            os.environ["KUBECONFIG"] = before


@contextlib.contextmanager
def term_as_interrupt() -> Iterator[None]:
    """SIGTERM raises KeyboardInterrupt (as Ctrl-C does), so the ``finally`` that takes the cluster down runs when a
    scheduler stops the bench too (the campaigns install their own handlers while they run)."""
    def raise_interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    try:
        before = signal.signal(signal.SIGTERM, raise_interrupt)
    except ValueError:  # not the main thread: leave the handlers alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


def split_scenarios(chosen: list[Scenario], find: Callable[[str], Scenario]) -> tuple[list[Scenario],
                                                                                       list[Scenario]]:
    """(kubernetes-backend, local-backend) scenarios of `chosen`; a side with none gets its default."""
    k8s = [s for s in chosen if s.backend == "kubernetes"]
    local = [s for s in chosen if s.backend != "kubernetes"]
    return k8s or [find(DEFAULT_K8S_SCENARIO)], local or [find(DEFAULT_LOCAL_SCENARIO)]


def bench_k8s(k8s_scenarios: list[Scenario], local_scenarios: list[Scenario], trials: int, cold: bool,
              release: str | None, progress: Progress, echo: Callable[[str], None],
              idle_settle_s: float = IDLE_SETTLE_S) -> dict[str, Any]:
    """Run the measurements (see the module docstring) and return the report."""
    home = cluster_home()
    refuse_if_running(home)  # before a build of tens of minutes, not after it
    report: dict[str, Any] = {
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "cores": os.cpu_count(),
        "load_1m_start": load_1m(), "release": release or default_release(), "trials": trials,
        "agent": NOOP_AGENT, "parallel": 1}
    with tempfile.TemporaryDirectory(prefix="opsbench-bench-k8s-") as tmp, term_as_interrupt():
        work = Path(tmp)
        if cold:
            report["build"] = cold_build(release, echo)
        report["cached_build"] = cached_build(home, release, echo, work / "build.log")
        refuse_if_running(home)
        samples: list[dict[str, Any]] = []
        run_dir = home / "run"
        try:
            echo("start: playbooks/cluster.yml (make cluster), binaries cached")
            started = run_timed("cluster", "cluster.yml", _extra(release), work)
            report["start"] = start_report(started)
            if not started.ok:
                raise OpsBenchError(f"the cluster did not start: {'; '.join(started.failures)[:500]}")
            echo(f"  up in {started.wall_s} s (node Ready wait {report['start']['node_ready_wait_s']} s); "
                 f"idle memory in {idle_settle_s:g} s")
            time.sleep(idle_settle_s)
            report["memory"] = {"idle": memory_sample(run_dir)}
            idle = report["memory"]["idle"]
            echo(f"  idle: control plane {idle['control_plane_pss_mib']} MiB PSS ({idle['control_plane_rss_mib']} "
                 f"MiB RSS summed), pods {(idle['pods'] or {}).get('working_set_mib')} MiB")
            echo(f"lifecycle, kubernetes: {', '.join(s.id for s in k8s_scenarios)} x {trials}, no-op agent")
            hooked = sampling_progress(progress, SAMPLE_AT_STEP, lambda: samples.append(memory_sample(run_dir)))
            with local_kubeconfig(home / "kubeconfig"):
                report["kubernetes"] = measure_backend(k8s_scenarios, trials, hooked)
            report["memory"].update(
                with_shop=samples[-1] if samples else None, with_shop_samples=len(samples),
                with_shop_when=f"at the start of each k8s trial's {SAMPLE_AT_STEP} step (shop deployed, baseline "
                               "healthy, no fault yet); the last sample",
                pods_after_campaign=pods_memory())
        finally:
            echo("down: playbooks/cluster_down.yml (make cluster-down)")
            down = run_timed("cluster_down", "cluster_down.yml", {}, work)
            report["down"] = {"ok": down.ok, "wall_s": down.wall_s, "failures": down.failures[:3]}
            echo(f"  down in {down.wall_s} s" + ("" if down.ok else " FAILED: run `make cluster-down`"))
        k8s = report["kubernetes"]
        if k8s["finished"] < k8s["planned"]:  # interrupted, or its trials failed: nothing to compare
            report["local"] = None
            report["local_measured"] = (f"not measured: {k8s['finished']} of {k8s['planned']} k8s "
                                        f"trial(s) finished ({', '.join(k8s['statuses'])})")
            echo(f"lifecycle, local backend: {report['local_measured']}")
        else:
            echo(f"lifecycle, local backend (cluster down): {', '.join(s.id for s in local_scenarios)} x {trials}")
            report["local"] = measure_backend(local_scenarios, trials, progress, podman_memory=True)
            report["local_measured"] = "after the cluster was taken down"
    report["comparison"] = compare(report.get("kubernetes"), report.get("local"))
    report["load_1m_end"] = load_1m()
    report["ended_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return report


def complete(report: dict[str, Any]) -> bool:
    """Every step done: the cluster down again and every trial of both backends finished."""
    sides = [report.get("kubernetes"), report.get("local")]
    return bool((report.get("down") or {}).get("ok")) and all(
        s and s["finished"] == s["planned"] > 0 for s in sides)


# -- the readable table ----------------------------------------------------------------------------------------------

def _build_lines(report: dict[str, Any]) -> list[str]:
    lines = []
    if b := report.get("build"):
        c, w = b["cold"], b["warm"]
        lines.append(f"build, cold (empty Go caches): {c['wall_s']} s wall, {c['build_seconds']} s compiling "
                     f"(build.json); downloaded {c['downloaded_mib']} MiB (module cache {c['gomodcache_mib']} MiB), "
                     f"Go build cache after {c['gocache_mib']} MiB")
        lines.append(f"build, warm (binaries removed, Go caches kept): {w['wall_s']} s wall, "
                     f"{w['build_seconds']} s compiling")
    if cb := report.get("cached_build"):
        if cb["measured"]:
            lines.append(f"build ({cb['note']}): {cb['wall_s']} s wall, {cb['build_seconds']} s compiling")
        else:
            lines.append(f"cached build {cb['bin']}: {cb['build_seconds']} s compiling when it was built "
                         f"(its build.json; not measured now{'' if report.get('build') else ', no --cold'})")
    return lines


def _memory_lines(memory: dict[str, Any]) -> list[str]:
    idle, shop = memory.get("idle") or {}, memory.get("with_shop") or {}
    lines = [f"memory, MiB (RSS / PSS)          {'IDLE':>15} {'WITH SHOP':>15}"]

    def pair(sample: dict[str, Any], rss: Any, pss: Any) -> str:
        return "-" if not sample or rss is None else f"{rss} / {'-' if pss is None else pss}"

    def row(label: str, a: Any, b: Any) -> None:
        lines.append(f"  {label:<30} {'-' if a is None else a:>15} {'-' if b is None else b:>15}")

    for d in DAEMONS:
        row(d, pair(idle, (idle.get("processes_rss_mib") or {}).get(d), (idle.get("processes_pss_mib") or {}).get(d)),
            pair(shop, (shop.get("processes_rss_mib") or {}).get(d), (shop.get("processes_pss_mib") or {}).get(d)))
    row("control plane (sum)", pair(idle, idle.get("control_plane_rss_mib"), idle.get("control_plane_pss_mib")),
        pair(shop, shop.get("control_plane_rss_mib"), shop.get("control_plane_pss_mib")))
    row("containerd shims (n)",
        f"{pair(idle, idle.get('shims_rss_mib'), idle.get('shims_pss_mib'))} ({idle.get('shims')})" if idle else None,
        f"{pair(shop, shop.get('shims_rss_mib'), shop.get('shims_pss_mib'))} ({shop.get('shims')})" if shop else None)
    ip, sp = idle.get("pods") or {}, shop.get("pods") or {}
    row("pods: working set (cgroup)", ip.get("working_set_mib"), sp.get("working_set_mib"))
    row("pods: cgroup usage", ip.get("usage_mib"), sp.get("usage_mib"))
    row("pods (count)", ip.get("pods"), sp.get("pods"))
    row("total (PSS + pods' working set)", idle.get("total_mib"), shop.get("total_mib"))
    if after := memory.get("pods_after_campaign"):
        lines.append(f"  pods' peak over the whole k8s campaign (cgroup max_usage): {after.get('peak_usage_mib')} MiB")
    if memory.get("with_shop_when"):
        lines.append(f"  with shop: {memory['with_shop_when']} ({memory.get('with_shop_samples')} sample(s)); "
                     "pods: the kubepods memory cgroup (v1)")
    return lines


def render(report: dict[str, Any]) -> str:
    lines = [f"Kubernetes backend (local cluster, {report['release']}): {report['cores']} cores, 1-min load "
             f"{report['load_1m_start']} at start, {report.get('load_1m_end')} at end "
             f"({report['started_at']} - {report.get('ended_at')})"]
    lines += _build_lines(report)
    if s := report.get("start"):
        lines.append(f"start (cluster.yml, binaries cached): {s['wall_s']} s wall, node Ready wait "
                     f"{s['node_ready_wait_s']} s; {s.get('version')} on {s.get('runtime')}")
        lines.append("  slowest tasks: " + "; ".join(f"{k} {v} s" for k, v in s["slowest_tasks_s"].items()))
    if report.get("memory"):
        lines += _memory_lines(report["memory"])
    k8s, local = report.get("kubernetes"), report.get("local")
    if k8s or local:
        lines.append(f"lifecycle, no-op agent, parallel 1, {report['trials']} trial(s) per scenario "
                     f"(local backend {report.get('local_measured', '')}):")
        for label, side in (("kubernetes", k8s), ("local", local)):
            if side:
                lines.append(f"  {label}: {', '.join(side['scenarios'])}: {side['finished']}/{side['planned']} "
                             f"trials in {side['wall_s']} s -> {side['runs_per_hour']} runs/hour")
        comp = report["comparison"]
        lines.append(f"  {'PHASE (median s)':<38} {'KUBERNETES':>10} {'LOCAL':>8} {'RATIO':>6}")
        for key, row in comp["phases_median_s"].items():
            lines.append(f"  {key:<38} {'-' if row['kubernetes'] is None else row['kubernetes']:>10} "
                         f"{'-' if row['local'] is None else row['local']:>8} "
                         f"{'-' if row['ratio'] is None else row['ratio']:>6}")
        r = comp["runs_per_hour"]
        lines.append(f"  {'runs/hour':<38} {r['kubernetes'] or '-':>10} {r['local'] or '-':>8} "
                     f"{r['ratio'] or '-':>6}")
    if d := report.get("down"):
        lines.append(f"down (cluster_down.yml): {d['wall_s']} s" + ("" if d["ok"] else
                                                                    " FAILED: run `make cluster-down`"))
    return "\n".join(lines)
