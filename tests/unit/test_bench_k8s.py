"""`opsbench bench --backend kubernetes` (orchestrator/harness/bench_k8s.py): its pure parts, on fake /proc and cgroup
trees, with the playbooks and campaigns replaced (the live measurement is `make bench-k8s`, not a test)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from click.testing import CliRunner

from orchestrator.cli import main
from orchestrator.errors import OpsBenchError
from orchestrator.harness import bench_k8s as bk
from orchestrator.progress import Progress

SHIM = (b"/usr/bin/containerd-shim-runc-v2\0-namespace\0k8s.io\0-id\0abc\0"
        b"-address\0/run/opsbench-cluster/containerd.sock\0")


def fake_proc(root: Path, pid: int, rss_kb: int | None, pss_kb: int | None = None, cmdline: bytes = b"x\0") -> None:
    d = root / str(pid)
    d.mkdir(parents=True)
    (d / "status").write_text(f"Name:\tx\nPid:\t{pid}\n" + (f"VmRSS:\t  {rss_kb} kB\n" if rss_kb is not None else "")
                              + "Threads:\t4\n")
    if pss_kb is not None:
        (d / "smaps_rollup").write_text(f"00400000-7ff [rollup]\nRss:  {rss_kb} kB\nPss:  {pss_kb} kB\n"
                                        f"Pss_Anon:  1 kB\n")
    (d / "cmdline").write_bytes(cmdline)


def fake_kubepods(root: Path, usage: int = 500 * 2**20, inactive: int = 100 * 2**20) -> Path:
    root.mkdir(parents=True)
    (root / "memory.usage_in_bytes").write_text(f"{usage}\n")
    (root / "memory.max_usage_in_bytes").write_text(f"{usage + 2**20}\n")
    (root / "memory.stat").write_text(f"cache 1\nrss 2\ntotal_rss {300 * 2**20}\ntotal_inactive_file {inactive}\n")
    for qos, pods in (("", ["podaaa"]), ("burstable", ["podbbb", "podccc"]), ("besteffort", [])):
        for pod in pods:
            (root / qos / pod).mkdir(parents=True)
    (root / "burstable" / "memory.stat").write_text("")  # files beside pods are not pods
    return root


def test_kb_fields_of_proc_files() -> None:
    assert bk.vm_rss_bytes("Name:\tetcd\nVmRSS:\t  129444 kB\n") == 129444 * 1024
    assert bk.vm_rss_bytes("Name:\tkthreadd\nThreads:\t1\n") is None  # kernel threads and zombies have none
    assert bk.kb_field("Rss:  10 kB\nPss:   4 kB\nPss_Anon: 3 kB\n", "Pss") == 4096  # not Pss_Anon


def test_daemon_memory_from_pid_files(tmp_path: Path) -> None:
    proc, run = tmp_path / "proc", tmp_path / "run"
    run.mkdir()
    for i, daemon in enumerate(bk.DAEMONS):
        (run / f"{daemon}.pid").write_text(f"{100 + i}\n")
        if daemon != "coredns":  # its process is gone
            fake_proc(proc, 100 + i, rss_kb=1024 * (i + 1), pss_kb=512 * (i + 1) if daemon != "etcd" else None)
    (run / "kube-proxy.pid").write_text("not a pid")
    mem = bk.process_memory(run, proc)
    assert mem["containerd"] == (1024 * 1024, 512 * 1024)
    assert mem["etcd"] == (2 * 1024 * 1024, None)  # no smaps_rollup: no PSS
    assert mem["coredns"] == (None, None) and mem["kube-proxy"] == (None, None)


def test_shims_of_this_cluster_only(tmp_path: Path) -> None:
    proc = tmp_path / "proc"
    fake_proc(proc, 10, 2048, 1024, SHIM)
    fake_proc(proc, 11, 2048, 1024, SHIM.replace(b"opsbench-cluster", b"containerd"))  # podman's or another's
    fake_proc(proc, 12, 4096, 4096, b"/usr/bin/containerd\0--config\0/run/opsbench-cluster/x\0")  # not a shim
    (proc / "self").mkdir()
    assert bk.shim_memory(proc) == (1, 2048 * 1024, 1024 * 1024)


def test_pods_memory_from_the_kubepods_cgroup(tmp_path: Path) -> None:
    pods = bk.pods_memory(fake_kubepods(tmp_path / "kubepods"))
    assert pods == {"pods": 3, "usage_mib": 500.0, "working_set_mib": 400.0, "rss_mib": 300.0,
                    "peak_usage_mib": 501.0}
    assert bk.pods_memory(tmp_path / "none") is None


def test_a_memory_sample_adds_pss_shims_and_pods_working_set(tmp_path: Path) -> None:
    proc, run = tmp_path / "proc", tmp_path / "run"
    run.mkdir()
    (run / "etcd.pid").write_text("5")
    (run / "kubelet.pid").write_text("6")
    fake_proc(proc, 5, 100 * 1024, 60 * 1024)
    fake_proc(proc, 6, 50 * 1024, 30 * 1024)
    fake_proc(proc, 7, 10 * 1024, 8 * 1024, SHIM)
    sample = bk.memory_sample(run, proc, fake_kubepods(tmp_path / "kubepods"))
    assert sample["control_plane_rss_mib"] == 150.0 and sample["control_plane_pss_mib"] == 90.0
    assert sample["shims"] == 1 and sample["shims_pss_mib"] == 8.0
    assert sample["total_mib"] == 90.0 + 8.0 + 400.0
    assert set(sample["missing"]) == set(bk.DAEMONS) - {"etcd", "kubelet"}


def test_a_running_cluster_is_refused(tmp_path: Path) -> None:
    bk.refuse_if_running(tmp_path)  # nothing there: fine
    (tmp_path / "run").mkdir()
    with pytest.raises(OpsBenchError, match="make cluster-down"):
        bk.refuse_if_running(tmp_path)
    (tmp_path / "run").rmdir()
    (tmp_path / "kubeconfig").write_text("x")
    with pytest.raises(OpsBenchError, match="already up"):
        bk.refuse_if_running(tmp_path)


def test_source_hash_is_the_roles_shell_pipeline(tmp_path: Path) -> None:
    src = tmp_path / "modules"
    (src / "b" / "a").mkdir(parents=True)
    (src / "go.mod").write_text("module x\n")
    (src / "go.sum").write_text("")
    (src / "main.go").write_text("package main\n")
    (src / "B.go").write_text("package main\n// upper case sorts first in C\n")
    (src / "b" / "a" / "z.go").write_text("package a\n")
    (src / "b" / "README").write_text("not hashed")
    (src / "b" / "link.go").symlink_to(src / "main.go")  # find -type f: symlinks are not files
    shell = subprocess.run(
        "set -o pipefail; find . -type f \\( -name '*.go' -o -name go.mod -o -name go.sum \\) | LC_ALL=C sort | "
        "xargs sha256sum | sha256sum | cut -c1-12", shell=True, executable="/bin/bash", cwd=src, capture_output=True,
        text=True, check=True).stdout.strip()
    assert bk.source_hash(src) == shell
    assert bk.bin_dir(tmp_path, "v1.2.3").name.startswith("v1.2.3-")


def test_compare_gives_medians_and_ratios_per_backend() -> None:
    k8s = {"runs_per_hour": 30.0, "phases_s": {"deploy": {"median": 90.0}, "inject": {"median": 4.0},
                                                "pristine": None},
           "trial_lifecycle_without_agent_s": {"median": 60.0}}
    local = {"runs_per_hour": 60.0, "phases_s": {"deploy": {"median": 30.0}, "inject": {"median": 0.0}},
             "trial_lifecycle_without_agent_s": {"median": 40.0}}
    comp = bk.compare(k8s, local)
    assert comp["runs_per_hour"] == {"kubernetes": 30.0, "local": 60.0, "ratio": 0.5}
    assert comp["phases_median_s"]["deploy"] == {"kubernetes": 90.0, "local": 30.0, "ratio": 3.0}
    assert comp["phases_median_s"]["inject"]["ratio"] is None  # no ratio over 0
    assert "pristine" not in comp["phases_median_s"]
    assert comp["phases_median_s"]["trial_lifecycle_without_agent_s"]["ratio"] == 1.5
    assert bk.compare(k8s, None)["runs_per_hour"]["ratio"] is None


def test_sampling_progress_samples_at_inject_and_passes_every_step_on() -> None:
    seen: list[str] = []
    samples: list[int] = []
    hooked = bk.sampling_progress(Progress(step_started=lambda s, i, n: seen.append(s)), "inject",
                                  lambda: samples.append(1))
    for step in ("deploy", "baseline", "inject", "remove", "inject"):
        hooked.step_started(step, 1, 9)
    assert seen == ["deploy", "baseline", "inject", "remove", "inject"] and samples == [1, 1]

    def broken() -> None:
        raise OSError("a process went away")

    bk.sampling_progress(Progress(), "inject", broken).step_started("inject", 1, 1)  # a sample never stops a trial


def side(runs_per_hour: float, finished: int = 2) -> dict[str, Any]:
    return {"campaign": "c", "scenarios": ["s"], "wall_s": 100.0, "planned": 2, "trials": 2, "finished": finished,
            "statuses": ["completed"], "runs_per_hour": runs_per_hour,
            "phases_s": {"deploy": {"median": 10.0, "min": 10.0, "max": 10.0, "n": 1}},
            "trial_lifecycle_without_agent_s": {"median": 20.0, "min": 20.0, "max": 20.0, "n": 2},
            "trial_lifecycle_with_deploy_share_s": None}


class Fakes:
    """bench_k8s's heavy parts replaced: the playbooks, the builds, the campaigns, the clock."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, start_ok: bool = True,
                 k8s_raises: bool = False, k8s_finished: int = 2) -> None:
        monkeypatch.setenv("OPSBENCH_HOME", str(tmp_path / "state"))
        self.calls: list[str] = []
        self.start_ok, self.k8s_raises, self.k8s_finished = start_ok, k8s_raises, k8s_finished
        monkeypatch.setattr(bk, "run_timed", self.run_timed)
        monkeypatch.setattr(bk, "cached_build", lambda home, rel, echo, log: self.called("cached_build") or {
            "measured": False, "bin": "/b", "build_seconds": 900, "note": "cached"})
        monkeypatch.setattr(bk, "cold_build", lambda rel, echo: self.called("cold_build") or {
            "measured": True, "cold": {"wall_s": 1.0, "build_seconds": 1, "downloaded_mib": 1.0,
                                       "gomodcache_mib": 2.0, "gocache_mib": 3.0},
            "warm": {"wall_s": 0.5, "build_seconds": 0}})
        monkeypatch.setattr(bk, "measure_backend", self.measure_backend)
        monkeypatch.setattr(bk, "memory_sample", lambda run_dir: {"control_plane_pss_mib": 1.0,
                                                                  "control_plane_rss_mib": 2.0, "pods": None})
        monkeypatch.setattr(bk, "pods_memory", lambda: None)
        monkeypatch.setattr(bk.time, "sleep", lambda s: None)

    def called(self, what: str) -> None:
        self.calls.append(what)

    def run_timed(self, step: str, playbook: str, extravars: dict[str, Any], workdir: Path) -> bk.Timed:
        self.calls.append(playbook)
        if playbook == "cluster.yml":
            ok = self.start_ok
            return bk.Timed(ok, 50.0, {bk.NODE_READY_TASK: 7.5, "Start containerd": 3.0},
                            {"k8s_cluster": {"version": "v1.34.4", "runtime": "containerd://1.6"}},
                            [] if ok else ["kubelet did not come up"])
        return bk.Timed(True, 12.0, {}, {}, [])

    def measure_backend(self, scenarios: list[Any], trials: int, progress: Progress,
                        podman_memory: bool = False) -> dict[str, Any]:
        backend = "local" if podman_memory else "kubernetes"
        self.calls.append(f"campaign-{backend}")
        if backend == "kubernetes":
            if self.k8s_raises:
                raise KeyboardInterrupt
            progress.step_started("inject", 3, 12)  # the memory hook
            return side(30.0, self.k8s_finished)
        return side(60.0)


