"""Benchmark: the orchestrator's cost per step against bare ``ansible-playbook``.

Deploys loopweb once, then runs the same playbook with the same extra vars N times each way,
interleaved so machine noise hits both alike, and prints per-way statistics and the ratio.
Run with ``make bench`` or ``python -m orchestrator.bench [--repeats N] [--json]``.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import click

from orchestrator import paths
from orchestrator.lifecycle import free_port_base
from orchestrator.runner import ansible_env, run_playbook


def _bare(playbook: str, extravars: dict[str, Any], workdir: Path) -> float:
    vars_file = workdir / "extravars.json"
    vars_file.write_text(json.dumps(extravars))
    start = time.monotonic()
    subprocess.run(
        [str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(paths.INVENTORY),
         "-e", f"@{vars_file}", str(paths.PLAYBOOKS_DIR / playbook)],
        env=ansible_env(), check=True, capture_output=True, cwd=paths.PROJECT_ROOT,
    )
    return time.monotonic() - start


def _orchestrated(playbook: str, extravars: dict[str, Any], workdir: Path, i: int) -> float:
    start = time.monotonic()
    result = run_playbook("bench", playbook, extravars, workdir / f"step-{i}")
    if not result.ok:
        raise click.ClickException(f"{playbook} failed under the orchestrator: {result.failures}")
    return time.monotonic() - start


def _stats(samples: list[float]) -> dict[str, float]:
    return {"mean": round(statistics.mean(samples), 3), "median": round(statistics.median(samples), 3),
            "min": round(min(samples), 3), "max": round(max(samples), 3)}


def measure_overhead(repeats: int, echo: Any = lambda text: None) -> dict[str, Any]:
    """Time the baseline check step on loopweb via the orchestrator and via bare ansible-playbook, interleaved."""
    from orchestrator.argspecs import resolve_role_vars

    with tempfile.TemporaryDirectory(prefix="opsbench-bench-") as tmp:
        work = Path(tmp)
        common = {"opsbench_run_id": "bench", "opsbench_run_dir": str(work / "run"),
                  "opsbench_port_base": free_port_base()}
        env_item = {"name": "environment", "role": "env_loopweb",
                    "vars": resolve_role_vars("env_loopweb", "deploy", {})}
        check = {"name": "gateway-serves", "role": "check_http", "timeout": 20,
                 "vars": resolve_role_vars("check_http", "main", {"endpoint": "gateway", "path": "/products"})}
        step_vars = {**common, "opsbench_checks": [check]}
        deployed = run_playbook("deploy", "deploy.yml", {**common, "opsbench_environment": env_item},
                                work / "deploy")
        if not deployed.ok:
            raise click.ClickException(f"deploy failed: {deployed.failures}")
        try:
            bare, orch = [], []
            for i in range(repeats):
                bare.append(_bare("check.yml", step_vars, work))
                orch.append(_orchestrated("check.yml", step_vars, work, i))
                echo(f"  repeat {i + 1}/{repeats}: bare {bare[-1]:.2f}s  orchestrator {orch[-1]:.2f}s")
        finally:
            run_playbook("teardown", "teardown.yml", {**common, "opsbench_environment": env_item},
                         work / "teardown")
    return {"step": "baseline check (playbooks/check.yml, 1 check_http)", "repeats": repeats,
            "bare_ansible_playbook_s": _stats(bare), "orchestrator_s": _stats(orch),
            "ratio_mean": round(statistics.mean(orch) / statistics.mean(bare), 3),
            "ratio_median": round(statistics.median(orch) / statistics.median(bare), 3)}


@click.command()
@click.option("--repeats", default=5, show_default=True, help="Runs of each way.")
@click.option("--json", "as_json", is_flag=True)
def main(repeats: int, as_json: bool) -> None:
    """Time one lifecycle step (the baseline check) via the orchestrator and via bare ansible-playbook."""
    report = measure_overhead(repeats, (lambda text: None) if as_json else (lambda text: click.echo(text, err=True)))
    if as_json:
        click.echo(json.dumps(report, indent=2))
    else:
        click.echo(f"step: {report['step']}, {repeats} repeats each, interleaved")
        for way in ("bare_ansible_playbook_s", "orchestrator_s"):
            s = report[way]
            click.echo(f"  {way:<26} mean {s['mean']:.2f}s  median {s['median']:.2f}s  "
                       f"min {s['min']:.2f}s  max {s['max']:.2f}s")
        click.echo(f"  orchestrator / bare: {report['ratio_mean']:.2f} (mean), {report['ratio_median']:.2f} (median)")


if __name__ == "__main__":
    main()
