"""alerts.json holds what Prometheus's `ALERTS` series says was firing at the frozen now: an alert that began after
the handover read Alertmanager and resolved before the capture read it again is in neither read, only in the TSDB;
one the handover read that resolved before the frozen now is in the handover's read, not in what the live agent got.
Checked against recorded Prometheus answers (a fake HTTP server) and, on the committed sample corpus, against a
frozen Prometheus on each snapshot's own TSDB."""

from __future__ import annotations

import json
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from gateway_fixtures import NOW, FakeObservability, fake_control, make_run_dir

from orchestrator import paths
from orchestrator.gateway.evidence import LiveEvidence
from orchestrator.gateway.httpjson import get_json
from orchestrator.snapshots import capture
from orchestrator.snapshots import format as fmt
from orchestrator.snapshots.frozen_prometheus import FrozenPrometheus

RUN = "r1"
LATE = {"__name__": "ALERTS", "alertname": "ServiceLatencyHigh", "alertstate": "firing", "service": "recommendation",
        "severity": "warning", "signal": "latency"}
"""Fired 4 s before the frozen now, after the handover's read; resolved before the capture: only the TSDB has it."""
KNOWN = {"__name__": "ALERTS", "alertname": "ServiceErrorRateHigh", "alertstate": "firing", "service": "checkout",
         "severity": "critical"}
"""Also listed by Alertmanager (gateway_fixtures.ALERTS, fingerprint f1): Alertmanager's item wins."""
PAYMENT = {"__name__": "ALERTS", "alertname": "ServiceErrorRateHigh", "alertstate": "firing", "service": "payment",
           "severity": "critical"}
"""Read by the handover, resolved before the capture (Alertmanager no longer lists it), firing at the frozen now."""
RULES = {"status": "success", "data": {"groups": [{"name": "golden", "interval": 2, "rules": [
    {"type": "alerting", "name": "ServiceLatencyHigh", "labels": {"severity": "warning", "signal": "latency"},
     "query": "histogram_quantile(0.95, sum by (service, le) (rate(latency_bucket[20s]))) > 1",
     "annotations": {"summary": "{{ $labels.service }} p95 latency is {{ $value | humanizeDuration }}",
                     "runbook": "{{ $labels.service | title }}"}},
    {"type": "alerting", "name": "ServiceErrorRateHigh", "labels": {"severity": "critical"},
     "query": "errors > 0.05", "annotations": {"summary": "{{ $labels.service }} fails"}}]}]}}
CONFIG = {"status": "success", "data": {"yaml": f"global:\n  external_labels:\n    opsbench_run: {RUN}\n"}}


def _vector(samples: list[tuple[dict[str, str], float, str]]) -> dict[str, Any]:
    return {"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": m, "value": [t, v]} for m, t, v in samples]}}


def prometheus_answer(path: str, query: dict[str, str], external: bool = True) -> tuple[int, Any] | None:
    """Recorded answers of a Prometheus with LATE and KNOWN firing at NOW (evaluation every 2 s). LATE fired
    before too, until 60 s earlier: that streak is over and must not set its startsAt."""
    if path == "/api/v1/rules":
        return 200, RULES
    if path == "/api/v1/status/config":
        return 200, CONFIG if external else {"status": "success", "data": {"yaml": "global: {}\n"}}
    if path != "/api/v1/query":
        return None
    promql, at = query.get("query", ""), float(query.get("time", NOW))
    if promql == 'ALERTS{alertstate="firing"}':
        return 200, _vector([(LATE, NOW - 1, "1"), (KNOWN, NOW - 1, "1"), (PAYMENT, NOW - 1, "1"),
                             ({"service": "svc00"}, NOW - 1, "1")])
    if promql.startswith('ALERTS{alertstate="firing"}['):
        earlier = [NOW - 100 + 2 * i for i in range(10)]  # 100 s to 82 s before NOW, then resolved
        late = [*earlier, NOW - 5, NOW - 3, NOW - 1]
        return 200, {"status": "success", "data": {"resultType": "matrix", "result": [
            {"metric": LATE, "values": [[t, "1"] for t in late]},
            {"metric": KNOWN, "values": [[NOW - 31 + 2 * i, "1"] for i in range(16)]},
            {"metric": PAYMENT, "values": [[NOW - 101 + 2 * i, "1"] for i in range(51)]},
            {"metric": {"service": "svc00"}, "values": [[NOW - 1, "1"]]}]}}
    if promql.startswith("histogram_quantile"):
        # The rule's value at the evaluation Prometheus sent the alert (its streak's first, NOW - 5).
        return 200, _vector([({"service": "recommendation"}, at, "2.396" if at == NOW - 5 else "9")])
    return None


