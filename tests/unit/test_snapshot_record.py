"""`opsbench snapshot record` without podman: which scenarios may be recorded, the evidence window, and the
lifecycle around the snapshot step with every playbook replaced by a fake that records what ran (the live
recording is how tests/data/snapshots/ was made, see docs/snapshots.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from snapshot_fixtures import make_snapshot

from orchestrator import lifecycle, store
from orchestrator.catalog import find_scenario
from orchestrator.cli import main
from orchestrator.errors import OpsBenchError
from orchestrator.harness import record as rec
from orchestrator.progress import Progress
from orchestrator.runner import StepResult

pytestmark = pytest.mark.usefixtures("home")  # a private OPSBENCH_HOME (conftest)



class FakePlaybooks:
    """Stands in for runner.run_playbook: every step succeeds (checks hold, nothing left over) unless told to
    fail; the snapshot step writes a real snapshot where the role would."""

    def __init__(self, fail: str = "") -> None:
        self.fail = fail
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, step: str, playbook: str, extravars: dict[str, Any], private_data_dir: Path,
                 **_: Any) -> StepResult:
        self.calls.append((step, extravars))
        if step == self.fail:
            return StepResult(step, "failed", 2, 0.1, failures=[f"{step} broke"])
        stats: dict[str, Any] = {}
        if "opsbench_checks" in extravars:
            stats["checks"] = {c["name"]: {"ok": True} for c in extravars["opsbench_checks"]}
        if step == "pristine":
            stats["leftovers"] = []
        if step == "snapshot":
            out = Path(extravars["opsbench_snapshot_out"])
            info = make_snapshot(out, scenario=extravars["opsbench_scenario_id"])
            stats["snapshot"] = {"snapshot_id": info.snapshot_id, "path": str(out), "families": list(info.families),
                                 "files": len(info.files), "bytes": 123}
        return StepResult(step, "successful", 0, 0.1, stats)

    @property
    def steps(self) -> list[str]:
        return [step for step, _ in self.calls]

    def extravars(self, step: str) -> list[dict[str, Any]]:
        return [ev for s, ev in self.calls if s == step]


@pytest.fixture
def playbooks(monkeypatch: pytest.MonkeyPatch) -> FakePlaybooks:
    fake = FakePlaybooks()
    monkeypatch.setattr(lifecycle, "run_playbook", fake)
    return fake


TRIAL = ["inject", "manifestation", "handover", "snapshot", "revoke", "remove", "recovery", "pristine"]


def test_scenarios_of_one_environment_share_one_host(tmp_path: Path, playbooks: FakePlaybooks) -> None:
    out = tmp_path / "corpus"
    made = rec.record([find_scenario("shop-cart-down"), find_scenario("shop-redis-down")], out, 1, Progress())
    assert [r.status for r in made] == ["recorded", "recorded"], [r.reason for r in made]
    # One deploy and one teardown; the second trial skips the baseline the first one's recovery just proved.
    assert playbooks.steps == ["deploy", "baseline", *TRIAL, *TRIAL, "teardown"]
    assert sorted(p.name for p in out.iterdir()) == sorted(r.snapshot_id for r in made)
    first, second = playbooks.extravars("snapshot")
    handovers = [store.get_run(r.run_id) for r in made]
    assert all(h is not None and h["purpose"] == "record" for h in handovers)
    # The first window starts at deploy, the second where the first trial left the environment at baseline.
    assert "opsbench_visible_since" not in first
    assert second["opsbench_window_start"] == second["opsbench_visible_since"]
    assert first["opsbench_window_start"] < second["opsbench_window_start"] <= second["opsbench_frozen_now"]
    assert [r.window for r in made] == [[e["opsbench_window_start"], e["opsbench_frozen_now"]]
                                        for e in (first, second)]
    assert "deploy" in made[0].seconds and "deploy" not in made[1].seconds
    assert made[0].seconds["total"] >= made[0].seconds["trial"]
    host = store.get_run(made[0].host)
    assert host is not None and host["purpose"] == "record"


def test_a_failed_snapshot_step_leaves_no_snapshot_and_still_cleans_up(tmp_path: Path,
                                                                      playbooks: FakePlaybooks) -> None:
    playbooks.fail = "snapshot"
    out = tmp_path / "corpus"
    made = rec.record([find_scenario("shop-cart-down")], out, 1, Progress())
    assert [(r.status, r.snapshot_id) for r in made] == [("error", "")]
    assert "step snapshot failed: snapshot broke" in made[0].reason
    assert playbooks.steps == ["deploy", "baseline", *TRIAL, "teardown"]
    assert list(out.iterdir()) == []  # the staging directory is gone too


def test_a_relative_out_is_where_the_snapshot_lands(tmp_path: Path, playbooks: FakePlaybooks,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The snapshot step's playbook runs in another working directory: a relative --out is resolved first."""
    monkeypatch.chdir(tmp_path)
    made = rec.record([find_scenario("shop-cart-down")], Path("rel/corpus"), 1, Progress())
    assert made[0].ok and Path(playbooks.extravars("snapshot")[0]["opsbench_snapshot_out"]).is_absolute()
    assert (tmp_path / "rel" / "corpus" / made[0].snapshot_id).is_dir()


