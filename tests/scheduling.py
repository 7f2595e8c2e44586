"""How `make test` spreads tests over its two pytest-xdist workers (`-n 2 --dist loadgroup`).

Every end-to-end test runs on one worker, in collection order, while the unit tests spread over the other (and
over the first once its end-to-end work is done). End-to-end files in parallel were tried: their shared
deployments then run side by side (a campaign or verify file alone runs two shops), four shops on two cores, and
the timing-bound checks (alerts, recovery) measured the machine's load rather than the system's behaviour.
``tests/unit/test_k8s_offline.py`` stays on one worker so that its ~200 s rendering fixture runs once.

Why a scheduler and not ``@pytest.mark.xdist_group``: xdist's ``loadgroup`` reads the mark into a node-id suffix by
assigning ``item._nodeid``, which pytest >= 9.2 no longer reads (node ids live in ``item._id``), so the marks were
silently ignored and the end-to-end files ran on both workers at once. Grouping by path in the controller needs
nothing private from pytest.
"""

from __future__ import annotations

from typing import Any

import pytest

# Node-id prefix -> the group whose tests run on one worker, in order.
SERIAL_GROUPS = {
    "tests/e2e/": "e2e",
    "tests/unit/test_k8s_offline.py": "k8s_offline",
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
