"""Capturing a run at handover: what the live gateway would serve, stripped and redacted the same way, and nothing
of the ground truth or the fault machinery."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from gateway_fixtures import NOW, PREFIX, T0, TOKEN, FakeObservability, fake_control, make_run_dir
from snapshot_fixtures import build_tsdb

from orchestrator.catalog import find_scenario
from orchestrator.gateway.scope import Scope, visible_topology
from orchestrator.snapshots import capture, leaks
from orchestrator.snapshots import format as fmt
from orchestrator.snapshots.frozen_prometheus import FrozenPrometheus, api
from orchestrator.telemetry import TelemetryStore
from orchestrator.topology import run_topology

S = 1_000_000_000


# What the handover read from Alertmanager (labels, annotations, startsAt, as handover.yml keeps them): payment's
# alert with the value at handover, and currency's, which resolved before the capture read Alertmanager again.
AT_HANDOVER = [
    {"labels": {"alertname": "ServiceErrorRateHigh", "service": "payment", "severity": "critical"},
     "annotations": {"summary": "payment answers 97% of requests with 5xx"}, "startsAt": "2023-11-14T22:13:20Z",
     "receivers": [{}]},
    {"labels": {"alertname": "ServiceDown", "service": "currency", "severity": "critical"},
     "annotations": {"summary": "currency-1 of currency does not answer scrapes"},
     "startsAt": "2023-11-14T22:14:58Z"},
]


@pytest.fixture(scope="module")
def obs() -> Iterator[FakeObservability]:
    fake = FakeObservability()
    yield fake
    fake.close()


@pytest.fixture
def run_dir(tmp_path: Path, obs: FakeObservability) -> Path:
    run_dir = make_run_dir(tmp_path, obs.url)
    (run_dir / "agent").mkdir()
    manifest = {"manifest_version": 1, "run": "r1", "tasks": [{"id": "diagnose", "kind": "diagnose", "goal": "g"}],
                "alerts": AT_HANDOVER, "budget": {"wallClockSeconds": 300},
                "deadline": 1_700_000_500, "observability": {"metrics": True, "logs": True, "traces": True},
                "tools": {"url": "http://127.0.0.1:9", "mcp_url": "http://127.0.0.1:9/mcp"},
                "token_file": str(run_dir / "secrets" / "agent_token"),
                "endpoints": {"gateway": "http://127.0.0.1:1"}, "topology": {"entities": []},
                "output": {"path": str(run_dir / "agent" / "output.json")}}
    (run_dir / "agent" / "manifest.json").write_text(json.dumps(manifest))
    # What a fault role saves before injecting, and the scenario's ground truth: never to be captured.
    (run_dir / "state" / "faults").mkdir(parents=True)
    (run_dir / "state" / "faults" / "stop-cart.json").write_text('{"role": "fault_container_stop"}')
    return run_dir


def _capture(run_dir: Path, out: Path, tsdb: Path | None = None, **kwargs: float) -> fmt.SnapshotInfo:
    return capture.capture(run_dir, out, scenario_id="shop-cart-down", spec_version=1, raw_tsdb=tsdb,
                           frozen_now=NOW, control=fake_control(), **kwargs)


def test_capture_writes_what_the_gateway_serves(run_dir: Path, tmp_path: Path) -> None:
    tsdb = build_tsdb(tmp_path / "raw", now=NOW)
    info = _capture(run_dir, tmp_path / "snap", tsdb)
    snap = tmp_path / "snap"
    assert fmt.verify(snap).snapshot_id == info.snapshot_id
    assert info.families == ("alerts", "metrics", "logs", "traces", "topology", "services")
    assert info.frozen_now == NOW
    assert info.window_start == NOW - 30 * 60 + 15  # the oldest evidence: the TSDB's first sample
    assert info.data["environment"]["container_prefix"] == PREFIX

    manifest = json.loads((snap / fmt.MANIFEST).read_text())
    assert sorted(manifest) == ["alerts", "budget", "manifest_version", "observability", "tasks", "topology"]
    alerts = json.loads((snap / fmt.ALERTS).read_text())
    # get_alerts' order and shape; the alert that resolved after handover is there, with Alertmanager's fingerprint
    # of its labels; the handover's annotations win (they render the value the live agent saw).
    assert [a["fingerprint"] for a in alerts] == ["f2", "f1", "f3", capture.fingerprint(AT_HANDOVER[1]["labels"])]
    assert alerts[0]["annotations"] == AT_HANDOVER[0]["annotations"]
    assert alerts[3] == {"alertname": "ServiceDown", "labels": AT_HANDOVER[1]["labels"], "state": "active",
                         "annotations": AT_HANDOVER[1]["annotations"], "startsAt": "2023-11-14T22:14:58Z",
                         "fingerprint": alerts[3]["fingerprint"]}
    assert all("generatorURL" not in a and "receivers" not in a for a in alerts)

    # A TelemetryStore on the snapshot answers as the live gateway's store does with the machinery hidden.
    scope = Scope(json.loads((run_dir / "environment.json").read_text())["topology"], PREFIX)
    with TelemetryStore(run_dir / "env" / "telemetry") as live, TelemetryStore(snap / "telemetry") as frozen:
        window = {"since_ns": T0, "until_ns": int(NOW * S)}
        assert frozen.search_logs(**window).to_dict() == live.search_logs(
            **window, hidden_services=scope.hidden_services).to_dict()
        assert frozen.get_traces(**window).to_dict() == live.get_traces(
            **window, hidden_services=scope.hidden_services).to_dict()
        assert frozen.search_logs(service="loadgen").total == 0
    assert sorted(p.name for p in (snap / "telemetry" / "logs").iterdir()) == [f"{PREFIX}checkout-1.jsonl"]

    topology = json.loads((snap / fmt.TOPOLOGY).read_text())
    assert topology["declared"] == scope.topology
    assert topology["measured"] == visible_topology(run_topology(run_dir, int(info.window_start * S), int(NOW * S)))
    assert "prometheus" not in {e["id"] for e in topology["measured"]["entities"]}
    services = json.loads((snap / fmt.SERVICES).read_text())
    assert sorted(services["describe_service"]) == scope.services
    assert "loadgen" not in {s["service"] for s in services["list_services"]["services"]}

    # Metrics: the machinery's series are gone, the application's answer at the frozen now.
    with FrozenPrometheus(snap / fmt.TSDB_DIR, tmp_path / "prom") as prom:
        assert api(prom.url, "/api/v1/label/service/values") == ["cart"]
        assert prom.query("prometheus_tsdb_head_series", NOW)["result"] == []
        assert prom.query('up{service="cart"} == 0', NOW)["result"]


def test_fingerprint_is_alertmanagers() -> None:
    """Checked against Alertmanager's own answers recorded in the committed sample snapshots."""
    import tarfile

    checked = 0
    for archive in sorted((Path(__file__).parents[1] / "data" / "snapshots").glob("*.tar.gz")):
        with tarfile.open(archive) as tar:
            member = next(m for m in tar.getmembers() if m.name.endswith("/" + fmt.ALERTS))
            handle = tar.extractfile(member)
            assert handle is not None
            for alert in json.load(handle):
                assert capture.fingerprint(alert["labels"]) == alert["fingerprint"], alert["labels"]
                checked += 1
    assert checked >= 6