def test_an_exception_in_the_snapshot_step_still_removes_the_faults(tmp_path: Path, playbooks: FakePlaybooks,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*_: Any, **__: Any) -> None:
        raise FileNotFoundError("the staging directory vanished")

    monkeypatch.setattr(rec, "_snapshot_step", broken)
    with pytest.raises(FileNotFoundError):
        rec.record([find_scenario("shop-cart-down")], tmp_path / "corpus", 1, Progress())
    assert playbooks.steps == ["deploy", "baseline", "inject", "manifestation", "handover", "revoke", "remove",
                               "recovery", "pristine", "teardown"]


def test_an_incident_that_does_not_manifest_is_invalid_and_not_recorded(tmp_path: Path,
                                                                       playbooks: FakePlaybooks) -> None:
    playbooks.fail = "manifestation"
    made = rec.record([find_scenario("shop-cart-down")], tmp_path / "corpus", 1, Progress())
    assert made[0].status == "error" and "manifestation" in made[0].reason
    assert "snapshot" not in playbooks.steps and "remove" in playbooks.steps and playbooks.steps[-1] == "teardown"


def test_the_record_command_reports_json_and_fails_when_a_recording_failed(tmp_path: Path,
                                                                          playbooks: FakePlaybooks) -> None:
    res = CliRunner().invoke(main, ["snapshot", "record", "shop-cart-down", "--repeats", "2", "--out",
                                    str(tmp_path / "c"), "--json", "--quiet"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert doc["ok"] and [r["repeat"] for r in doc["recordings"]] == [1, 2]
    assert len({r["snapshot_id"] for r in doc["recordings"]}) == 2
    playbooks.fail = "deploy"
    res = CliRunner().invoke(main, ["snapshot", "record", "shop-cart-down", "--out", str(tmp_path / "c"), "--quiet"])
    assert res.exit_code == 1 and "deploy failed" in res.output


def test_stale_staging_of_a_dead_recorder_is_removed(tmp_path: Path) -> None:
    stale = tmp_path / f"{rec.STAGING_PREFIX}20200101-000000-abcdef"
    stale.mkdir(parents=True)
    (stale / "manifest.json").write_text("{}")
    assert rec.remove_stale_staging(tmp_path) == [stale] and not stale.exists()


def test_evidence_window_is_capped() -> None:
    assert rec.evidence_window(10_000.0, 9_000.0, 1800) == (9_000.0, 10_000.0)
    assert rec.evidence_window(10_000.0, 1_000.0, 1800) == (8_200.0, 10_000.0)
    assert rec.evidence_window(10_000.0, 11_000.0, 1800) == (10_000.0, 10_000.0)


def test_which_scenarios_can_be_recorded() -> None:
    every = {s.id for s in rec.replayable_scenarios()}
    assert {"shop-cart-down", "shop-healthy-baseline", "loopweb-web-down"} <= every
    assert not {i for i in every if i.startswith(("k8s-", "ciso-"))}
    # FinOps data analyses on the DuckDB store are recorded (the billing family); cost incidents and the
    # PostgreSQL store are not.
    assert {i for i in every if i.startswith("finops-")} == {
        "finops-allocation-ratio", "finops-anomaly-detection", "finops-anomaly-ranking", "finops-cost-by-category",
        "finops-cost-variance", "finops-discount-coverage", "finops-peak-to-average", "finops-top-applications"}
    with pytest.raises(OpsBenchError, match="keeps its billing data in postgres"):
        rec.choose(["finops-top-applications-postgres"], False)
    assert "shop-cart-down-mitigate" not in every
    with pytest.raises(OpsBenchError, match="has mitigate task"):
        rec.choose(["shop-cart-down-mitigate"], False)
    with pytest.raises(OpsBenchError, match="kubernetes backend"):
        rec.choose(["k8s-shop-cart-scaled-to-zero"], False)
    with pytest.raises(OpsBenchError, match="not both"):
        rec.choose(["shop-cart-down"], True)
    with pytest.raises(OpsBenchError, match="no scenarios"):
        rec.choose([], False)


@pytest.mark.parametrize(("args", "message"), [
    (["shop-cart-down-mitigate"], "cannot be recorded as a snapshot: it has mitigate task"),
    (["no-such-scenario"], "no scenario named 'no-such-scenario'"),
    (["--all", "shop-cart-down"], "not both"),
    (["shop-cart-down", "--window-cap", "0"], "--window-cap"),
])
def test_record_refuses_bad_requests_before_anything_runs(args: list[str], message: str,
                                                          playbooks: FakePlaybooks) -> None:
    res = CliRunner().invoke(main, ["snapshot", "record", *args])
    assert res.exit_code != 0 and message in res.output
    assert playbooks.calls == []
