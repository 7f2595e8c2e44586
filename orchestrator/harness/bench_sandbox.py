"""What containment costs: a command agent's start-up time with and without the sandbox (``opsbench bench
--agent-startup N``). No environment is deployed: the agent is ``python3 -c pass`` in a throwaway run directory,
timed from the start of ``run_agent`` to the agent's exit (sandbox set-up, slirp4netns, the interpreter)."""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from orchestrator.agent import run_agent

LEVELS: dict[str, dict[str, str]] = {
    "none": {"OPSBENCH_AGENT_SANDBOX": "off"},
    "files+user (no network namespace)": {"OPSBENCH_AGENT_SANDBOX": "auto", "OPSBENCH_AGENT_NETWORK": "host"},
    "full (egress)": {"OPSBENCH_AGENT_SANDBOX": "auto", "OPSBENCH_AGENT_NETWORK": "egress"},
    "full (gateway)": {"OPSBENCH_AGENT_SANDBOX": "auto", "OPSBENCH_AGENT_NETWORK": "gateway"},
}


def bench(repeats: int, echo: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """Interleaved repeats of each level; seconds (median, p90, min) per level and the load at the start."""
    times: dict[str, list[float]] = {name: [] for name in LEVELS}
    command = f"{sys.executable} -c pass"
    saved = {k: os.environ.get(k) for k in ("OPSBENCH_AGENT_SANDBOX", "OPSBENCH_AGENT_NETWORK", "OPSBENCH_HOME")}
    load = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="opsbench-bench-sandbox-") as home:
        os.environ["OPSBENCH_HOME"] = home
        try:
            for i in range(repeats):
                for name, env in LEVELS.items():
                    os.environ.update(env)
                    agent_dir = Path(home) / "runs" / f"r{i}-{len(times[name])}-{abs(hash(name))}" / "agent"
                    (agent_dir / "workspace").mkdir(parents=True)
                    (agent_dir / "manifest.json").write_text(json.dumps({"tools": {"url": "http://127.0.0.1:9"}}))
                    start = time.perf_counter()
                    result = run_agent(command, agent_dir, {}, 60, lambda: False, lambda pid: None)
                    if result.status != "exited":
                        raise RuntimeError(f"{name}: the agent did not run: {result.detail}")
                    times[name].append(time.perf_counter() - start)
                echo(f"repeat {i + 1}/{repeats} done")
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
    return {"repeats": repeats, "command": "python3 -c pass", "loadavg_at_start": [round(x, 2) for x in load],
            "levels": {name: {"median_s": round(statistics.median(t), 3),
                              "p90_s": round(sorted(t)[max(0, int(len(t) * 0.9) - 1)], 3),
                              "min_s": round(min(t), 3)} for name, t in times.items()}}


def render(report: dict[str, Any]) -> str:
    lines = [f"agent start-up ({report['command']}, {report['repeats']} interleaved repeats, load "
             f"{' '.join(map(str, report['loadavg_at_start']))}):"]
    lines += [f"  {name:36} median {v['median_s']:.3f}s  p90 {v['p90_s']:.3f}s  min {v['min_s']:.3f}s"
              for name, v in report["levels"].items()]
    return "\n".join(lines)
