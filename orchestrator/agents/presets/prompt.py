"""The prompt a preset's CLI gets, built from the manifest alone: the tasks and their goals, the alerts firing at
handover, the time it has, where its tools are, the output schema and the one file to write.

Every CLI gets the same text (only the MCP server's name is the CLI's convention), so presets compare on the
incident, not on the wording. Nothing here knows the scenario: the manifest carries no fault and no ground truth.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

ANSWER = "answer.json"
MCP_SERVER = "opsbench"


def _schemas(manifest: dict[str, Any]) -> str:
    out = []
    for kind, path in sorted((manifest.get("output", {}).get("schemas") or {}).items()):
        try:
            schema = json.loads(Path(path).read_text())
        except (OSError, ValueError):
            out.append(f"[{kind}] (schema file {path} could not be read)")
            continue
        out.append(f"[{kind}]\n{json.dumps(schema, separators=(',', ':'))}")
    return "\n".join(out) or "(no schema given: write a JSON object)"


def _alerts(manifest: dict[str, Any]) -> str:
    lines = []
    for alert in manifest.get("alerts") or []:
        labels, notes = alert.get("labels") or {}, alert.get("annotations") or {}
        where = ", ".join(f"{k}={v}" for k, v in sorted(labels.items()) if k not in ("alertname",))
        lines.append(f"- {labels.get('alertname', '?')} ({where}): {notes.get('summary', '')}".rstrip(": "))
    return "\n".join(lines) or "- none"


def build(manifest: dict[str, Any], answer: str = ANSWER, now: float | None = None) -> str:
    """The prompt for ``manifest``; ``answer``: the file (relative to the CLI's working directory) to write."""
    goals = "\n".join(f"- [{t['kind']}] {t['goal']}" for t in manifest.get("tasks") or [])
    deadline = manifest.get("deadline")
    left = f"about {max(0, int(deadline - (now or time.time())))} seconds" if isinstance(deadline, int | float) \
        else f"{manifest.get('budget', {}).get('wallClockSeconds', '?')} seconds"
    budget = manifest.get("budget", {})
    limits = [f"{budget['steps']} tool calls" if budget.get("steps") else "",
              f"{budget['tokens']} model tokens" if budget.get("tokens") else "",
              f"${budget['costUsd']} of model use" if budget.get("costUsd") else ""]
    limits = [x for x in limits if x]
    caps = (" and " + ", ".join(limits[:-1]) + (" and " if len(limits) > 1 else "") + limits[-1]) if limits else ""
    return f"""You are the on-call engineer for an application in an incident. Investigate it through the tools of \
the MCP server "{MCP_SERVER}" (alerts, metrics, logs, traces, topology and the like): they are the only way to \
the incident's evidence; nothing on this machine holds it, and the monitoring systems are not reachable directly.

Tasks:
{goals}

Alerts firing at handover:
{_alerts(manifest)}

You have {left}{caps}. Name entities by the ids get_topology returns.

When you know the answer, write ONE JSON document answering every task to the file {answer} in your current \
working directory (nowhere else), matching each of these JSON Schemas:
{_schemas(manifest)}

Write the file with your file-writing tool, check that it is valid JSON, then stop."""
