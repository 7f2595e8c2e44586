"""What the command modules share: JSON output, the date option type, progress on stderr."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from orchestrator.progress import Progress

DATE = click.DateTime(["%Y-%m-%d", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S"])


def emit_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=True, default=str))


def progress(quiet: bool) -> Progress:
    """Step progress on the terminal (stderr), or none with --quiet."""
    from orchestrator.progress import Progress, TerminalProgress

    return Progress() if quiet else TerminalProgress().as_progress()


def echo_err(quiet: bool) -> Callable[[str], None]:
    """A function printing a line to stderr, or doing nothing with --quiet."""
    def echo(text: str) -> None:
        if not quiet:
            click.echo(text, err=True)

    return echo


def _set_agent_network(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    import os

    if value:  # read by orchestrator/sandbox/ wherever a command agent starts, campaign workers included
        os.environ["OPSBENCH_AGENT_NETWORK"] = value


agent_network_option = click.option(
    "--agent-network", type=click.Choice(["egress", "gateway", "host"]), default=None, expose_value=False,
    callback=_set_agent_network, is_eager=True,
    help="A command agent's network: egress (default: its gateway and non-host addresses), gateway (its gateway "
         "only) or host (no namespace of its own); OPSBENCH_AGENT_ALLOW=host:port,... adds an LLM server. Same as "
         "OPSBENCH_AGENT_NETWORK.")