class AlertsObservability(FakeObservability):
    """The gateway tests' fake Alertmanager + Prometheus, also answering as a Prometheus whose TSDB holds ALERTS
    (without external labels: the fake Alertmanager's alerts carry none)."""

    def answer(self, path: str, query: dict[str, str]) -> tuple[int, Any]:
        return prometheus_answer(path, query, external=False) or super().answer(path, query)


@pytest.fixture(scope="module")
def obs() -> Iterator[AlertsObservability]:
    fake = AlertsObservability()
    yield fake
    fake.close()


def test_humanize_functions_render_as_prometheus() -> None:
    assert capture.humanize_duration(2.396) == "2.396s"
    assert capture.humanize_duration(10) == "10s"
    assert capture.humanize_duration(125) == "2m 5s"
    assert capture.humanize_duration(0.25) == "250ms"
    assert capture.humanize_duration(0) == "0s"
    assert capture.TEMPLATE_FUNCTIONS["humanizePercentage"](0.1299) == "12.99%"
    assert capture.humanize_1024(250e6) == "238.4Mi"
    assert capture.humanize(12345) == "12.35k"
    assert capture.go_g4(12345) == "1.234e+04"


def test_render_annotation_supports_the_rules_subset_only() -> None:
    labels = {"service": "cart", "instance_id": "cart-1"}
    assert capture.render_annotation("{{ $labels.instance_id }} of {{ $labels.service }} is down", labels, None) \
        == "cart-1 of cart is down"
    assert capture.render_annotation("{{ $value | humanizePercentage }} fail", labels, 0.5) == "50% fail"
    assert capture.render_annotation("{{ $value }} fail", labels, None) is None  # no value: no guessed text
    assert capture.render_annotation("{{ $labels.service | title }}", labels, 1.0) is None


def test_rfc3339_ms_is_alertmanagers_startsat() -> None:
    assert capture.rfc3339_ms(1795599114.983) == "2026-11-25T09:31:54.983Z"
    assert capture.rfc3339_ms(NOW) == "2023-11-14T22:15:00Z"
    assert capture.rfc3339_ms(NOW + 0.5) == "2023-11-14T22:15:00.5Z"


def test_firing_in_tsdb_gives_get_alerts_items(obs: AlertsObservability) -> None:
    def get(path: str, params: dict[str, str]) -> Any:
        return CONFIG if path == "/api/v1/status/config" else get_json(obs.url, path, params, what="Prometheus")

    alerts = capture.firing_in_tsdb(get, NOW)
    assert alerts is not None
    late = next(a for a in alerts if a["alertname"] == "ServiceLatencyHigh")
    labels = {"opsbench_run": RUN, "alertname": "ServiceLatencyHigh", "service": "recommendation",
              "severity": "warning", "signal": "latency"}
    # The current streak began 5 s before NOW (the earlier one ended 82 s before: a gap); external labels added;
    # the summary rendered with the value at that evaluation; an annotation beyond the subset left out.
    assert late == {"alertname": "ServiceLatencyHigh", "labels": labels, "state": "active",
                    "annotations": {"summary": "recommendation p95 latency is 2.396s"},
                    "startsAt": capture.rfc3339_ms(NOW - 5), "fingerprint": capture.fingerprint(labels)}
    assert alerts is not None
    assert [a["labels"]["service"] for a in alerts] == ["recommendation", "checkout", "payment"]  # svc00: no alert
    known = alerts[1]
    assert known["startsAt"] == capture.rfc3339_ms(NOW - 31)
    assert known["annotations"] == {"summary": "checkout fails"}


def test_membership_is_the_tsdbs_details_alertmanagers() -> None:
    first = {"alertname": "A", "labels": {"alertname": "A"}, "annotations": {"summary": "handover"},
             "startsAt": "2023-11-14T22:14:00Z", "state": "active", "fingerprint": "x"}
    again = {**first, "annotations": {"summary": "tsdb"}}
    other = {**first, "alertname": "B", "labels": {"alertname": "B"}, "startsAt": "2023-11-14T22:13:00Z"}
    gone = {**first, "alertname": "C", "labels": {"alertname": "C"}}
    assert capture.merge_alerts([first], [again, other]) == [other, first]
    # The TSDB says A and B fired at the frozen now: C (read by the handover, resolved since) is left out, A is
    # Alertmanager's item, B the TSDB's.
    assert capture.alerts_at_frozen_now([first, gone], [again, other]) == [other, first]
    assert capture.alerts_at_frozen_now([first, gone], []) == []
    assert capture.alerts_at_frozen_now([gone, first], None) == [first, gone]  # no record: Alertmanager's


