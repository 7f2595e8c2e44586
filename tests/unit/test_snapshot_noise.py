"""Noise is recorded as it happened: every committed sample snapshot whose scenario runs noise while the agent works
(`noise:` in the spec) holds that noise's own telemetry in its evidence window, from the moment it started, and no
trace of the noise machinery.

Each noise role leaves its own mark, read from the snapshot's files (no podman, no Prometheus):
- `noise_log_warnings`: the target's log holds WARN records of 404s for the role's stray paths;
- `noise_latency_jitter`: the source's calls to the target are slow only after a point in the window (the noise
  started after the faults), and the source's calls to its other healthy peers are not;
- `noise_alert_flap`: the source's calls to the target wait out the burst's delay.

A new noise role needs its check here: the test fails on a noise role it does not know.
"""

from __future__ import annotations

import json
import statistics
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from orchestrator import paths
from orchestrator.argspecs import resolve_role_vars
from orchestrator.catalog import find_scenario
from orchestrator.snapshots.leaks import find_strings

CORPUS = paths.PROJECT_ROOT / "tests" / "data" / "snapshots"


def _scenario_of(archive: Path) -> str:
    with tarfile.open(archive) as tar:
        top = tar.getnames()[0].split("/")[0]
    return top.rsplit("-", 2)[0]


NOISY = [a for a in sorted(CORPUS.glob("*.tar.gz")) if find_scenario(_scenario_of(a)).noise]


