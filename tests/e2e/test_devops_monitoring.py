"""End-to-end: the DevOps monitoring family live, in one workspace environment (roles/env_workspace).

For each devops-monitor-* scenario, in one deployment: its fault (fault_workspace_process with the spec's arguments)
is injected through playbooks/inject.yml as the orchestrator runs it; the spec's manifestation check
(check_workspace) passes; the seven services run, all with arguments of one form and nothing in their command line
or environment naming the anomaly; the scripted agent (orchestrator/agents/devops_monitor.py), its `exec` calls
answered by a podman-exec shim that runs them as the gateway does (bash -c as the workspace user in /workspace),
names the spec's process and anomaly, and its answer scores fl_pass 1 against the ground truth; removal leaves
nothing (env_workspace's pristine: no process, no saved state; the service files gone); after the last one the
specs' recovery gate (their baseline check, the same in all) holds. Also: removal without injection and removal
twice are no-ops, injecting twice equals once. About 2 min 15 s on the shared 2-core machine.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from orchestrator.agents import devops_monitor
from orchestrator.argspecs import resolve_role_vars
from orchestrator.evaluation.diagnosis import score_diagnosis
from orchestrator.role_topology import load_topology
from orchestrator.runner import StepResult

from .workspace_env import NEEDS_WORKSPACE, PODMAN_ENV, Workspace, deployed

FAULT = "fault_workspace_process"
SPECS = sorted((Path(__file__).resolve().parents[2] / "scenario_specs").glob("devops-monitor-*"))
SERVICES_DIR = "/home/dev/.local/share/services"
TELLTALE = ("leak", "spin", "fill", "zombie", "storm", "hog", "explosion", "thread", "anomaly", "mode")

pytestmark = [pytest.mark.e2e, NEEDS_WORKSPACE]


class Monitored(Workspace):
    """The workspace with the monitoring family's fault, checks and the agent's `exec`."""

    def fault(self, entry: str, args: dict[str, Any], name: str = "misbehaving-service") -> StepResult:
        return self.step(f"{entry}.yml", opsbench_faults=[
            {"name": name, "role": FAULT, "vars": resolve_role_vars(FAULT, "inject", args)}])

    def checks(self, checks: list[dict[str, Any]]) -> dict[str, Any]:
        result = self.step("check.yml", opsbench_checks=[
            {"name": c["name"], "role": c["role"], "timeout": c.get("timeout", 60),
             "vars": resolve_role_vars(c["role"], "main", c.get("args", {}))} for c in checks])
        assert result.ok, result.failures
        outcomes: dict[str, Any] = result.stats.get("checks", {})
        return outcomes

    def pristine(self) -> list[str]:
        result = self.step("pristine.yml")
        assert result.ok, result.failures
        return list(result.stats.get("leftovers", []))

    def exec_tool(self, tool: str, **args: Any) -> dict[str, Any]:
        """The gateway's `exec` for the agent (the only tool it calls)."""
        assert tool == "exec", tool
        proc = self.sh(args["command"], timeout=args.get("timeout", 60) + 15)
        return {"exit_code": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr}


def spec_of(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    return (yaml.safe_load((path / "scenario.yaml").read_text()),
            yaml.safe_load((path / "ground_truth.yaml").read_text()))


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Monitored]:
    with deployed(tmp_path_factory.mktemp("monitoring"), "montest", Monitored) as w:
        yield w


def test_there_is_a_scenario_per_anomaly_and_deploy_publishes_their_processes(ws: Monitored) -> None:
    specs = [spec_of(p)[0] for p in SPECS]
    anomalies = {s["faults"][0]["args"]["anomaly"] for s in specs}
    assert anomalies == {"memory_leak", "cpu_spin", "fd_leak", "disk_fill", "zombie_storm", "io_hog",
                         "thread_explosion"}
    published = json.loads((ws.run_dir / "environment.json").read_text())["topology"]
    processes = {e["id"] for e in published["entities"] if e["kind"] == "process"}
    assert {s["faults"][0]["args"]["name"] for s in specs} <= processes
    assert {(e["source"], e["target"]) for e in published["edges"]} >= {("workspace", p) for p in processes}


