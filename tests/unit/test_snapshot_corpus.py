"""The committed sample corpus (tests/data/snapshots/, recorded live with `opsbench snapshot record`): every archive
imports and verifies without podman, the corpus stays small, and no snapshot holds its scenario's ground truth."""

from __future__ import annotations

import json
import re
import tarfile
from pathlib import Path

import pytest
import yaml

from orchestrator import paths
from orchestrator.argspecs import resolve_role_vars
from orchestrator.catalog import find_scenario
from orchestrator.snapshots import corpus
from orchestrator.snapshots.leaks import fault_strings, find_strings
from orchestrator.spec import Scenario

CORPUS = paths.PROJECT_ROOT / "tests" / "data" / "snapshots"
ARCHIVES = sorted(CORPUS.glob("*.tar.gz"))
MAX_BYTES = 10 * 1024 * 1024
_FLAG = re.compile(r"podman_control_flag: (\w+)")
_PROXY_ARG = re.compile(r"\"(--[\w-]+)=\{\{ (\w+) \}\}\"")
_PROXY_MODE = re.compile(r"\"(--mode=\w+)\"")


def distinctive_strings(scn: Scenario) -> list[str]:
    """What of the ground truth an agent must find out and a snapshot must never say: the fault roles and item
    names, the ground truth's fault types, the fault proxy's arguments as injected, and the saved state of a
    flag fault (`{"kind": "flag", "flag": "<name>", "entry": <the flag before>}`, as podman_control writes it).

    A feature flag's bare name is not among them: it is part of the application's visible surface, live as
    frozen (list_services lists every flag of the shop, and the shop logs a flag change as a real flag service
    does, which is evidence the live agent had too and a replay must serve the same). So is the flag switch in
    the change journal (`changes.json`: `{"kind": "flag", "details": {"flag": ...}}`), as a flag console records
    it: the saved state is told apart by its own shape."""
    found = fault_strings(scn)
    truth = yaml.safe_load(scn.ground_truth_path.read_text())
    found += [str(e["faultType"]) for e in truth.get("entities", []) if e.get("faultType")]
    for fault in scn.faults:
        inject = (paths.ROLES_DIR / fault["role"] / "tasks" / "inject.yml").read_text()
        values = resolve_role_vars(fault["role"], "inject", fault["args"])
        flags = _FLAG.findall(inject)
        found += [f'"kind": "flag", "flag": "{flag}", "entry"' for flag in flags]
        found += _PROXY_MODE.findall(inject)
        found += [f"{flag}={values[var]}" for flag, var in _PROXY_ARG.findall(inject) if var in values]
    return found


def test_the_sample_corpus_is_there_and_small() -> None:
    assert len(ARCHIVES) >= 3, f"expected the sample corpus under {CORPUS}"
    assert sum(a.stat().st_size for a in ARCHIVES) <= MAX_BYTES
    scenarios = set()
    for archive in ARCHIVES:
        with tarfile.open(archive) as tar:
            top = tar.getnames()[0].split("/")[0]
        scenarios.add(top.rsplit("-", 2)[0])
    assert len(scenarios) >= 3, scenarios


@pytest.mark.parametrize("archive", ARCHIVES, ids=[a.name for a in ARCHIVES])
def test_every_sample_snapshot_verifies_and_holds_no_ground_truth(archive: Path, tmp_path: Path) -> None:
    info = corpus.import_snapshot(archive, tmp_path)
    assert corpus.verify_path(info.path).snapshot_id == info.snapshot_id
    assert {"alerts", "metrics", "logs", "traces", "topology", "services"} <= set(info.families)
    scn = find_scenario(info.scenario_id)
    needles = distinctive_strings(scn)
    assert len(needles) >= 3, needles  # the check is only as good as what it looks for
    # The index names its scenario (and the snapshot id repeats it) by design: replay needs it, and no agent reads
    # the index. A scenario id may contain a fault's item name (shop-postgres-stock-resync-job-...): blank those two
    # fields in this private copy, and look everywhere else.
    index = json.loads((info.path / "snapshot.json").read_text())
    index["scenario"]["id"] = index["snapshot_id"] = ""
    (info.path / "snapshot.json").write_text(json.dumps(index))
    assert find_strings(info.path, needles) == []


def test_the_leak_check_finds_what_it_looks_for(tmp_path: Path) -> None:
    """The strings are real: planted in a copy of a sample snapshot, each one is found."""
    info = corpus.import_snapshot(ARCHIVES[0], tmp_path)
    needles = distinctive_strings(find_scenario(info.scenario_id))
    (info.path / "telemetry" / "planted.txt").write_text(" ".join(s.upper() for s in needles))
    assert {leak.string for leak in find_strings(info.path, needles)} == set(needles)