@pytest.fixture(scope="module", params=NOISY, ids=lambda a: _scenario_of(a))
def snapshot(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    dest = tmp_path_factory.mktemp("noise")
    with tarfile.open(request.param) as tar:
        tar.extractall(dest, filter="data")
    return next(p for p in dest.iterdir() if p.is_dir())


def _records(snap: Path, family: str, service: str) -> list[dict[str, Any]]:
    """Every log record or span of the service's instances in the snapshot."""
    found: list[dict[str, Any]] = []
    for path in sorted((snap / "telemetry" / family).glob(f"{service}-*.jsonl")):
        found += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return found


def _calls(snap: Path, source: str) -> list[tuple[str, float, float]]:
    """The source's client calls: (peer, start in s, duration in ms), in start order."""
    spans = [s for s in _records(snap, "traces", source) if s.get("kind") == "CLIENT"]
    return sorted((str(s["attributes"].get("peer.service")), s["startTimeUnixNano"] / 1e9,
                   (s["endTimeUnixNano"] - s["startTimeUnixNano"]) / 1e6) for s in spans)


def _log_warnings(snap: Path, values: dict[str, Any]) -> None:
    target, stray = values["noise_log_warnings_target"], set(values["noise_log_warnings_paths"])
    hits = [r for r in _records(snap, "logs", target)
            if r["attributes"].get("url.path") in stray and r["attributes"].get("http.response.status_code") == 404]
    assert len(hits) >= 3, f"{target}'s log holds {len(hits)} stray 404s"
    assert {r["severityText"] for r in hits} == {"WARN"}
    # Only the target was scanned: no other service logged the stray paths.
    others = {r["resource"]["service.name"] for p in (snap / "telemetry" / "logs").glob("*.jsonl")
              for r in map(json.loads, p.read_text().splitlines()) if r["attributes"].get("url.path") in stray}
    assert others == {target}, others


def _latency_jitter(snap: Path, values: dict[str, Any]) -> None:
    source, target = values["noise_latency_jitter_source"], values["noise_latency_jitter_target"]
    floor = values["noise_latency_jitter_delay_ms"] / 2
    calls = _calls(snap, source)
    to_target = [(start, ms) for peer, start, ms in calls if peer == target]
    slow = [start for start, ms in to_target if ms >= floor]
    assert len(slow) >= 5, f"{len(slow)} of {source}'s {len(to_target)} calls to {target} took {floor} ms or more"
    began = slow[0]
    before = [ms for start, ms in to_target if start < began]
    after = [ms for start, ms in to_target if start >= began]
    # It started during the window, as it happened: the calls before it were fast, most after it are slow.
    assert before and statistics.median(before) < floor / 2, before
    assert statistics.median(after) >= floor, after
    # Only that edge: the source's calls to its healthy peers (no call of theirs waited a second: a fault of the
    # scenario may slow others) stay fast after it began.
    slowest: dict[str, float] = {}
    for peer, _start, ms in calls:
        slowest[peer] = max(ms, slowest.get(peer, 0.0))
    healthy = [peer for peer, ms in slowest.items() if peer != target and ms < 1000]
    assert healthy, slowest
    for peer in healthy:
        theirs = [ms for p, start, ms in calls if p == peer and start >= began]
        if len(theirs) >= 5:
            assert statistics.median(theirs) < floor / 2, (peer, theirs)


def _alert_flap(snap: Path, values: dict[str, Any]) -> None:
    source, target = values["noise_alert_flap_source"], values["noise_alert_flap_target"]
    delay = values["noise_alert_flap_delay_ms"]
    to_target = [ms for peer, _start, ms in _calls(snap, source) if peer == target]
    waited = [ms for ms in to_target if ms >= delay]
    assert len(waited) >= 3, f"{len(waited)} of {source}'s {len(to_target)} calls to {target} waited {delay} ms"


CHECKS: dict[str, Callable[[Path, dict[str, Any]], None]] = {
    "noise_log_warnings": _log_warnings,
    "noise_latency_jitter": _latency_jitter,
    "noise_alert_flap": _alert_flap,
}


def _noise(snap: Path) -> list[dict[str, Any]]:
    """The noise entries of the snapshot's scenario."""
    index = json.loads((snap / "snapshot.json").read_text())
    return find_scenario(index["scenario"]["id"]).noise


def test_the_sample_corpus_records_every_noise_role() -> None:
    """Each noise role the scenarios use is shown live in at least one committed snapshot."""
    used = {n["role"] for p in paths.SPECS_DIR.glob("*/scenario.yaml")
            for n in (yaml.safe_load(p.read_text()) or {}).get("noise", [])}
    recorded = {n["role"] for a in NOISY for n in find_scenario(_scenario_of(a)).noise}
    assert used and used <= recorded, f"no sample snapshot records {sorted(used - recorded)}"


def test_noise_is_in_the_snapshot_as_it_happened(snapshot: Path) -> None:
    noise = _noise(snapshot)
    assert noise
    for entry in noise:
        assert entry["role"] in CHECKS, f"write a check for {entry['role']} (what it leaves in the telemetry)"
        CHECKS[entry["role"]](snapshot, resolve_role_vars(entry["role"], "inject", entry["args"]))


def test_the_noise_machinery_is_not_in_the_snapshot(snapshot: Path) -> None:
    """The noise's roles, items and proxy arguments are machinery: the agent sees the noise, never what makes it."""
    noise = _noise(snapshot)
    needles = [str(n["role"]) for n in noise] + [str(n["name"]) for n in noise] + ["noise_"]
    for entry in noise:
        values = resolve_role_vars(entry["role"], "inject", entry["args"])
        needles += [f"--{k.removeprefix(entry['role'] + '_').replace('_', '-')}={v}" for k, v in values.items()
                    if k.endswith(("_delay_ms", "_jitter_ms", "_burst_s"))]
    assert find_strings(snapshot, needles) == []


def test_the_checks_find_no_noise_where_there_was_none(tmp_path: Path) -> None:
    """Each check fails on a snapshot recorded without noise (the same arguments as the corpus's noise): the checks
    see the noise, not the shop."""
    quiet = next(a for a in sorted(CORPUS.glob("*.tar.gz")) if not find_scenario(_scenario_of(a)).noise)
    with tarfile.open(quiet) as tar:
        tar.extractall(tmp_path, filter="data")
    snap = next(p for p in tmp_path.iterdir() if p.is_dir())
    entries = {n["role"]: n for a in NOISY for n in find_scenario(_scenario_of(a)).noise}
    assert set(entries) == set(CHECKS)
    for role, entry in entries.items():
        with pytest.raises(AssertionError):
            CHECKS[role](snap, resolve_role_vars(role, "inject", entry["args"]))
