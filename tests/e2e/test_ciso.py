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

pytestmark = pytest.mark.e2e


def agent_command(*args: str) -> str:
    return " ".join([shlex.quote(sys.executable), "-m", "orchestrator.agents.ciso", *args])


def run_ciso(home: Path, scenario: str, *agent_args: str) -> dict[str, Any]:
    # PYTHONPATH: the agent imports this checkout's package even where another one is installed.
    rc, result = run_json(home, "run", scenario, "--agent", agent_command(*agent_args), timeout=900,
                          PYTHONPATH=str(paths.PROJECT_ROOT))
    assert rc == 0, (result.get("reason"), result.get("phases"))
    assert result["status"] == "completed" and result["cleanup"] == "done" and result["recovered"] is True
    conf = paths.containers_conf_dir()
    left = subprocess.run(["podman", "ps", "-a", "--filter", f"label=opsbench.run={result['run_id']}",
                           "--format", "{{.Names}}"], capture_output=True, text=True, check=True,
                          env={**os.environ, "CONTAINERS_CONF": str(conf / "containers.conf"),
                               "CONTAINERS_STORAGE_CONF": str(conf / "storage.conf")})
    assert left.stdout.strip() == "", f"target host left behind: {left.stdout}"
    return dict(result["evaluations"]["ciso"])


def test_baseline_agent_finds_the_injected_misconfiguration(home: Path) -> None:
    ciso = run_ciso(home, "ciso-sshd-root-login-noncompliant")
    assert (ciso["iec"], ciso["ipa"], ciso["ce"], ciso["sap"], ciso["ciso_pass"]) == (1, 1, 1, 1, 1), ciso
    assert ciso["posture"] == ciso["expected"] == "noncompliant"
    assert ciso["host_changed"] is False and ciso["time_to_process"] is not None


def test_inverted_policy_fails_on_a_compliant_host(home: Path) -> None:
    ciso = run_ciso(home, "ciso-sshd-root-login-compliant", "--invert")
    assert (ciso["iec"], ciso["ipa"], ciso["ce"]) == (1, 1, 1), ciso
    assert (ciso["sap"], ciso["ciso_pass"]) == (0, 0)
    assert (ciso["posture"], ciso["expected"]) == ("noncompliant", "compliant")
