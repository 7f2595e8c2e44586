"""Benchmark: the orchestrator's cost per step against bare ``ansible-playbook``.

Deploys loopweb once, then runs a fault cycle of loopweb-web-down (inject, manifestation check, remove, recovery
check: the playbooks of a trial that change or wait on the world) with the same extra vars N times each way,
interleaved so machine noise hits both alike, and prints per-way statistics and the ratio, per step and per cycle.
Run with ``make bench`` or ``python -m orchestrator.harness.bench [--repeats N] [--json]``.
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
from orchestrator.ports import free_port_base
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


OVERHEAD_SCENARIO = "loopweb-web-down"
CYCLE = (("inject", "inject.yml"), ("manifestation", "check.yml"), ("remove", "remove.yml"),
         ("recovery", "check.yml"))
"""A trial's world-changing steps without the agent: inject, wait for the alert, remove, wait for recovery."""


def _cycle_vars(common: dict[str, Any], work: Path) -> dict[str, dict[str, Any]]:
    from orchestrator.catalog import find_scenario
    from orchestrator.run_vars import scenario_vars

    v = scenario_vars(find_scenario(OVERHEAD_SCENARIO), str(common["opsbench_run_id"]), work / "run")
    return {"inject": {**common, "opsbench_faults": v["faults"]},
            "remove": {**common, "opsbench_faults": v["faults"]},
            "manifestation": {**common, "opsbench_checks": v["checks"]["manifestation"]},
            "recovery": {**common, "opsbench_checks": v["checks"]["recovery"]}}


def measure_overhead(repeats: int, echo: Any = lambda text: None) -> dict[str, Any]:
    """Time a fault cycle of loopweb-web-down (inject, manifestation check, remove, recovery check) through the
    orchestrator and through bare ansible-playbook with the same extra vars, cycles interleaved so machine noise
    hits both ways alike. Reports each step and the cycle."""
    from orchestrator.argspecs import resolve_role_vars

    with tempfile.TemporaryDirectory(prefix="opsbench-bench-") as tmp:
        work = Path(tmp)
        common = {"opsbench_run_id": "bench", "opsbench_run_dir": str(work / "run"),
                  "opsbench_port_base": free_port_base()}
        env_item = {"name": "environment", "role": "env_loopweb",
                    "vars": resolve_role_vars("env_loopweb", "deploy", {})}
        step_vars = _cycle_vars(common, work)
        deployed = run_playbook("deploy", "deploy.yml", {**common, "opsbench_environment": env_item},
                                work / "deploy")
        if not deployed.ok:
            raise click.ClickException(f"deploy failed: {deployed.failures}")
        bare: dict[str, list[float]] = {step: [] for step, _ in CYCLE}
        orch: dict[str, list[float]] = {step: [] for step, _ in CYCLE}
        try:
            for i in range(repeats):
                for step, playbook in CYCLE:
                    bare[step].append(_bare(playbook, step_vars[step], work))
                for step, playbook in CYCLE:
                    orch[step].append(_orchestrated(playbook, step_vars[step], work, i))
                echo(f"  cycle {i + 1}/{repeats}: bare {sum(b[-1] for b in bare.values()):.2f}s  "
                     f"orchestrator {sum(o[-1] for o in orch.values()):.2f}s")
        finally:
            run_playbook("teardown", "teardown.yml", {**common, "opsbench_environment": env_item},
                         work / "teardown")
    bare_cycle = [sum(b[i] for b in bare.values()) for i in range(repeats)]
    orch_cycle = [sum(o[i] for o in orch.values()) for i in range(repeats)]
    return {"step": f"fault cycle of {OVERHEAD_SCENARIO} ({', '.join(s for s, _ in CYCLE)})", "repeats": repeats,
            "bare_ansible_playbook_s": _stats(bare_cycle), "orchestrator_s": _stats(orch_cycle),
            "ratio_mean": round(statistics.mean(orch_cycle) / statistics.mean(bare_cycle), 3),
            "ratio_median": round(statistics.median(orch_cycle) / statistics.median(bare_cycle), 3),
            "steps": {step: {"bare_median_s": round(statistics.median(bare[step]), 3),
                             "orchestrator_median_s": round(statistics.median(orch[step]), 3),
                             "ratio_median": round(statistics.median(orch[step]) / statistics.median(bare[step]), 3)}
                      for step, _ in CYCLE}}


@click.command()
@click.option("--repeats", default=5, show_default=True, help="Runs of each way.")
@click.option("--json", "as_json", is_flag=True)
def main(repeats: int, as_json: bool) -> None:
    """Time a fault cycle (inject, alert, remove, recovery) via the orchestrator and via bare ansible-playbook."""
    report = measure_overhead(repeats, (lambda text: None) if as_json else (lambda text: click.echo(text, err=True)))
    if as_json:
        click.echo(json.dumps(report, indent=2))
    else:
        click.echo(f"{report['step']}, {repeats} repeats each, interleaved")
        for way in ("bare_ansible_playbook_s", "orchestrator_s"):
            s = report[way]
            click.echo(f"  {way:<26} mean {s['mean']:.2f}s  median {s['median']:.2f}s  "
                       f"min {s['min']:.2f}s  max {s['max']:.2f}s")
        click.echo(f"  orchestrator / bare: {report['ratio_mean']:.2f} (mean), {report['ratio_median']:.2f} (median)")
        for step, s in report["steps"].items():
            click.echo(f"  {step:<14} bare {s['bare_median_s']:.2f}s  orchestrator {s['orchestrator_median_s']:.2f}s"
                       f"  ratio {s['ratio_median']:.2f}")


if __name__ == "__main__":
    main()
