"""``make bench-agents``: what each agent preset costs per trial over a bare agent, against a scripted model server.

For each agent, ``opsbench replay`` of the committed shop-cart-down snapshot runs ``--trials N`` trials on one
frozen environment, the agent driven by a scripted model server (tests/e2e/model_scripts.py) through the same
investigation: three gateway tools (get_alerts, get_topology, query_metrics), then the answer.

- **bare**: the LLM baseline agent (``<venv python> -m orchestrator.agents.llm``, a plain ReAct loop over Chat
  Completions and the gateway's REST API, no CLI, no proxy): the least an agent that talks to a model does. Its
  script ends with ``submit`` (the answer), 4 model turns.
- **each preset**: its real CLI (``make agents``) in its headless mode, the gateway over MCP, its model traffic
  through the recording proxy; the answer written with the CLI's own shell, then a last text: 5 turns (and the
  background calls a CLI makes by itself, e.g. OpenCode's title).

Per agent it reports the agent step's seconds (``results.agent.elapsed``: from the sandbox's start to the agent's
exit, the CLI's start-up, the proxy and every model and tool call included; median, min, max over the trials), the
CLI's own run inside it (``agent/preset.json``'s ``elapsed``), the whole trial's seconds, the model calls the proxy
counted, and the **overhead per trial** = the preset's median agent step minus the bare agent's. The scripted model
answers in milliseconds, so the figures are the harness's and the CLIs' own time, not a model's. The load average is
printed at the start and the end: on the shared 2-core machine the figures move with it. ``--fresh-install`` also
times ``make agents`` into an empty temporary prefix (npm's cache as it is) and measures its size.

    .venv/bin/python -m tests.e2e.bench_agents [--trials 3] [--agents bare,claude-code,...] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from orchestrator import paths
from orchestrator.agents.presets import PREFIX, PRESETS
from orchestrator.agents.presets.install import size
from tests.e2e.model_scripts import Mcp, Say, ScriptedModel, Shell, Step

SAMPLE = next((paths.PROJECT_ROOT / "tests" / "data" / "snapshots").glob("shop-cart-down-*.tar.gz"))
KEY = "sk-bench-not-a-key"
PRICES = {"scripted-model": {"input": 3.0, "output": 15.0, "cached_input": 0.3, "cache_write": 3.75}}
ANSWER = {"schema": "opsbench/diagnosis/v1", "incident": True,
          "entities": [{"id": "cart-1", "root_cause": True, "layer": "runtime", "fault_type": "process_down"}],
          "propagations": [{"source": "cart-1", "target": "frontend"}, {"source": "frontend", "target": "gateway"}],
          "explanation": "cart-1 is down; the frontend's cart calls fail; users see errors at the gateway"}
INVESTIGATE: list[Step] = [Mcp("get_alerts", {}), Mcp("get_topology", {}), Mcp("query_metrics", {"query": "up"})]
PRESET_SCRIPT = [*INVESTIGATE, Shell("cat > answer.json <<'EOF'\n" + json.dumps(ANSWER) + "\nEOF"),
                 Say("The diagnosis is in answer.json.")]
BARE_SCRIPT = [*INVESTIGATE, Mcp("submit", {"output": ANSWER}), Say("submitted")]
BARE = "bare"


def _env(agent: str, model: ScriptedModel, prices: Path, home: Path) -> dict[str, str]:
    env = {**os.environ, "OPSBENCH_HOME": str(home), "OPSBENCH_PRICES": str(prices)}
    if agent == BARE:
        port = model.url.rsplit(":", 1)[1]
        return {**env, "OPSBENCH_LLM_URL": model.url + "/v1", "OPSBENCH_LLM_MODEL": "scripted-model",
                "OPSBENCH_AGENT_ALLOW": f"127.0.0.1:{port}"}
    p = PRESETS[agent]
    return {**env, p.url_env: model.url + ("/v1" if p.vendor == "openai" else ""), p.key_env: KEY}


def _command(agent: str) -> str:
    return f"{sys.executable} -m orchestrator.agents.llm" if agent == BARE else f"{agent} --model scripted-model"


def _stats(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    return {"median": round(statistics.median(values), 2), "min": round(min(values), 2),
            "max": round(max(values), 2)}


def run_agent(agent: str, trials: int, home: Path, prices: Path) -> dict[str, Any]:
    """One replay invocation of `agent` with `trials` trials on one frozen environment; its figures."""
    with ScriptedModel(BARE_SCRIPT if agent == BARE else PRESET_SCRIPT) as model:
        start = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "orchestrator.cli", "replay", str(SAMPLE), "--agent",
                               _command(agent), "--trials", str(trials), "--json", "--quiet"],
                              env=_env(agent, model, prices, home), capture_output=True, text=True,
                              cwd=paths.PROJECT_ROOT, timeout=600 + 300 * trials, check=False)
        wall = time.monotonic() - start
    try:
        records = json.loads(done.stdout)["trials"]
    except (ValueError, KeyError):
        raise RuntimeError(f"{agent}: opsbench replay gave no trials (exit {done.returncode}): "
                           f"{done.stderr[-1500:]}") from None
    steps, cli, trial_s, calls, passed, failures = [], [], [], [], 0, []
    for rec in records:
        [run_dir] = list((home / "runs").glob(f"*/trials/{rec['run_id']}"))
        state = json.loads((run_dir / "run.json").read_text())
        elapsed = ((state.get("results") or {}).get("agent") or {}).get("elapsed")
        if isinstance(elapsed, int | float):
            steps.append(float(elapsed))
        preset = run_dir / "agent" / "preset.json"
        if preset.is_file():
            cli_elapsed = json.loads(preset.read_text()).get("elapsed")
            if isinstance(cli_elapsed, int | float):
                cli.append(float(cli_elapsed))
        trial_s.append(float(rec.get("elapsed") or 0.0))
        calls.append((rec.get("scores") or {}).get("process", {}).get("model_calls"))
        passed += rec.get("passed") is True
        if rec.get("passed") is not True:  # why, for the report: the agent's last words
            stderr = run_dir / "agent" / "stderr.log"
            failures.append({"run_id": rec["run_id"], "status": rec.get("status"), "reason": rec.get("reason"),
                             "agent_stderr": stderr.read_text(errors="replace")[-800:] if stderr.is_file() else ""})
    return {"agent": agent, "command": _command(agent), "trials": len(records), "passed": passed,
            "agent_step_s": _stats(steps), "cli_s": _stats(cli), "trial_s": _stats(trial_s),
            "model_calls": calls, "server_calls": len(model.log.usages), "replay_wall_s": round(wall, 1),
            "failures": failures}


def fresh_install() -> dict[str, Any]:
    """`make agents` into an empty temporary prefix: seconds and bytes (removed afterwards)."""
    with tempfile.TemporaryDirectory(prefix="opsbench-agents-") as prefix:
        env = {**os.environ, "OPSBENCH_AGENTS_DIR": prefix}
        start = time.monotonic()
        done = subprocess.run(["nice", "-n", "19", sys.executable, "-m", "orchestrator.agents.presets.install"],
                              env=env, capture_output=True, text=True, cwd=paths.PROJECT_ROOT, timeout=1800,
                              check=False)
        elapsed = time.monotonic() - start
        if done.returncode != 0:
            raise RuntimeError(f"make agents into {prefix} failed: {done.stderr[-1500:]}")
        return {"seconds": round(elapsed, 1), "mb": round(size(Path(prefix)) / 1e6)}


def bench(agents: list[str], trials: int, install: bool) -> dict[str, Any]:
    missing = [a for a in agents if a != BARE and PRESETS[a].installed_version() != PRESETS[a].version]
    if missing:
        raise SystemExit(f"not installed at the pinned version: {', '.join(missing)} (run `make agents`)")
    load_start = os.getloadavg()
    rows = []
    with tempfile.TemporaryDirectory(prefix="opsbench-bench-agents-") as tmp:
        prices = Path(tmp) / "prices.json"
        prices.write_text(json.dumps(PRICES))
        for agent in agents:
            rows.append(run_agent(agent, trials, Path(tmp) / "home", prices))
            print(f"{agent}: done", file=sys.stderr, flush=True)
    bare = next((r for r in rows if r["agent"] == BARE and r["agent_step_s"]), None)
    for r in rows:
        if bare and r is not bare and r["agent_step_s"]:
            r["overhead_s"] = round(r["agent_step_s"]["median"] - bare["agent_step_s"]["median"], 2)
    return {"snapshot": SAMPLE.name, "trials_per_agent": trials, "loadavg_start": [round(x, 2) for x in load_start],
            "loadavg_end": [round(x, 2) for x in os.getloadavg()], "agents": rows,
            "prefix_mb": round(size(PREFIX) / 1e6) if PREFIX.is_dir() else None,
            "fresh_install": fresh_install() if install else None,
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}


def _fmt(s: dict[str, float] | None) -> str:
    return "—" if s is None else f"{s['median']:.2f} ({s['min']:.2f}-{s['max']:.2f})"


def render(report: dict[str, Any]) -> str:
    lines = [f"agent presets vs a bare agent, {report['trials_per_agent']} replay trial(s) each of "
             f"{report['snapshot']}, scripted model server; load {report['loadavg_start']} -> {report['loadavg_end']}"
             f" ({report['date']})",
             f"{'agent':12} {'passed':>6} {'agent step s, median (min-max)':>32} {'CLI s':>20} "
             f"{'trial s':>20} {'turns [server]':>14} {'overhead s':>10}"]
    for r in report["agents"]:
        turns = ",".join("-" if c is None else str(c) for c in r["model_calls"]) + f" [{r['server_calls']}]"
        overhead = "—" if "overhead_s" not in r else f"{r['overhead_s']:+.2f}"
        lines.append(f"{r['agent']:12} {r['passed']:>3}/{r['trials']:<2} {_fmt(r['agent_step_s']):>32} "
                     f"{_fmt(r['cli_s']):>20} {_fmt(r['trial_s']):>20} {turns:>14} {overhead:>10}")
    for r in report["agents"]:
        for f in r["failures"]:
            lines.append(f"  {r['agent']} trial {f['run_id']} did not pass ({f['status']}: {f['reason']}); agent "
                         f"stderr: {f['agent_stderr'][-300:]!r}")
    lines.append(f".agents/ holds {report['prefix_mb']} MB")
    if report["fresh_install"]:
        lines.append(f"make agents into an empty prefix: {report['fresh_install']['seconds']} s, "
                     f"{report['fresh_install']['mb']} MB")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--trials", type=int, default=3, help="replay trials per agent (default 3)")
    parser.add_argument("--agents", default=",".join([BARE, *sorted(PRESETS)]),
                        help="comma-separated: bare and preset names (default: all)")
    parser.add_argument("--fresh-install", action="store_true", help="also time make agents into an empty prefix")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    agents = [a.strip() for a in args.agents.split(",") if a.strip()]
    unknown = [a for a in agents if a != BARE and a not in PRESETS]
    if unknown or args.trials < 1:
        parser.error(f"unknown agent(s): {', '.join(unknown)} (known: {BARE}, {', '.join(sorted(PRESETS))})"
                     if unknown else "--trials must be at least 1")
    report = bench(agents, args.trials, args.fresh_install)
    print(json.dumps(report, indent=2) if args.json else render(report))
    return 0


if __name__ == "__main__":
    shutil.which("podman") or sys.exit("podman is not installed: the replay's frozen environment needs it")
    sys.exit(main())