def test_the_bench_runs_in_order_and_the_report_adds_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fakes = Fakes(monkeypatch, tmp_path)
    report = bk.bench_k8s([], [], 2, True, None, Progress(), lambda text: None)
    assert fakes.calls == ["cold_build", "cached_build", "cluster.yml", "campaign-kubernetes", "cluster_down.yml",
                           "campaign-local"]
    assert report["start"]["node_ready_wait_s"] == 7.5 and report["start"]["version"] == "v1.34.4"
    assert report["memory"]["with_shop_samples"] == 1 and report["memory"]["with_shop"] is not None
    assert report["comparison"]["runs_per_hour"]["ratio"] == 0.5
    assert report["down"]["ok"] and bk.complete(report)
    assert isinstance(report["load_1m_start"], float) and isinstance(report["load_1m_end"], float)
    text = bk.render(report)
    for expected in ("build, cold", "build, warm", "start (cluster.yml", "node Ready wait 7.5", "runs/hour",
                     "down (cluster_down.yml): 12.0 s", "1-min load"):
        assert expected in text
    json.dumps(report)  # --json


def test_no_local_campaign_after_an_unfinished_k8s_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fakes = Fakes(monkeypatch, tmp_path, k8s_finished=1)
    scn = SimpleNamespace(id="k8s-x", backend="kubernetes")
    report = bk.bench_k8s([scn], [scn], 2, False, None, Progress(), lambda text: None)  # type: ignore[list-item]
    assert "campaign-local" not in fakes.calls and fakes.calls[-1] == "cluster_down.yml"
    assert report["local"] is None and report["local_measured"].startswith("not measured: 1 of 2")
    assert not bk.complete(report)
    assert "local backend not measured" in bk.render(report)


