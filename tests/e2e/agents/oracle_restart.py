"""Test-only mitigation agent: restarts one instance through the run's tool gateway and reports it.

It is an oracle (it is told what to restart), so it exercises the gateway's control path, the
mitigation evaluator and the trajectory, not agent skill. With ``--no-fix`` it only looks at
the alerts and reports, leaving the fault in place.
"""

from __future__ import annotations

import json
import os
import sys
import time

from orchestrator.agents.gateway_client import GatewayClient, ToolError, open_session


def main() -> int:
    service, instance = sys.argv[1], sys.argv[2]
    fix = "--no-fix" not in sys.argv
    session = open_session()
    tools = GatewayClient(session.url, session.token)
    tools("get_alerts")
    actions = []
    if fix:
        try:
            result = json.dumps(tools("restart", service=service, instance=instance))
        except ToolError as exc:
            result = f"refused: {exc}"
        actions.append({"action": "restart", "target": instance, "result": result[:500]})
    # What an LLM agent would report about its own usage (the gateway logs the tool calls).
    with open(os.environ["OPSBENCH_TRAJECTORY"], "a") as f:
        f.write(json.dumps({"ts": time.time(), "tool": "llm", "input_tokens": 120, "output_tokens": 8}) + "\n")
    out = {"schema": "opsbench/mitigation/v1", "actions": actions,
           "plan": f"{instance} was down; restarted it" if fix else "observed only",
           "usage": {"input_tokens": 1000, "output_tokens": 50}}
    session.write(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
