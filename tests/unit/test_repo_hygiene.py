"""The tracked tree holds only what the layout names: no stray empty files, nothing unexpected at the top."""

from __future__ import annotations

import subprocess

import pytest

from orchestrator import paths

# The fixed top level (docs/architecture.md); anything else tracked there is a stray.
TOP_LEVEL = {".ci", ".gitignore", "Makefile", "README.md", "ansible.cfg", "docs", "inventories", "orchestrator",
             "playbooks", "pyproject.toml", "roles", "scenario_specs", "tests"}


def tracked() -> list[str]:
    proc = subprocess.run(["git", "ls-files", "-z"], cwd=paths.PROJECT_ROOT, capture_output=True, check=False)
    if proc.returncode != 0:
        pytest.skip(f"not a git checkout ({proc.stderr.decode(errors='replace').strip()}): nothing tracked to check")
    return [f for f in proc.stdout.decode().split("\0") if f]


def test_no_tracked_empty_files_but_package_markers() -> None:
    empty = [f for f in tracked()
             if (paths.PROJECT_ROOT / f).is_file() and (paths.PROJECT_ROOT / f).stat().st_size == 0
             and not f.endswith("__init__.py")]
    assert empty == [], f"empty files are tracked (strays of a shell redirect?): {empty}"


def test_top_level_holds_only_the_layout() -> None:
    strays = sorted({f.split("/", 1)[0] for f in tracked()} - TOP_LEVEL)
    assert strays == [], f"unexpected top-level entries: {strays}"
