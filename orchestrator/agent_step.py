"""The agent step as a program, for runs that have no orchestrator process (AWX workflows, playbooks/agent.yml).

    python -m orchestrator.agent_step --run-dir RUN --run-id ID --budget SECONDS --command CMD [--hide PATH]...

Runs CMD exactly as the orchestrator's agent step does (orchestrator.agent.run_command_agent: the agent sandbox,
the budget, the manifest the handover wrote under RUN/agent, the late output put aside); --hide names files the
agent must not read wherever they are (the scenario spec, its ground truth). Prints one JSON line: status,
exit_code, elapsed, detail, isolation, and writes the same to RUN/agent/result.json. Exit status 0 whenever the
agent ran (a crashed or late agent is scored, not an error), 2 when it could not be started.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from dataclasses import asdict
from pathlib import Path
from types import FrameType

from orchestrator.agent import run_command_agent

RESULT = "result.json"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m orchestrator.agent_step", description=__doc__.splitlines()[0])
    parser.add_argument("--run-dir", type=Path, required=True)
    parser.add_argument("--run-id", required=True)
    parser.add_argument("--budget", type=int, required=True, help="wall-clock seconds")
    parser.add_argument("--command", required=True, help="the agent command (run through /bin/sh)")
    parser.add_argument("--hide", type=Path, action="append", default=[], help="a file the agent must not read")
    args = parser.parse_args(argv)
    agent_dir = args.run_dir / "agent"
    if not (agent_dir / "manifest.json").is_file():
        parser.error(f"{agent_dir / 'manifest.json'}: no manifest (the handover step writes it)")
    stop: list[int] = []

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.append(signum)  # AWX cancels a job with SIGTERM: end the agent, still report

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, on_signal)
    result = run_command_agent(args.command, agent_dir, args.run_id, args.budget, lambda: bool(stop),
                               lambda pid: None, secret_files=[p for p in args.hide if p.is_file()])
    doc = {k: (round(v, 2) if k == "elapsed" else v) for k, v in asdict(result).items()}
    doc["budget"] = args.budget
    (agent_dir / RESULT).write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    print(json.dumps(doc, sort_keys=True))
    return 2 if result.status == "not_started" else 0


if __name__ == "__main__":
    sys.exit(main())