def test_alerts_at_handover_keeps_the_handovers_truth() -> None:
    def alert(name: str, starts: str, fp: str = "") -> dict[str, object]:
        return {"alertname": name, "labels": {"alertname": name}, "annotations": {"summary": name.lower()},
                "startsAt": starts, "state": "active", "fingerprint": fp or capture.fingerprint({"alertname": name})}

    now = 1_700_000_100.0  # 2023-11-14T22:15:00Z
    handover = [{"labels": {"alertname": "Resolved"}, "annotations": {"summary": "gone by capture"},
                 "startsAt": "2023-11-14T22:14:00Z"},
                {"labels": {"alertname": "Both"}, "annotations": {"summary": "at handover"},
                 "startsAt": "2023-11-14T22:13:00Z"}]
    listed = [alert("Both", "2023-11-14T22:13:00Z", "abc"), alert("Missed", "2023-11-14T22:14:59Z"),
              alert("Later", "2023-11-14T22:15:03Z")]
    answer = capture.alerts_at_handover(handover, listed, now)
    assert [(a["alertname"], a["annotations"]["summary"], a["fingerprint"]) for a in answer] == [
        ("Both", "at handover", "abc"),  # the handover's annotation, Alertmanager's fingerprint
        ("Resolved", "gone by capture", capture.fingerprint({"alertname": "Resolved"})),
        ("Missed", "missed", capture.fingerprint({"alertname": "Missed"}))]  # began before now, listed later
    # An alert that began after the frozen now is not part of the incident, whoever reports it.
    assert capture.alerts_at_handover([{"labels": {"alertname": "Later"}, "startsAt": "2023-11-14T22:15:01Z"}],
                                      [], now) == []


