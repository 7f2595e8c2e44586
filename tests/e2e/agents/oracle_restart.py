"""Test-only mitigation agent: starts one container of its run with podman and reports it.

It is an oracle (it is told what to restart), so it exercises the mitigation evaluator and
the trajectory, not agent skill. With ``--no-fix`` it only reports, leaving the fault in place.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time


def main() -> int:
    entity, fix = sys.argv[1], "--no-fix" not in sys.argv
    run_id = os.environ["OPSBENCH_RUN_ID"]
    trajectory = open(os.environ["OPSBENCH_TRAJECTORY"], "a")  # noqa: SIM115 - appended to all along
    with open(os.environ["OPSBENCH_MANIFEST"]) as f:
        manifest = json.load(f)
    trajectory.write(json.dumps({"ts": time.time(), "tool": "alerts", "args": {}, "status": "ok",
                                 "input_tokens": 120, "output_tokens": 8}) + "\n")
    actions = []
    if fix:
        name = f"ob-{run_id}-{entity}"
        proc = subprocess.run(["podman", "start", name], capture_output=True, text=True, check=False)
        trajectory.write(json.dumps({"ts": time.time(), "tool": "restart", "args": {"target": entity},
                                     "status": "ok" if proc.returncode == 0 else "error"}) + "\n")
        actions.append({"action": "start", "target": entity, "result": (proc.stdout + proc.stderr).strip()})
    trajectory.close()
    out = {"schema": "opsbench/mitigation/v1", "actions": actions,
           "plan": f"{entity} was down; started it again" if fix else "observed only",
           "usage": {"input_tokens": 1000, "output_tokens": 50}}
    with open(manifest["output"]["path"], "w") as f:
        json.dump(out, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
