"""Shared fixtures: a private, editable copy of a real scenario and helpers to break it."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from orchestrator import paths

REAL_SCENARIO = "loopweb-web-down"


@dataclass
class SpecCopy:
    """A copy of scenario_specs/<REAL_SCENARIO> under tmp_path, with YAML edit helpers."""

    root: Path  # the directory to hand to validate_paths (holds the scenario dir)
    dir: Path

    @property
    def spec(self) -> Path:
        return self.dir / "scenario.yaml"

    @property
    def ground_truth(self) -> Path:
        return self.dir / "ground_truth.yaml"

    def edit(self, change: Callable[[dict[str, Any]], None], which: str = "spec") -> None:
        file = self.spec if which == "spec" else self.ground_truth
        data = yaml.safe_load(file.read_text())
        change(data)
        file.write_text(yaml.safe_dump(data, sort_keys=False))


def copy_scenario(dest_root: Path, name: str = REAL_SCENARIO, as_dir: str | None = None) -> SpecCopy:
    target = dest_root / (as_dir or name)
    shutil.copytree(paths.SPECS_DIR / name, target)
    return SpecCopy(root=dest_root, dir=target)


@pytest.fixture
def spec_copy(tmp_path: Path) -> SpecCopy:
    return copy_scenario(tmp_path / "specs")


@pytest.fixture
def make_copy(tmp_path: Path) -> Callable[..., SpecCopy]:
    """Factory: ``make_copy(as_dir="b")`` adds another copy under the same specs root."""
    return lambda **kw: copy_scenario(tmp_path / "specs", **kw)


@pytest.fixture
def registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[dict[str, Any]], Path]:
    """Point the id registry at a tmp file with the given ``ids`` mapping."""

    def write(ids: dict[str, Any]) -> Path:
        file = tmp_path / "REGISTRY.yaml"
        file.write_text(yaml.safe_dump({"ids": ids}))
        monkeypatch.setattr(paths, "ID_REGISTRY", file)
        return file

    return write



@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private OPSBENCH_HOME (runs, index, campaigns) under tmp_path; modules that need it for every test
    say so with ``pytestmark = pytest.mark.usefixtures("home")``."""
    monkeypatch.setenv("OPSBENCH_HOME", str(tmp_path / "state"))
    return tmp_path / "state"


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A snapshot the recorder made of the gateway tests' fake live run (one per module: recording takes seconds)."""
    from frozen_fixtures import synthetic_snapshot  # here, so that modules that never use it do not import it

    return synthetic_snapshot(tmp_path_factory.mktemp("rec"))


CHROMIUM = "/usr/bin/chromium"
CHROMIUM_SETUP = "`make setup` installs it (pip extras `dev`; chromium via roles/bootstrap_host)"


@pytest.fixture
def browser() -> Iterator[Any]:
    """Headless Chromium for the layout tests: Debian's, driven by Playwright (`playwright install` cannot fetch
    browsers here)."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail(f"playwright is not installed: {CHROMIUM_SETUP}")
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"{CHROMIUM} is missing: {CHROMIUM_SETUP}")
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, timeout=120_000, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
            "--no-first-run"])
        try:
            yield chromium
        finally:
            chromium.close()