def test_no_ground_truth_token_or_fault_state_in_the_snapshot(run_dir: Path, tmp_path: Path) -> None:
    _capture(run_dir, tmp_path / "snap")
    scenario = find_scenario("shop-cart-down")
    truth = scenario.ground_truth_path.read_text()
    distinctive = [*leaks.fault_strings(scenario), "process_down", "container stopped and kept down",
                   "its address refuses connections", TOKEN, str(run_dir / "secrets"), "127.0.0.1"]
    assert all(s in truth or s in leaks.fault_strings(scenario) or s in (TOKEN, str(run_dir / "secrets"),
                                                                         "127.0.0.1") for s in distinctive)
    assert leaks.find_strings(tmp_path / "snap", distinctive) == []
    # The check itself finds what is there (it would catch a leak).
    assert [str(x) for x in leaks.find_strings(run_dir, ["FAULT_CONTAINER_STOP"])] == [
        "state/faults/stop-cart.json: contains 'FAULT_CONTAINER_STOP'"]


def test_masked_families_are_not_recorded(run_dir: Path, tmp_path: Path) -> None:
    manifest = json.loads((run_dir / "agent" / "manifest.json").read_text())
    manifest["observability"]["traces"] = False
    (run_dir / "agent" / "manifest.json").write_text(json.dumps(manifest))
    info = _capture(run_dir, tmp_path / "snap")
    assert "traces" not in info.families and "metrics" not in info.families  # no TSDB given: no metrics either
    assert not (tmp_path / "snap" / "telemetry" / "traces").exists()
    assert "logs" in info.families


def test_window_start_cuts_older_records(run_dir: Path, tmp_path: Path) -> None:
    info = _capture(run_dir, tmp_path / "snap", window_start=T0 / S + 10)
    assert info.window_start == T0 / S + 10
    with TelemetryStore(tmp_path / "snap" / "telemetry") as frozen:
        assert frozen.search_logs().total == 15  # checkout records 10..24
        assert frozen.get_traces().total == 1  # the trace started at T0 is before the window


def test_capture_refuses_a_non_empty_output(run_dir: Path, tmp_path: Path) -> None:
    (tmp_path / "snap").mkdir()
    (tmp_path / "snap" / "mine.txt").write_text("keep me")
    with pytest.raises(fmt.SnapshotError, match="not empty"):
        _capture(run_dir, tmp_path / "snap")
    assert (tmp_path / "snap" / "mine.txt").read_text() == "keep me"


def test_machinery_matchers_cover_the_gateways_rule() -> None:
    matchers = capture.machinery_matchers()
    assert "{__name__=~`(?:prometheus|alertmanager|promhttp)_.*`}" in matchers
    assert any(m.startswith("{service=~") and "loadgen" in m and "-exporter" in m for m in matchers)