def test_removal_without_injection_is_a_no_op_and_the_baseline_holds(ws: Monitored) -> None:
    spec, _ = spec_of(SPECS[0])
    removed = ws.fault("remove", spec["faults"][0]["args"])
    assert removed.ok, removed.failures
    assert removed.stats["faults"]["misbehaving-service"] == {"removed": False}
    assert all(c["ok"] for c in ws.checks(spec["checks"]["baseline"]).values())


@pytest.mark.parametrize("spec_dir", SPECS, ids=[p.name for p in SPECS])
def test_the_anomaly_manifests_the_agent_finds_it_and_removal_leaves_nothing(ws: Monitored, spec_dir: Path) -> None:
    spec, truth = spec_of(spec_dir)
    args = spec["faults"][0]["args"]
    started = time.monotonic()
    injected = ws.fault("inject", args)
    assert injected.ok, injected.failures
    try:
        assert (ws.run_dir / "state" / "faults" / "misbehaving-service.json").is_file()
        outcome = ws.checks(spec["checks"]["manifestation"])
        assert all(c["ok"] for c in outcome.values()), outcome
        manifested = time.monotonic() - started

        # Seven services, each `python3 <dir>/bin/<name>`: neither command line nor environment tells the bad one.
        listing = ws.sh(f"for p in $(pgrep -f '^/usr/bin/python3 {SERVICES_DIR}/bin/'); do "
                        "echo \"$(cat /proc/$p/comm) $(tr '\\0' ' ' < /proc/$p/cmdline) "
                        "$(tr '\\0' ' ' < /proc/$p/environ)\"; done")
        assert listing.returncode == 0, listing.stderr
        lines = listing.stdout.splitlines()
        names = {line.split()[0] for line in lines}
        assert args["name"] in names and len(names) == 7, listing.stdout
        for line in lines:
            name, _, rest = line.partition(" ")
            assert rest.startswith(f"/usr/bin/python3 {SERVICES_DIR}/bin/{name} "), line
            assert not any(word in rest.lower() for word in TELLTALE), line

        output = devops_monitor.run(ws.exec_tool)
        assert output["entities"] == [{"id": args["name"], "root_cause": True, "layer": "process",
                                       "fault_type": args["anomaly"]}], output
        answer = ws.work / f"{spec_dir.name}.json"
        answer.write_text(json.dumps(output))
        scores = score_diagnosis(answer, truth, load_topology("workspace"))
        assert (scores["fl_pass"], scores["type_match"]) == (1.0, 1.0), scores

        if args["anomaly"] == "zombie_storm":  # injecting twice equals once (the zombies' parent is not restarted)
            before = ws.sh(f"pgrep -xo {args['name']}").stdout
            again = ws.fault("inject", args)
            assert again.ok, again.failures
            assert ws.sh(f"pgrep -xo {args['name']}").stdout == before
    finally:
        removed = ws.fault("remove", args)
    assert removed.ok, removed.failures
    assert removed.stats["faults"]["misbehaving-service"] == {"removed": True}
    left = ws.sh(f"ls -A {SERVICES_DIR} /tmp/services ~/.local 2>&1; ps -eo pid=,stat=,comm= | "
                 "awk '$3 !~ /^(podman-init|sleep|bash|ps|awk)$/'")
    assert "No such file or directory" in left.stdout and left.stdout.count("\n") == 3, left.stdout
    assert ws.pristine() == []
    if args["anomaly"] == "zombie_storm":  # removing twice equals once
        again = ws.fault("remove", args)
        assert again.ok and again.stats["faults"]["misbehaving-service"] == {"removed": False}
    print(f"{spec_dir.name}: manifested in {manifested:.1f} s, cycle {time.monotonic() - started:.1f} s")


def test_after_them_all_the_recovery_gate_holds(ws: Monitored) -> None:
    """The specs' recovery gate (their baseline: none of the services runs), once after the last removal."""
    for spec_dir in SPECS:
        spec, _ = spec_of(spec_dir)
        assert spec["checks"].get("recovery", spec["checks"]["baseline"]) == spec_of(SPECS[0])[0]["checks"]["baseline"]
    outcome = ws.checks(spec_of(SPECS[0])[0]["checks"]["baseline"])
    assert all(c["ok"] for c in outcome.values()), outcome


def test_teardown_leaves_nothing(ws: Monitored) -> None:
    down = ws.teardown()
    assert down.ok, down.failures
    gone = subprocess.run(["podman", "container", "exists", ws.container], env=PODMAN_ENV, check=False)
    assert gone.returncode == 1
