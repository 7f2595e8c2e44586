"""Every shop fault role, proven on the real shop with real telemetry.

For each fault role, the first single-fault scenario that uses it runs through
`opsbench verify-scenarios --idempotency`: remove before injecting (a no-op), inject twice
(the same as once), wait for the scenario's alerts in Alertmanager (fired by Prometheus from the
services' real metrics), remove, wait for every alert to clear and the baseline to hold, and find
no leftovers (containers, iptables rules, flags, CPU quotas, datastore settings, saved state).
One `verify-scenarios` process serves every role's test (two environments at once), so the
suite deploys twice instead of once per role.

`make test` proves a fixed sample of the roles live, one per fault mechanism (feature flag, redeployment with
bad configuration, frozen processes, CPU quota, HTTP proxy, iptables, datastore, disk) and one per class of the
harder mechanisms (a cascading timeout, a bad canary, lock contention, a TLS mismatch, clock skew), to stay inside
CI's budget; `make reliability` (and `make test-full`) sets OPSBENCH_E2E_FAULTS=all and proves every role, as does
`make verify-scenarios`. Every role must have a scenario in both.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from orchestrator import paths
from orchestrator.validate import load_registry
from tests.e2e.conftest import OPSBENCH, cli_env


def shop_fault_roles() -> list[str]:
    return sorted(p.name for p in paths.ROLES_DIR.glob("fault_*")
                  if (p / "meta" / "main.yml").is_file() and "podman_control" in (p / "meta" / "main.yml").read_text())


# One role per fault mechanism: each reaches the shop through a different path (flagd, a redeployment, the
# cgroup freezer, a CPU quota, the fault proxy, iptables, a datastore session, a file system). Then one per class
# of the harder mechanisms (docs/mechanisms.md), each through a path of its own: a journaled config change that
# cascades (a client timeout), one bad replica of two (a canary), a lock that exhausts a caller's pools, a TLS
# listener where plain HTTP was, a skewed wall clock.
SAMPLE = ("fault_app_error_rate", "fault_config_redis_password", "fault_container_pause",
          "fault_container_cpu_throttle", "fault_http_abort", "fault_network_partition",
          "fault_postgres_conn_exhaustion", "fault_volume_full",
          "fault_config_client_timeout", "fault_app_bad_canary", "fault_postgres_lock_contention",
          "fault_network_tls_mismatch", "fault_container_clock_skew")


def live_roles() -> list[str]:
    """The roles this session proves live: SAMPLE, or every role with OPSBENCH_E2E_FAULTS=all."""
    roles = shop_fault_roles()
    return roles if os.environ.get("OPSBENCH_E2E_FAULTS") == "all" else [r for r in roles if r in SAMPLE]


def scenario_for(role: str) -> str | None:
    """The first registered, existing, single-fault shop scenario using role."""
    for sid, entry in sorted(load_registry().items()):
        if (entry.get("application") == "shop" and entry.get("faults") == [role] and not entry.get("retired")
                and (paths.SPECS_DIR / sid / "scenario.yaml").is_file()):
            return sid
    return None


def expects_alerts(sid: str) -> bool:
    """Whether the scenario's ground truth names alerts (a healthy control with a benign change names none)."""
    truth = yaml.safe_load((paths.SPECS_DIR / sid / "ground_truth.yaml").read_text())
    return bool(truth.get("alerts"))


@cache
def verification(home: str) -> dict[str, Any]:
    ids = sorted({sid for r in live_roles() if (sid := scenario_for(r))})
    proc = subprocess.run([*OPSBENCH, "verify-scenarios", *ids, "--repeats", "1", "--parallel", "2",
                           "--idempotency", "--json"], env=cli_env(Path(home)), capture_output=True, text=True,
                          timeout=3600, cwd=paths.PROJECT_ROOT, check=False)
    sys.stderr.write(proc.stderr[-20000:])
    try:
        data: dict[str, Any] = json.loads(proc.stdout)
    except json.JSONDecodeError:
        raise AssertionError(f"verify-scenarios printed no JSON (rc {proc.returncode}):\n"
                             f"{proc.stderr[-3000:]}") from None
    return data


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    data = verification(str(tmp_path_factory.mktemp("faults-home")))
    return {row["scenario"]: row for row in data["scenarios"]}


def test_there_are_at_least_twenty_shop_fault_mechanisms() -> None:
    assert len(shop_fault_roles()) >= 20, shop_fault_roles()


def test_the_sample_is_made_of_real_roles() -> None:
    assert set(SAMPLE) <= set(shop_fault_roles()), set(SAMPLE) - set(shop_fault_roles())


@pytest.mark.parametrize("role", shop_fault_roles())
def test_every_fault_role_has_a_single_fault_scenario(role: str) -> None:
    assert scenario_for(role) is not None, \
        f"no single-fault shop scenario uses {role}: write one (opsbench new scenario)"


@pytest.mark.parametrize("role", live_roles())
def test_fault_manifests_recovers_and_leaves_nothing(role: str, results: dict[str, dict[str, Any]]) -> None:
    sid = scenario_for(role)
    assert sid is not None
    row = results[sid]
    trial = row["trials"][0]
    assert row["passed"], f"{sid} ({role}): {row['failure']}"
    if expects_alerts(sid):
        # 0 is a real measurement: the alerts already fired while the fault was being injected (twice,
        # with --idempotency) and the gate saw them on its first look.
        assert trial["time_to_alert"] is not None and trial["time_to_alert"] >= 0, trial
    else:
        # A benign change (a distractor's own scenario) has nothing to wait for: its recovery checks prove
        # the alerts stayed quiet.
        assert trial["time_to_alert"] is None, trial
    assert trial["time_to_recover"] is not None, trial
    assert row["leftovers"] == [], row["leftovers"]
