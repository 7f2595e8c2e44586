"""`opsbench new fault` and `opsbench new scenario` (library: `orchestrator.scaffold`)."""

from __future__ import annotations

import click


@click.group()
def new() -> None:
    """Scaffold a fault role or a scenario that follows the conventions (docs/authoring.md)."""


@new.command("fault")
@click.argument("name")
@click.option("--podman", is_flag=True,
              help="The fault acts on the run's podman containers: depend on podman_control and use its modules.")
def new_fault(name: str, podman: bool) -> None:
    """Scaffold roles/fault_NAME/ (NAME with or without the fault_ prefix) and its e2e test stub."""
    from orchestrator.scaffold import new_fault as scaffold_fault
    from orchestrator.scaffold import render_scaffolded

    done = scaffold_fault(name, podman=podman)
    click.echo(f"scaffolded {done.files[0].parent.parent.name}:")
    click.echo(render_scaffolded(done))


@new.command("scenario")
@click.argument("scenario_id", metavar="ID")
@click.option("--fault", "faults", multiple=True, required=True, metavar="ROLE",
              help="Fault role to inject (repeat for several, in injection order).")
@click.option("--application", default="shop", show_default=True, help="Application (environment role env_<name>).")
@click.option("--baseline-from", metavar="ID",
              help="Copy the baseline checks from this scenario (default: the application's healthy control).")
@click.option("--propagation-length", type=int, default=1, show_default=True,
              help="Complexity input: hops from root cause to symptom.")
@click.option("--resolution-steps", type=int, help="Complexity input: steps to resolve  [default: number of faults]")
@click.option("--technology", "technologies", multiple=True, metavar="TECH",
              help="Complexity input (repeatable)  [default: the root-cause entity's technology]")
@click.option("--class", "scenario_class", metavar="CLASS",
              help="DevOps only (--application workspace): build-config, issue-resolving, test-generation, pipeline "
                   "or monitoring  [default: build-config]")
@click.option("--project", metavar="PROJECT",
              help="DevOps only: the workspace project (roles/env_workspace/files/projects.yml)  [default: the first]")
def new_scenario(scenario_id: str, faults: tuple[str, ...], application: str, baseline_from: str | None,
                 propagation_length: int, resolution_steps: int | None, technologies: tuple[str, ...],
                 scenario_class: str | None, project: str | None) -> None:
    """Scaffold scenario_specs/ID/ (spec + ground truth) and register ID in REGISTRY.yaml; a scaffold that
    `opsbench validate` would reject is refused with its problems and nothing is written (exit 2).

    With --application workspace the scenario is a DevOps one (docs/authoring.md, "DevOps scenarios"): its class,
    the fault's project, a reference solution that verify-scenarios proves.
    """
    from orchestrator.scaffold import new_scenario as scaffold_scenario
    from orchestrator.scaffold import render_scaffolded

    done = scaffold_scenario(scenario_id, list(faults), application=application, baseline_from=baseline_from,
                             propagation_length=propagation_length, resolution_steps=resolution_steps,
                             technologies=list(technologies) or None, scenario_class=scenario_class,
                             project=project)
    click.echo(f"scaffolded scenario {scenario_id}:")
    click.echo(render_scaffolded(done))
    click.echo("opsbench validate: 0 problem(s) in the scaffold (it still holds TODO text)")


COMMANDS = (new,)