def test_a_cluster_already_up_is_refused_before_any_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fakes = Fakes(monkeypatch, tmp_path)
    (tmp_path / "state" / "cluster").mkdir(parents=True)
    (tmp_path / "state" / "cluster" / "kubeconfig").write_text("x")
    with pytest.raises(OpsBenchError, match="make cluster-down"):
        bk.bench_k8s([], [], 2, True, None, Progress(), lambda text: None)
    assert fakes.calls == []  # nothing built, started or taken down: the running cluster is not the bench's


@pytest.mark.parametrize("start_ok, k8s_raises", [(False, False), (True, True)])
def test_the_cluster_is_taken_down_whatever_happens(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    start_ok: bool, k8s_raises: bool) -> None:
    fakes = Fakes(monkeypatch, tmp_path, start_ok=start_ok, k8s_raises=k8s_raises)
    with pytest.raises((OpsBenchError, KeyboardInterrupt)):
        bk.bench_k8s([], [], 1, False, None, Progress(), lambda text: None)
    assert fakes.calls[-1] == "cluster_down.yml" and "campaign-local" not in fakes.calls


def test_not_complete_when_down_failed_or_a_trial_did_not_finish() -> None:
    good = {"down": {"ok": True}, "kubernetes": side(30.0), "local": side(60.0)}
    assert bk.complete(good)
    assert not bk.complete({**good, "down": {"ok": False}})
    assert not bk.complete({**good, "local": side(60.0, finished=1)})
    assert not bk.complete({**good, "kubernetes": None})
    assert not bk.complete({**good, "local": {**side(60.0, finished=1), "trials": 1}})  # interrupted: one not begun


