"""The ``opsbench`` command line: the `main` group and the commands registered on it.

One module per command group, each command a thin shell over a library function:
`run` (run, runs, show, cleanup, topology), `scenarios` (list, validate, docs), `harness` (campaign, bench,
verify-scenarios), `results` (results, leaderboard, report, score, export), `scaffold` (new fault, new scenario),
`awx` (awx export), `generate` (generate), `corpus` (corpus build, card),
`snapshots` (snapshot record, export, import, verify, list), `replay`
(replay), `agents` (agents: the presets), `devops` (devops projects: the upstream projects). Libraries are
imported inside the commands, so ``opsbench --help`` stays fast.
"""

from __future__ import annotations

import click

from orchestrator import __version__
from orchestrator.cli import (
    agents,
    awx,
    corpus,
    devops,
    generate,
    harness,
    replay,
    results,
    run,
    scaffold,
    scenarios,
    snapshots,
)
from orchestrator.cli.common import GuardedGroup


class OpsBenchGroup(GuardedGroup):
    """Every command's errors take one path (`cli.common`): one message, exit 2, JSON with --json; no traceback."""


@click.group(cls=OpsBenchGroup)
@click.version_option(__version__, prog_name="opsbench")
def main() -> None:
    """OpsBench: benchmark AI agents on real IT-operations work."""


for _module in (run, scenarios, harness, results, scaffold, awx, snapshots, replay, generate, corpus, agents,
                devops):
    for _command in _module.COMMANDS:
        main.add_command(_command)
