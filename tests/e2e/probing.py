"""The probing agent (agents/prober.py) in a live run of any environment: what it is pointed at, how it is started,
and what its report must show (issue 19: an agent reaches only its gateway and cannot touch the host or the
benchmark).

The targets are written while the run goes on, once the environment is deployed (`environment.json` exists): every
endpoint the environment publishes that the agent's manifest leaves out (Prometheus, Alertmanager), every file it
publishes for checks, evaluators and control (logs, configuration, the flags file, the inventory of a CIS host),
the run's containers at their addresses on the run's podman network, every exporter and service Prometheus
scrapes, and a decoy standing for another run's gateway on the host's loopback."""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from orchestrator import paths
from orchestrator.runner import ansible_env
from orchestrator.sandbox import storage_dirs

PROBER = paths.PROJECT_ROOT / "tests" / "e2e" / "agents" / "prober.py"
ALWAYS = {"write /etc", "write the interpreter", "write the venv", "read the invoking user's ~/.ssh",
          "podman against the storage", "read another run's agent dir 0", "connect another run's gateway",
          "host loopback ports beyond the manifest's"}
"""Cells every environment's report holds."""
HIDDEN_ENDPOINTS = set(yaml.safe_load((paths.PROJECT_ROOT / "roles" / "agent_access" / "defaults" / "main.yml")
                                      .read_text())["agent_access_hidden_endpoints"])
"""The environment's endpoints that handover leaves out of the agent's manifest (Prometheus, Alertmanager)."""


def podman(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **{k: v for k, v in ansible_env().items() if k.startswith("CONTAINERS_")}}
    return subprocess.run(["podman", *args], env=env, capture_output=True, text=True, check=False)


class Decoy:
    """Stands for another run's gateway on the host's loopback."""

    def __init__(self) -> None:
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
        self.address = f"127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _files(env: dict[str, Any]) -> dict[str, str]:
    """The files the environment publishes, by cell name (the flags file keeps its own name)."""
    files = {f"log {k}": v for k, v in (env.get("logs") or {}).items() if isinstance(v, str)}
    for key, value in (env.get("control") or {}).items():
        if isinstance(value, str) and value.startswith("/"):
            files["the flags file" if key == "flags_file" else f"control {key}"] = value
    inventory = (env.get("targets") or {}).get("inventory")
    if isinstance(inventory, str):
        files["the target inventory"] = inventory
    tree = (env.get("workspace") or {}).get("tree")
    if isinstance(tree, str):  # the agent works on it only through the gateway's terminal tools
        project = sorted((env.get("workspace") or {}).get("projects") or ["."])[0]
        files["the workspace tree on the host"] = f"{tree}/{project}/Makefile"
    return files


def targets_of(env: dict[str, Any], run_id: str, decoy: str, container_port: int) -> dict[str, str]:
    """What the prober must fail to reach in the run `run_id` whose `environment.json` is `env`."""
    targets: dict[str, str] = {"another run's gateway": decoy, **_files(env)}
    for name, url in (env.get("endpoints") or {}).items():
        if name in HIDDEN_ENDPOINTS:  # the others (the application's front door) are in the agent's manifest
            targets[name] = url.split("//", 1)[1].split("/", 1)[0]
    ips: dict[str, str] = {}  # container name -> its address on the run's podman network
    for name in podman("ps", "-a", "--filter", f"label=opsbench.run={run_id}", "--format", "{{.Names}}").stdout.split():
        ip = podman("inspect", "--format", "{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}", name)
        if ip.stdout.split():
            ips[name] = ip.stdout.split()[0]
            targets[f"container {name}"] = f"{ips[name]}:{container_port}"
    prometheus = (env.get("endpoints") or {}).get("prometheus")
    if prometheus:  # every exporter and service Prometheus scrapes, at the address it scrapes (host's side)
        try:
            with urllib.request.urlopen(prometheus + "/api/v1/targets", timeout=10) as resp:
                for t in json.loads(resp.read())["data"]["activeTargets"]:
                    host, _, port = t["discoveredLabels"]["__address__"].rpartition(":")
                    if host in ips or host[:1].isdigit():
                        targets[f"scrape target {t['labels'].get('instance')}"] = f"{ips.get(host, host)}:{port}"
        except OSError:
            pass
    return targets


def _write_targets(home: Path, out: Path, decoy: str, container_port: int, stop: threading.Event) -> None:
    while not stop.is_set():
        envs = list((home / "runs").glob("*/environment.json"))
        if envs:
            break
        time.sleep(1)
    else:
        return
    time.sleep(2)  # the file is written whole, but give Prometheus a scrape
    env = json.loads(envs[0].read_text())
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(targets_of(env, envs[0].parent.name, decoy, container_port)))
    tmp.rename(out)  # the prober waits for the file: it must never read half of it


@contextmanager
def prober(home: Path, then: str, container_port: int = 8080, wait: int = 240) -> Iterator[tuple[str, dict[str, str]]]:
    """The prober's command line (then the baseline agent `then`, a module with its arguments) and the environment
    the run needs, while a thread writes its targets once the run in `home` (one run at a time) is deployed."""
    probe_dir = home / "probe"
    probe_dir.mkdir(exist_ok=True)
    other = home / "runs" / "another-run" / "agent"
    (other / "workspace").mkdir(parents=True, exist_ok=True)
    (other / "output.json").write_text('{"entities": []}')
    decoy, stop = Decoy(), threading.Event()
    targets = probe_dir / "targets.json"
    writer = threading.Thread(target=_write_targets, args=(home, targets, decoy.address, container_port, stop),
                              daemon=True)
    writer.start()
    storage = " ".join(f"--storage {d}" for d in storage_dirs())
    command = (f"{sys.executable} {PROBER} --home {Path.home()} {storage} --agent-dir {other} --targets {targets} "
               f"--wait {wait} --then {then}")
    try:
        yield command, {"OPSBENCH_AGENT_VISIBLE": str(probe_dir)}
    finally:
        stop.set()
        decoy.close()


def assert_refused_everything(run_dir: Path, result: dict[str, Any], expected: set[str],
                              sanctioned: frozenset[str] = frozenset()) -> dict[str, Any]:
    """The report shows the cells of every environment and `expected`, each refused but the `sanctioned` ones
    (what the manifest hands the agent on purpose: they must succeed, read-only); the gateway still answered;
    the agent ran unprivileged with every protection in force and its network helper is gone. The report."""
    report: dict[str, Any] = json.loads((run_dir / "agent" / "workspace" / "probe.json").read_text())
    cells = report["cells"]
    assert ALWAYS | expected | sanctioned <= set(cells), sorted(ALWAYS | expected | sanctioned - set(cells))
    assert [k for k, v in cells.items() if not v["refused"] and k not in sanctioned] == [], {
        k: v for k, v in cells.items() if not v["refused"] and k not in sanctioned}
    assert all(not cells[k]["refused"] for k in sanctioned), {k: cells[k] for k in sanctioned}
    assert report["gateway"]["reachable"], report["gateway"]
    assert report["uid"] != 0
    isolation = result["agent"]["isolation"]
    assert isolation["sandbox"] == "namespaces" and isolation["missing"] == [], isolation
    assert isolation["network"]["mode"] == "egress"
    assert result["agent"]["status"] == "exited", result["agent"]  # the baseline agent ran after
    left = subprocess.run(["pgrep", "-af", "slirp4netns"], capture_output=True, text=True, check=False).stdout
    assert str(run_dir) not in left, left
    return report