def test_capture_adds_an_alert_only_the_tsdb_has(tmp_path: Path, obs: AlertsObservability) -> None:
    run_dir = make_run_dir(tmp_path, obs.url)
    (run_dir / "agent").mkdir()
    handover = [{"labels": {"alertname": "ServiceErrorRateHigh", "service": "payment", "severity": "critical"},
                 "annotations": {"summary": "payment answers 97% of requests with 5xx"},
                 "startsAt": "2023-11-14T22:13:20Z"}]
    (run_dir / "agent" / "manifest.json").write_text(json.dumps({
        "manifest_version": 1, "tasks": [{"id": "diagnose", "kind": "diagnose", "goal": "g"}], "alerts": handover,
        "observability": {"metrics": True, "logs": True, "traces": True}}))
    capture.capture(run_dir, tmp_path / "snap", scenario_id="shop-cart-down", spec_version=1, raw_tsdb=None,
                    frozen_now=NOW, control=fake_control())
    alerts = json.loads((tmp_path / "snap" / fmt.ALERTS).read_text())
    by_service = {a["labels"]["service"]: a for a in alerts}
    # frontend: Alertmanager lists it, the TSDB says it was not firing at the frozen now (resolved just before).
    assert sorted(by_service) == ["checkout", "payment", "recommendation"]
    # Alertmanager's item for checkout (fingerprint f1, its annotations), not a second one from the TSDB.
    assert by_service["checkout"]["fingerprint"] == "f1"
    assert by_service["checkout"]["annotations"] == {"summary": "checkout answers 40% of requests with 5xx"}
    assert by_service["payment"]["annotations"] == handover[0]["annotations"]
    assert by_service["recommendation"]["startsAt"] == capture.rfc3339_ms(NOW - 5)
    assert alerts == sorted(alerts, key=lambda a: (a["startsAt"], a["alertname"], a["fingerprint"]))
    # Written in the live item's key order, labels sorted as Alertmanager's JSON has them: the replay's answer is
    # the live answer byte for byte, not only equal.
    assert all(tuple(a) == capture.ITEM_KEYS and list(a["labels"]) == sorted(a["labels"]) for a in alerts)
    live = LiveEvidence({"endpoints": {"alertmanager": obs.url}})
    live_checkout = next(a for a in live.alerts() if a["labels"]["service"] == "checkout")
    assert json.dumps(by_service["checkout"]) == json.dumps(live_checkout)


@pytest.mark.parametrize("archive", sorted((paths.PROJECT_ROOT / "tests" / "data" / "snapshots").glob("*.tar.gz")),
                         ids=lambda p: p.name.split("-2026")[0])
def test_tsdb_alerts_match_alertmanager_on_the_sample_corpus(archive: Path, tmp_path: Path) -> None:
    """On every committed live recording, ALERTS at the frozen now gives exactly the alerts Alertmanager listed:
    the same label sets, startsAt and fingerprints (a frozen Prometheus has no rules: no annotations)."""
    with tarfile.open(archive) as tar:
        tar.extractall(tmp_path, filter="data")
    snap = next(p for p in tmp_path.iterdir() if p.is_dir())
    info = fmt.verify(snap, check_scenario=False)
    recorded = json.loads((snap / fmt.ALERTS).read_text())
    run = recorded[0]["labels"]["opsbench_run"]
    with FrozenPrometheus(info.tsdb_dir, tmp_path / "prom") as prom:
        def get(path: str, params: dict[str, str]) -> Any:
            if path == "/api/v1/status/config":  # the live Prometheus's external labels
                return {"status": "success", "data": {"yaml": f"global:\n  external_labels: {{opsbench_run: {run}}}"}}
            return get_json(prom.url, path, params, what="Prometheus")

        found = capture.alerts_at_frozen_now([], capture.firing_in_tsdb(get, info.frozen_now))
    assert [(a["labels"], a["startsAt"], a["fingerprint"]) for a in found] == \
        [(a["labels"], a["startsAt"], a["fingerprint"]) for a in recorded]
