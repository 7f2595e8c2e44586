"""Live: real registries and real toolchains for the DevOps upstream projects, a sample small enough for `make test`
(about a minute): the Go module proxy and PyPI serve the pinned versions with the pinned checksums, and one Python
project builds and passes its own tests offline through the check contract. Every project is
`make devops-projects` (not in `make test`: ~16 min from an empty cache)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from orchestrator.devops_projects import catalogue as cat
from orchestrator.devops_projects.fetch import Cache, read_fetched
from orchestrator.devops_projects.run import run_projects

pytestmark = [pytest.mark.e2e,
              pytest.mark.skipif(shutil.which("go") is None, reason="the Go module proxy is read by the go command, "
                                                                    "which this machine lacks")]


def test_pinned_projects_fetch_verify_build_and_test_from_the_real_registries(tmp_path: Path) -> None:
    cache = Cache(tmp_path / "cache")
    reports = run_projects(("go-semver", "python-inflection"), fetch=True, check=None, cache=cache)
    assert [r.error for r in reports] == [None, None]
    catalogue = cat.load()
    for project in catalogue.select(["go-semver", "python-inflection"]):
        assert read_fetched(cache.tree(project))["sha256"] == {a.role: a.sha256 for a in project.source.artifacts}
    assert (cache.tree(catalogue.select(["go-semver"])[0]) / "version.go").is_file()
    assert sorted(p.name for p in cache.src.iterdir()) == ["go-semver", "python-inflection"]  # nothing staged left

    checked = run_projects(("python-inflection",), fetch=False, check="host", cache=cache)[0]
    assert checked.error is None and checked.check is not None
    assert checked.check["tests_passed"] and checked.check["failed"] == 0
    assert checked.check["passed"] >= 400  # inflection 0.5.1's own suite: 455 cases
