"""Benchmark the local backend: warm deploy to a healthy baseline, memory under load, teardown.

Uses the same playbooks, roles and checks as a run of `shop-healthy-baseline` (through
ansible-runner), so the figures are what a run pays. Run with ``make bench-local`` or
``python -m orchestrator.harness.bench_local [--repeats N] [--load-seconds S] [--json]``.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import click

from orchestrator.argspecs import resolve_role_vars
from orchestrator.catalog import find_scenario
from orchestrator.ports import free_port_base
from orchestrator.runner import ansible_env, run_playbook

_UNITS = {"b": 1, "kb": 1e3, "mb": 1e6, "gb": 1e9, "kib": 1024, "mib": 1024**2, "gib": 1024**3}


def _bytes(text: str) -> float:
    m = re.match(r"([\d.]+)\s*([a-zA-Z]+)", text.strip())
    if not m:
        return 0.0
    return float(m.group(1)) * _UNITS.get(m.group(2).lower(), 1)


def _podman(*args: str) -> str:
    env = {**os.environ, **{k: v for k, v in ansible_env().items() if k.startswith("CONTAINERS_")}}
    return subprocess.run(["podman", *args], env=env, capture_output=True, text=True, check=True).stdout


def _memory(run_id: str) -> dict[str, float]:
    names = _podman("ps", "--filter", f"label=opsbench.run={run_id}", "--format", "{{.Names}}").split()
    stats = json.loads(_podman("stats", "--no-stream", "--format", "json", *names))
    usage = sum(_bytes(s["mem_usage"].split("/")[0]) for s in stats)
    return {"containers": len(names), "cgroup_memory_mib": round(usage / 1024**2, 1)}


def _leftovers(run_id: str) -> int:
    containers = _podman("ps", "-a", "--filter", f"label=opsbench.run={run_id}", "--format", "{{.Names}}").split()
    networks = [n for n in _podman("network", "ls", "--format", "{{.Name}}").split() if run_id in n]
    volumes = [v for v in _podman("volume", "ls", "--format", "{{.Name}}").split() if run_id in v]
    return len(containers) + len(networks) + len(volumes)


def one_trial(scenario: str, load_seconds: int, workdir: Path, i: int) -> dict[str, Any]:
    scn = find_scenario(scenario)
    run_id = f"bench{i}-{os.getpid()}"
    common = {"opsbench_run_id": run_id, "opsbench_run_dir": str(workdir / run_id),
              "opsbench_port_base": free_port_base()}
    env_item = {"name": "environment", "role": scn.environment_role,
                "vars": resolve_role_vars(scn.environment_role, "deploy", scn.environment["args"])}
    checks = [{"name": c["name"], "role": c["role"], "timeout": c["timeout"],
               "vars": resolve_role_vars(c["role"], "main", c["args"])} for c in scn.checks("baseline")]
    out: dict[str, Any] = {}
    t0 = time.monotonic()
    try:
        deployed = run_playbook("deploy", "deploy.yml", {**common, "opsbench_environment": env_item},
                                workdir / f"{run_id}-deploy")
        if not deployed.ok:
            raise click.ClickException(f"deploy failed: {deployed.failures}")
        out["deploy_s"] = round(time.monotonic() - t0, 1)
        healthy = run_playbook("baseline", "check.yml", {**common, "opsbench_checks": checks},
                               workdir / f"{run_id}-baseline")
        if not healthy.ok or not all(c.get("ok") for c in healthy.stats.get("checks", {}).values()):
            raise click.ClickException(f"baseline not healthy: {healthy.stats} {healthy.failures}")
        out["deploy_to_healthy_s"] = round(time.monotonic() - t0, 1)
        time.sleep(load_seconds)
        out.update(_memory(run_id))
    finally:
        t1 = time.monotonic()
        run_playbook("teardown", "teardown.yml", {**common, "opsbench_environment": env_item},
                     workdir / f"{run_id}-teardown")
        out["teardown_s"] = round(time.monotonic() - t1, 1)
        out["leftovers"] = _leftovers(run_id)
    return out


@click.command()
@click.option("--scenario", default="shop-healthy-baseline", show_default=True)
@click.option("--repeats", default=2, show_default=True)
@click.option("--load-seconds", default=30, show_default=True, help="Load time before sampling memory.")
@click.option("--json", "as_json", is_flag=True)
def main(scenario: str, repeats: int, load_seconds: int, as_json: bool) -> None:
    """Warm deploy to healthy, memory under load and teardown of the local backend."""
    trials = []
    with tempfile.TemporaryDirectory(prefix="opsbench-bench-local-") as tmp:
        for i in range(repeats):
            trials.append(one_trial(scenario, load_seconds, Path(tmp), i))
            if not as_json:
                click.echo(f"  trial {i + 1}/{repeats}: {trials[-1]}", err=True)
    summary = {k: round(statistics.median(t[k] for t in trials), 1)
               for k in ("deploy_s", "deploy_to_healthy_s", "teardown_s", "cgroup_memory_mib")}
    report = {"scenario": scenario, "repeats": repeats, "median": summary, "trials": trials,
              "leftovers_total": sum(t["leftovers"] for t in trials)}
    if as_json:
        click.echo(json.dumps(report, indent=2))
        return
    click.echo(f"local backend, {scenario}, {repeats} trials (medians):")
    click.echo(f"  deploy (containers up, all targets scraped): {summary['deploy_s']} s")
    click.echo(f"  deploy to healthy baseline (checks pass):    {summary['deploy_to_healthy_s']} s")
    click.echo(f"  memory of all containers under load:         {summary['cgroup_memory_mib']} MiB (cgroup usage)")
    click.echo(f"  teardown:                                    {summary['teardown_s']} s, "
               f"leftovers {report['leftovers_total']}")


if __name__ == "__main__":
    main()
