"""`opsbench awx export` (library: `orchestrator.awx`)."""

from __future__ import annotations

from pathlib import Path

import click

from orchestrator.cli.common import written


@click.group()
def awx() -> None:
    """AWX: export the job templates and workflows that run OpsBench's playbooks (docs/awx.md)."""


@awx.command("export")
@click.option("--output", "-o", type=click.Path(dir_okay=False, path_type=Path), default=Path("awx/opsbench_awx.yml"),
              show_default=True, help="Where to write the playbook.")
@click.option("--scenario", "scenarios", multiple=True,
              help="Scenario id to export (repeatable; default: every scenario of the targets' backends).")
@click.option("--cluster", "clusters", multiple=True, metavar="NAME=KUBECONFIG[:ID,ID...]",
              help="A cluster of the campaign, its kubeconfig (read when the playbook runs) and optionally its "
                   "share of its backend's scenarios (repeatable). No --cluster and no --host: one cluster 'kind' "
                   "with ~/.kube/config and one host 'local'.")
@click.option("--host", "hosts", multiple=True, metavar="NAME[:ID,ID...]",
              help="A podman host for local-backend scenarios: NAME is the AWX instance group whose execution node "
                   "runs on it; optionally its share of the scenarios (repeatable).")
@click.option("--trials", type=click.IntRange(1, 1000), default=1, show_default=True,
              help="Trials per scenario and cluster (ITBench's experiments file: trials x scenario list).")
@click.option("--agent", default=None, help="Agent command (default: each scenario's baseline agent).")
@click.option("--scm-url", default="https://github.com/example/opsbench.git", show_default=True,
              help="Git URL of the project AWX checks out.")
@click.option("--scm-branch", default="main", show_default=True)
def awx_export(output: Path, scenarios: tuple[str, ...], clusters: tuple[str, ...], hosts: tuple[str, ...],
               trials: int, agent: str | None, scm_url: str, scm_branch: str) -> None:
    """Write a playbook (awx.awx collection) that creates the AWX objects and, with --tags all,launch, a campaign."""
    from orchestrator.awx import write_export

    click.echo(written("--output", output, lambda out: write_export(
        out, scenarios, clusters, hosts, trials=trials, agent=agent, scm_url=scm_url, scm_branch=scm_branch)))


@awx.command("ee")
@click.option("--output", "-o", type=click.Path(dir_okay=False, path_type=Path),
              default=Path("playbooks/execution-environment.yml"), show_default=True,
              help="Where to write the definition.")
def awx_ee(output: Path) -> None:
    """Write the execution environment's definition for ansible-builder (from pyproject.toml)."""
    from orchestrator.awx_ee import write

    click.echo(written("--output", output, write))


COMMANDS = (awx,)
