"""How `make test` spreads tests over its two pytest-xdist workers (`-n 2 --dist loadgroup`).

The end-to-end tests form two serial groups, each run on one worker in collection order:
- ``e2e``: the live applications whose checks are bound to time (the shop, its FinOps variant, loopweb: alerts
  that must fire and clear, recovery within a window, campaigns of two environments at once). Only one of these
  runs at a time: end-to-end files in parallel were tried, their shared deployments then ran side by side (a
  campaign or verify file alone runs two shops), four shops on two cores, and the timing-bound checks measured the
  machine's load rather than the system's behaviour.
- ``e2e-hosts``: live tests without such clocks (CIS host containers and the offline Kubernetes class, the roles'
  idempotence, the FinOps billing stores, the image build, loopweb's AWX-contract workflows, the DevOps
  workspaces). They run on the
  other worker, beside the ``e2e`` group, as the unit tests do (which run live Ansible, frozen Prometheus servers
  and a Kubernetes renderer too).
The unit tests spread over whatever worker is free. ``tests/unit/test_k8s_offline.py`` stays on one worker so that
its ~200 s rendering fixture runs once.

Groups are scheduled largest first (xdist's loadscope reorder: most tests first), so the ``e2e`` group starts at
once on one worker and the next groups on the other, which asks for new work whenever it runs dry; the ``e2e``
worker asks only when its group is nearly done.

Why a scheduler and not ``@pytest.mark.xdist_group``: xdist's ``loadgroup`` reads the mark into a node-id suffix by
assigning ``item._nodeid``, which pytest >= 9.2 no longer reads (node ids live in ``item._id``), so the marks were
silently ignored and the end-to-end files ran on both workers at once. Grouping by path in the controller needs
nothing private from pytest.
"""

from __future__ import annotations

from typing import Any

import pytest

# Node-id prefix -> the group whose tests run on one worker, in order.
# The first matching prefix wins: the files of `e2e-hosts` come before the `e2e` catch-all.
SERIAL_GROUPS = {
    "tests/e2e/test_ciso.py": "e2e-hosts",
    "tests/e2e/test_idempotence.py": "e2e-hosts",
    "tests/e2e/test_finops.py": "e2e-hosts",
    "tests/e2e/test_finops_postgres.py": "e2e-hosts",
    "tests/e2e/test_images.py": "e2e-hosts",
    "tests/e2e/test_awx_contract.py": "e2e-hosts",
    "tests/e2e/test_workspace_env.py": "e2e-hosts",  # DevOps workspaces: builds and tests, no clocks
    "tests/e2e/test_devops_scenarios.py": "e2e-hosts",
    "tests/e2e/": "e2e",
    "tests/unit/test_k8s_offline.py": "k8s_offline",
    "tests/unit/test_isolation_audit.py": "isolation_audit",  # its table test reads what the cells recorded
    "tests/unit/test_gateway_terminal.py": "terminal",  # one workspace container for the module
}


def group_of(nodeid: str) -> str:
    """The scheduling unit of a test: its serial group, else the test itself."""
    for prefix, group in SERIAL_GROUPS.items():
        if nodeid.startswith(prefix):
            return group
    return nodeid


@pytest.hookimpl(tryfirst=True)  # before xdist's own, which would build its LoadGroupScheduling
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class PathGroupScheduling(LoadScopeScheduling):
        """LoadScope scheduling whose scopes are `group_of` (largest first: the end-to-end group starts at once)."""

        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid)

    return PathGroupScheduling(config, log)
