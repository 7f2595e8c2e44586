"""CISO assessment scored for real (ITBench D.5.3): a CIS-hardened Debian container, a misconfiguration
role, the baseline agent's fetcher run against the host through the podman connection and its Rego
policy evaluated by a real OPA engine. A deliberately wrong (inverted) policy must fail."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from orchestrator import paths

from .conftest import run_json
from .probing import assert_refused_everything, prober

pytestmark = pytest.mark.e2e


def agent_command(*args: str) -> str:
    return " ".join([shlex.quote(sys.executable), "-m", "orchestrator.agents.ciso", *args])


def run_ciso(home: Path, scenario: str, *agent_args: str) -> dict[str, Any]:
    return dict(run_ciso_with(home, scenario, agent_command(*agent_args))["evaluations"]["ciso"])


def run_ciso_with(home: Path, scenario: str, agent: str, **env: str) -> dict[str, Any]:
    """The run's result, after checking that it completed, recovered and left no target host behind."""
    # PYTHONPATH: the agent imports this checkout's package even where another one is installed.
    rc, result = run_json(home, "run", scenario, "--agent", agent, timeout=900, PYTHONPATH=str(paths.PROJECT_ROOT),
                          **env)
    assert rc == 0, (result.get("reason"), result.get("phases"))
    assert result["status"] == "completed" and result["cleanup"] == "done" and result["recovered"] is True
    conf = paths.containers_conf_dir()
    left = subprocess.run(["podman", "ps", "-a", "--filter", f"label=opsbench.run={result['run_id']}",
                           "--format", "{{.Names}}"], capture_output=True, text=True, check=True,
                          env={**os.environ, "CONTAINERS_CONF": str(conf / "containers.conf"),
                               "CONTAINERS_STORAGE_CONF": str(conf / "storage.conf")})
    assert left.stdout.strip() == "", f"target host left behind: {left.stdout}"
    return result


def test_baseline_agent_finds_the_injected_misconfiguration(home: Path) -> None:
    """The baseline agent runs after the probing agent (issue 19), which must be refused every way out of its
    containment on a CIS host: the host container (through podman or its storage), writing the target's inventory."""
    with prober(home, then="orchestrator.agents.ciso", container_port=22) as (agent, env):
        result = run_ciso_with(home, "ciso-sshd-root-login-noncompliant", agent, **env)
    # The manifest names the target's inventory (`targets`): the agent reads it, read-only, and writes nothing.
    assert_refused_everything(Path(result["run_dir"]), result, {"write the target inventory"},
                              sanctioned=frozenset({"read the target inventory"}))
    ciso = result["evaluations"]["ciso"]
    assert (ciso["iec"], ciso["ipa"], ciso["ce"], ciso["sap"], ciso["ciso_pass"]) == (1, 1, 1, 1, 1), ciso
    assert ciso["posture"] == ciso["expected"] == "noncompliant"
    assert ciso["host_changed"] is False and ciso["time_to_process"] is not None


def test_inverted_policy_fails_on_a_compliant_host(home: Path) -> None:
    ciso = run_ciso(home, "ciso-sshd-root-login-compliant", "--invert")
    assert (ciso["iec"], ciso["ipa"], ciso["ce"]) == (1, 1, 1), ciso
    assert (ciso["sap"], ciso["ciso_pass"]) == (0, 0)
    assert (ciso["posture"], ciso["expected"]) == ("noncompliant", "compliant")


def test_a_hanging_fetcher_is_stopped_in_the_host_too(home: Path) -> None:
    """The fetcher's remote `sleep 3600` is stopped after evaluate_ciso_fetcher_timeout (60 s); the run still
    completes, recovers and leaves nothing."""
    bad = paths.PROJECT_ROOT / "tests" / "e2e" / "agents" / "ciso_bad.py"
    rc, result = run_json(home, "run", "ciso-sshd-root-login-noncompliant", "--agent",
                          f"{shlex.quote(sys.executable)} {shlex.quote(str(bad))} hang", timeout=900)
    assert rc == 0 and result["recovered"] is True, result.get("reason")
    ciso = result["evaluations"]["ciso"]
    assert ciso["fetcher_timed_out"] is True and (ciso["iec"], ciso["ce"], ciso["sap"]) == (1, 0, 0), ciso
    assert ciso.get("stray_processes_stopped", 0) >= 1 and ciso["host_changed"] is False
    assert any("exceeded its time limit" in r for r in ciso["reasons"])


def test_a_fetcher_that_writes_is_reverted(home: Path) -> None:
    bad = paths.PROJECT_ROOT / "tests" / "e2e" / "agents" / "ciso_bad.py"
    rc, result = run_json(home, "run", "ciso-sshd-root-login-noncompliant", "--agent",
                          f"{shlex.quote(sys.executable)} {shlex.quote(str(bad))} write", timeout=900)
    assert rc == 0 and result["recovered"] is True, result.get("reason")
    ciso = result["evaluations"]["ciso"]
    assert (ciso["iec"], ciso["ce"], ciso["sap"]) == (1, 0, 0), ciso
    assert ciso["host_changed"] is True and ciso["host_restored"] is True
    assert "added /etc/opsbench-fetcher-was-here" in ciso["host_changes"]
    assert "changed /etc/ssh/sshd_config" in ciso["host_changes"]


@pytest.mark.parametrize(("scenario", "agent_args", "passes"), [
    ("ciso-k8s-privileged-noncompliant", (), True),
    ("ciso-k8s-default-namespace-compliant", ("--invert",), False),
])
def test_offline_kubernetes_class_end_to_end(home: Path, scenario: str, agent_args: tuple[str, ...],
                                             passes: bool) -> None:
    """The kubectl+OPA class on the recorded cluster state: no cluster, no container (about 75 s each)."""
    rc, result = run_json(home, "run", scenario, "--agent", agent_command(*agent_args), timeout=900,
                          PYTHONPATH=str(paths.PROJECT_ROOT))
    assert rc == 0 and result["status"] == "completed" and result["recovered"] is True, result.get("reason")
    ciso = result["evaluations"]["ciso"]
    assert (ciso["iec"], ciso["ipa"], ciso["ce"]) == (1, 1, 1), ciso
    assert ciso["sap"] == ciso["ciso_pass"] == int(passes)
    assert ciso["host_changed"] is False
