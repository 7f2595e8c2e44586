"""``opsbench agents``: the agent presets, whether each is installed, what each needs (library:
`orchestrator.agents.presets`)."""

from __future__ import annotations

import os
from typing import Any

import click

from orchestrator.cli.common import emit_json


def preset_rows() -> list[dict[str, Any]]:
    """One row per preset: pin, installed version, vendor variables (set or not, never their values), model."""
    from orchestrator.agents.presets import PREFIX, PRESETS, Choice, problems

    rows = []
    for preset in PRESETS.values():
        model = preset.model(os.environ)
        rows.append({
            "name": preset.name, "package": preset.package, "pinned": preset.version,
            "installed": preset.installed_version(), "prefix": str(PREFIX), "protocol": preset.protocol,
            "headless": preset.headless, "needs": [preset.key_env, preset.url_env],
            "set": {v: bool(os.environ.get(v, "").strip()) for v in (preset.key_env, preset.url_env)},
            "model": model, "model_from": preset.model_env if os.environ.get(preset.model_env) else "default",
            "ready": not problems(Choice(preset, model)), "problems": problems(Choice(preset, model)),
        })
    return rows


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the presets as JSON.")
def agents(as_json: bool) -> None:
    """List the agent presets (`--agent NAME` on run, campaign, replay): installed or not, what each needs.

    `make agents` installs the pinned CLIs under .agents/. Each preset reads its vendor's key and base URL from
    the environment (the model server; a recording proxy stands between it and the CLI), and its model from
    `--agent "NAME --model M"`, the vendor's model variable, or the default. See docs/agents.md, 'Bring your
    agent'."""
    rows = preset_rows()
    if as_json:
        emit_json(rows)
        return
    for r in rows:
        state = f"installed {r['installed']}" if r["installed"] else "not installed (make agents)"
        needs = ", ".join(f"{v} ({'set' if r['set'][v] else 'missing'})" for v in r["needs"])
        click.echo(f"{r['name']:<12} {r['package']}@{r['pinned']}: {state}")
        click.echo(f"{'':<12} needs {needs}; model {r['model']} ({r['model_from']}); {r['protocol']}")
        click.echo(f"{'':<12} {'ready' if r['ready'] else 'not ready: ' + '; '.join(r['problems'])}")


COMMANDS = [agents]
