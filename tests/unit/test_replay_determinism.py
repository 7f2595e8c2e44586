"""Determinism of replay: the heuristic agent (the default agent) replayed 10 times on a snapshot gives the same
output, the same scores and the same trajectory every time: tool names, arguments, statuses and answers (the
trajectory's sha256 of each answer) byte-identical; only timestamps and durations differ.

Snapshots: every snapshot directory in the corpus, `$OPSBENCH_SNAPSHOT_CORPUS` if set, else `tests/data/snapshots/`
(the committed sample corpus). While no corpus exists yet, the synthetic snapshot that the recorder makes of the
gateway tests' fake live run (`frozen_fixtures.record_fake_run`) stands in for it, so the test always proves the
property on at least one snapshot. The 10 trials of a snapshot share one frozen environment, as `opsbench replay`
runs them; `$OPSBENCH_REPLAY_TRIALS` sets the count: `make test` runs 5 per snapshot to stay inside CI's budget,
`make reliability` the full 10 (the default here, and the claim).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from frozen_fixtures import synthetic_snapshot

from orchestrator import paths, store
from orchestrator.harness.replay import replay
from orchestrator.snapshots import format as fmt

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("home")]

TRIALS = int(os.environ.get("OPSBENCH_REPLAY_TRIALS", "10"))
CORPUS = Path(os.environ.get("OPSBENCH_SNAPSHOT_CORPUS") or paths.PROJECT_ROOT / "tests" / "data" / "snapshots")
VOLATILE_RECORD = frozenset({"ts", "elapsed"})
"""Trajectory fields that measure time, not what the agent did or saw."""
VOLATILE_SCORES = frozenset({"submitted", "elapsed", "mttd", "mttr"})
"""Scores that are durations (seconds from the agent's start to its submission, time to detect or repair)."""


def corpus() -> list[Path]:
    """The corpus's snapshot directories and exported archives (the committed sample corpus is archives)."""
    if not CORPUS.is_dir():
        return []
    return sorted([p.parent for p in CORPUS.glob(f"*/{fmt.INDEX}")] + list(CORPUS.glob("*.tar.*")))



@pytest.fixture(params=corpus() or ["synthetic"], ids=lambda p: p.name if isinstance(p, Path) else p)
def snapshot(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    if isinstance(request.param, Path):
        return request.param
    return synthetic_snapshot(tmp_path_factory.mktemp("synthetic"))


def _scores(evaluations: dict[str, Any]) -> dict[str, Any]:
    return {name: {k: v for k, v in scores.items() if k not in VOLATILE_SCORES}
            for name, scores in evaluations.items()}


def _trajectory(trial_dir: Path) -> list[dict[str, Any]]:
    path = trial_dir / "gateway" / "trajectory.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    return [{k: v for k, v in r.items() if k not in VOLATILE_RECORD} for r in records]


def _output(trial_dir: Path) -> bytes | None:
    path = trial_dir / "agent" / "output.json"
    return path.read_bytes() if path.exists() else None


def test_the_heuristic_agent_replays_identically(snapshot: Path) -> None:
    records = replay([snapshot], agent=None, trials=TRIALS)
    assert [r.status for r in records] == ["completed"] * TRIALS, [r.reason for r in records]
    dirs = {r["id"]: Path(r["run_dir"]) for r in store.list_runs(limit=1000)}
    first = records[0]
    expected = (_output(dirs[first.run_id]), _scores(first.scores), _trajectory(dirs[first.run_id]))
    assert expected[0] is not None, "the heuristic agent wrote no output"
    assert expected[2], "the heuristic agent made no tool call"
    assert all("result_sha256" in r for r in expected[2])
    for r in records[1:]:
        got = (_output(dirs[r.run_id]), _scores(r.scores), _trajectory(dirs[r.run_id]))
        assert got[0] == expected[0], f"trial {r.trial}: output differs"
        assert got[1] == expected[1], f"trial {r.trial}: scores differ"
        assert got[2] == expected[2], f"trial {r.trial}: trajectory differs"
        assert r.passed == first.passed