def test_cold_build_measures_both_builds_and_removes_its_folders(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPSBENCH_HOME", str(tmp_path))
    builds: list[dict[str, Any]] = []

    def fake_build(home: Path, release: str | None, log: Path, go_env: dict[str, str] | None = None) -> dict[str, Any]:
        assert go_env is not None
        builds.append({"home": home, "bin_before": (home / "bin").exists(), **go_env})
        download = Path(go_env["GOMODCACHE"]) / "cache" / "download"
        download.mkdir(parents=True, exist_ok=True)
        (download / "k8s.zip").write_bytes(b"z" * 2**20)
        (Path(go_env["GOMODCACHE"]) / "k8s.io@v1").mkdir(exist_ok=True)
        (Path(go_env["GOMODCACHE"]) / "k8s.io@v1" / "a.go").write_bytes(b"g" * 2**20)
        (Path(go_env["GOMODCACHE"]) / "k8s.io@v1").chmod(0o555)  # as Go leaves it
        (Path(go_env["GOCACHE"]) / "obj").write_bytes(b"o" * 3 * 2**20)
        (home / "bin" / "v1-x").mkdir(parents=True, exist_ok=True)
        return {"wall_s": 1.0, "build_seconds": 1}

    monkeypatch.setattr(bk, "build", fake_build)
    out = bk.cold_build(None, lambda text: None)
    assert out["cold"]["downloaded_mib"] == 1.0 and out["cold"]["gomodcache_mib"] == 2.0
    assert out["cold"]["gocache_mib"] == 3.0
    assert [b["bin_before"] for b in builds] == [False, False]  # the warm rebuild found no binaries
    assert builds[0]["GOCACHE"] == builds[1]["GOCACHE"]  # ... but the same Go caches
    assert not list(tmp_path.glob("bench-k8s-cold-*"))  # GBs in real life: removed


def test_build_runs_the_build_only_playbook_with_its_go_caches(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPSBENCH_HOME", str(tmp_path))
    seen: dict[str, Any] = {}

    def fake_run(argv: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
        seen.update(argv=argv, env=kw["env"])
        bins = bk.bin_dir(tmp_path / "home", "v9.9.9")
        bins.mkdir(parents=True)
        (bins / "build.json").write_text(json.dumps({"build_seconds": 42, "release": "v9.9.9", "go": "go1"}))
        return subprocess.CompletedProcess(argv, 0)

    monkeypatch.setattr(bk.subprocess, "run", fake_run)
    out = bk.build(tmp_path / "home", "v9.9.9", tmp_path / "log", {"GOCACHE": "/gc", "GOMODCACHE": "/gm"})
    extra = json.loads(seen["argv"][seen["argv"].index("-e") + 1])
    assert extra == {"k8s_cluster_release": "v9.9.9", "opsbench_cluster_build_only": True,
                     "k8s_cluster_home": str(tmp_path / "home"), "k8s_cluster_go_cache": "/gc"}
    assert seen["argv"][1].endswith("playbooks/cluster.yml")
    assert seen["env"]["GOMODCACHE"] == "/gm" and seen["env"]["GOCACHE"] == "/gc"
    assert out["build_seconds"] == 42

    def failing(argv: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
        kw["stdout"].write("TASK [x]\nfatal: no space left on device\n")
        return subprocess.CompletedProcess(argv, 2)

    monkeypatch.setattr(bk.subprocess, "run", failing)
    with pytest.raises(OpsBenchError, match="no space left"):
        bk.build(tmp_path / "home", "v9.9.9", tmp_path / "log")


def test_the_cli_dispatches_kubernetes_with_scenarios_split_by_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}

    def fake(k8s: list[Any], local: list[Any], trials: int, cold: bool, release: str | None, progress: Progress,
             echo: Any) -> dict[str, Any]:
        seen.update(k8s=[s.id for s in k8s], local=[s.id for s in local], trials=trials, cold=cold, release=release)
        return {"down": {"ok": True}, "kubernetes": side(30.0), "local": side(60.0)}

    monkeypatch.setattr(bk, "bench_k8s", fake)
    result = CliRunner().invoke(main, ["bench", "--backend", "kubernetes", "--cold", "--trials", "3",
                                       "--k8s-release", "v1.34.4", "--json", "--quiet", "k8s-shop-cart-scaled-to-zero"])
    assert result.exit_code == 0, result.output
    assert seen == {"k8s": ["k8s-shop-cart-scaled-to-zero"], "local": [bk.DEFAULT_LOCAL_SCENARIO], "trials": 3,
                    "cold": True, "release": "v1.34.4"}
    assert json.loads(result.output)["local"]["runs_per_hour"] == 60.0

    result = CliRunner().invoke(main, ["bench", "--backend", "kubernetes", "--quiet", "--json"])
    assert result.exit_code == 0 and seen["k8s"] == [bk.DEFAULT_K8S_SCENARIO] and seen["trials"] == 2
    assert not seen["cold"]

    monkeypatch.setattr(bk, "bench_k8s", lambda *a: {"down": {"ok": False}, "kubernetes": side(1.0),
                                                     "local": side(1.0), "comparison": bk.compare(None, None)})
    monkeypatch.setattr(bk, "render", lambda report: "table")
    result = CliRunner().invoke(main, ["bench", "--backend", "kubernetes", "--quiet"])
    assert result.exit_code == 1 and "table" in result.output  # the cluster may still be up: not a success


@pytest.mark.parametrize("args, message", [
    (["--backend", "kubernetes", "--cuj"], "not with --cuj"),
    (["--backend", "kubernetes", "--parallel", "1,2"], "not with --parallel"),
    (["--cold"], "go with --backend kubernetes"),
    (["--k8s-release", "v1.35.0"], "go with --backend kubernetes"),
])
def test_the_cli_refuses_mixed_modes(monkeypatch: pytest.MonkeyPatch, args: list[str], message: str) -> None:
    monkeypatch.setattr(bk, "bench_k8s", lambda *a: pytest.fail("must not run"))
    result = CliRunner().invoke(main, ["bench", *args])
    assert result.exit_code == 2 and message in result.output
