"""The browser, changes and error-rate tools: a browser capture and a change journal in a run, served live and from a
frozen snapshot; empty answers where nothing was captured; the run's visible window; MCP image content."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from cuj_fixtures import BASE, PNG, write_capture
from gateway_fixtures import NOW, Clock, FakeObservability, make_gateway, make_run_dir
from gateway_fixtures import ok_result as ok
from gateway_fixtures import refusal as refused

from orchestrator.gateway import Gateway
from orchestrator.gateway.evidence.frozen import FrozenEvidence
from orchestrator.gateway.mcp_server import image_of

CHANGES = [
    {"id": "change:cart:deploy:1699999000000", "time": 1_699_999_000.0, "service": "cart", "kind": "deploy",
     "summary": "cart deployed", "source": "deploy pipeline", "details": {}},
    {"id": "change:frontend:product.js:1700000050000", "time": 1_700_000_050.0, "service": "frontend",
     "kind": "release", "summary": "frontend release 2026.11.2: product.js updated", "source": "release pipeline",
     "details": {"asset": "product.js"}},
    {"id": "change:flags:cartServiceFailure:1700000090000", "time": 1_700_000_090.0, "service": "flags",
     "kind": "flag", "summary": "feature flag cartServiceFailure: default variant 'on'", "source": "console",
     "details": {}},
    {"id": "change:frontend:app.js:1700000500000", "time": 1_700_000_500.0, "service": "frontend", "kind": "release",
     "summary": "a change after the run's now", "source": "release pipeline", "details": {}},
]


@pytest.fixture(scope="module")
def obs() -> Iterator[FakeObservability]:
    fake = FakeObservability()
    yield fake
    fake.close()


def browser_run(tmp_path: Path, obs: FakeObservability, *, capture: bool = True) -> Path:
    run_dir = make_run_dir(tmp_path, obs.url)
    env = json.loads((run_dir / "environment.json").read_text())
    env["browser"] = {"base_url": BASE}
    env["changes"] = str(run_dir / "env" / "changes.jsonl")
    (run_dir / "environment.json").write_text(json.dumps(env))
    (run_dir / "env" / "changes.jsonl").write_text("".join(json.dumps(c) + "\n" for c in CHANGES) + "{torn line\n")
    if capture:
        write_capture(run_dir / "browser" / "1700000080000-user-symptom", NOW - 20)
    return run_dir


@pytest.fixture
def gw(tmp_path: Path, obs: FakeObservability) -> Gateway:
    return make_gateway(browser_run(tmp_path, obs))


def test_browser_and_changes_tools_are_offered_only_where_the_environment_has_them(tmp_path: Path,
                                                                                   obs: FakeObservability) -> None:
    names = {t.name for t in make_gateway(browser_run(tmp_path / "a", obs)).tools}
    assert {"get_cuj_report", "view_screenshot", "get_browser_console", "get_network_requests", "get_dom_snapshot",
            "get_browser_storage", "get_frontend_spans", "get_recent_changes", "get_error_rate"} <= names
    plain = {t.name for t in make_gateway(make_run_dir(tmp_path / "b", obs.url)).tools}
    assert "get_cuj_report" not in plain and "get_recent_changes" not in plain and "get_error_rate" in plain
    assert "not available" in refused(make_gateway(make_run_dir(tmp_path / "c", obs.url)), "get_cuj_report", {},
                                      "denied")


def test_cuj_report_summarises_and_details_a_journey(gw: Gateway) -> None:
    summary = ok(gw, "get_cuj_report")
    assert summary["captured"] is True
    assert summary["journeys"] == [{"journey": "checkout", "status": "failed", "failed_step": "add-to-cart",
                                    "message": "step 2 'add-to-cart' failed", "duration_s": 1.5,
                                    "evidence_id": "cuj:checkout:add-to-cart"}]
    detail = ok(gw, "get_cuj_report", journey="checkout")
    step = detail["steps"][1]
    assert step["status"] == "failed" and step["assertion"].startswith("the text of add-status")
    assert step["url"] == "/product/OLJCESPC7Z", "the run's address is left out"
    assert step["screenshot_id"] == "screenshot:checkout:add-to-cart" and step["dom_id"] == "dom:checkout:add-to-cart"
    assert detail["steps"][2]["screenshot_id"] is None
    assert "its journeys: checkout" in refused(gw, "get_cuj_report", {"journey": "login"}, "not_found")


def test_screenshot_is_the_png_and_a_missing_step_names_the_known_ones(gw: Gateway) -> None:
    shot = ok(gw, "view_screenshot", journey="checkout", step="add-to-cart")
    assert shot["mime_type"] == "image/png" and base64.b64decode(shot["data"]) == PNG
    assert shot["evidence_id"] == "screenshot:checkout:add-to-cart" and shot["bytes"] == len(PNG)
    message = refused(gw, "view_screenshot", {"journey": "checkout", "step": "pay"}, "not_found")
    assert "open-product, add-to-cart, open-cart" in message
    assert "skipped" in refused(gw, "view_screenshot", {"journey": "checkout", "step": "open-cart"}, "not_found")
    body = gw.call("view_screenshot", {"journey": "checkout", "step": "add-to-cart"}).body()
    image = image_of(body)
    assert image is not None and image.mime_type == "image/png" and base64.b64decode(image.data) == PNG
    assert "data" not in body["result"], "MCP sends the picture once, as image content"
    assert image_of(gw.call("get_cuj_report", {}).body()) is None


def test_console_network_storage_spans_filter_and_page(gw: Gateway) -> None:
    errors = ok(gw, "get_browser_console", level="error")
    assert [e["id"] for e in errors["items"]] == ["console:checkout:add-to-cart:1"]
    assert errors["items"][0]["location"]["url"] == "/api/cart"
    assert ok(gw, "get_browser_console")["total"] == 2
    failed = ok(gw, "get_network_requests", failed_only=True)
    assert [e["id"] for e in failed["items"]] == ["net:checkout:add-to-cart:1", "net:checkout:add-to-cart:2"]
    assert ok(gw, "get_network_requests", path_contains="/api/")["total"] == 1
    first = gw.call("get_network_requests", {"journey": "checkout", "limit": 2})
    assert first.ok and first.next_page and len(first.result["items"]) == 2
    rest = ok(gw, "get_network_requests", journey="checkout", limit=2, page=first.next_page)
    assert [e["id"] for e in rest["items"]] == ["net:checkout:add-to-cart:2"]
    assert ok(gw, "get_browser_storage", journey="checkout", step="add-to-cart")["items"][0]["name"] == "shop_session"
    spans = ok(gw, "get_frontend_spans", errors_only=True)["items"]
    assert [s["traceId"] for s in spans] == ["c" * 32] and spans[0]["attributes"]["http.url"] == "/api/cart"
    assert "needs `journey`" in refused(gw, "get_browser_console", {"step": "add-to-cart"}, "invalid")
    assert "no step 'pay'" in refused(gw, "get_browser_console", {"journey": "checkout", "step": "pay"}, "not_found")


def test_dom_snapshot_in_chunks_and_snippets(gw: Gateway) -> None:
    whole = ok(gw, "get_dom_snapshot", journey="checkout", step="add-to-cart", max_chars=100)
    assert whole["evidence_id"] == "dom:checkout:add-to-cart" and len(whole["html"]) == 100
    assert whole["next_offset"] == 100 and whole["total_chars"] > 500
    tail = ok(gw, "get_dom_snapshot", journey="checkout", step="add-to-cart", offset=whole["total_chars"] - 10)
    assert tail["next_offset"] is None and tail["html"].endswith("</html>")
    found = ok(gw, "get_dom_snapshot", journey="checkout", step="add-to-cart", contains="could not ADD")
    assert len(found["matches"]) == 1 and "Service Unavailable" in found["matches"][0]["html"]


def test_nothing_captured_answers_empty_not_an_error(tmp_path: Path, obs: FakeObservability) -> None:
    gw = make_gateway(browser_run(tmp_path, obs, capture=False))
    report = ok(gw, "get_cuj_report")
    assert report["captured"] is False and report["journeys"] == [] and "no critical user journey" in report["note"]
    for tool in ("get_browser_console", "get_network_requests", "get_browser_storage", "get_frontend_spans"):
        assert ok(gw, tool) | {"note": ""} == {"captured": False, "note": "", "items": [], "total": 0, "offset": 0,
                                               "returned": 0}
    assert "no critical user journey" in refused(gw, "view_screenshot", {"journey": "checkout", "step": "x"},
                                                 "not_found")


def test_a_capture_before_the_visible_window_is_another_trials(tmp_path: Path, obs: FakeObservability) -> None:
    run_dir = browser_run(tmp_path, obs)  # its capture started at NOW - 20
    write_capture(run_dir / "browser" / "1699999000000-user-symptom", NOW - 1000, failed_step="open-cart")
    assert ok(make_gateway(run_dir), "get_cuj_report")["journeys"][0]["failed_step"] == "add-to-cart", "the latest"
    assert ok(make_gateway(run_dir, visible_since=NOW - 10), "get_cuj_report")["captured"] is False
    (run_dir / "browser" / "1700000099000-partial").mkdir()  # being written: no cuj.json yet
    assert ok(make_gateway(run_dir), "get_cuj_report")["captured"] is True


def test_recent_changes_newest_first_within_the_window(gw: Gateway, tmp_path: Path, obs: FakeObservability) -> None:
    changes = ok(gw, "get_recent_changes")
    assert [c["id"] for c in changes["items"]] == [
        "change:flags:cartServiceFailure:1700000090000", "change:frontend:product.js:1700000050000",
        "change:cart:deploy:1699999000000"], "newest first, nothing after now, the torn line skipped"
    assert [c["service"] for c in ok(gw, "get_recent_changes", service="frontend")["items"]] == ["frontend"]
    assert ok(gw, "get_recent_changes", since="30s")["total"] == 1
    windowed = make_gateway(browser_run(tmp_path / "w", obs), visible_since=NOW - 60)
    assert ok(windowed, "get_recent_changes")["total"] == 2, "an earlier trial's changes stay hidden"
    refused(gw, "get_recent_changes", {"service": "loadgen"}, "denied")


def test_error_rate_per_visible_service(gw: Gateway, obs: FakeObservability) -> None:
    rates = ok(gw, "get_error_rate", window="30s")
    rows = {r["service"]: r for r in rates["services"]}
    assert set(rows) == {"frontend", "cart", "checkout"}, "machinery (loadgen) left out"
    assert rows["cart"]["error_ratio"] == 1.0 and rows["frontend"]["error_ratio"] == 0.25
    assert rows["checkout"] == {"service": "checkout", "evidence_id": "errors:checkout", "requests_per_s": 0.5,
                                "client_errors_per_s": 0.25, "errors_per_s": 0.0, "error_ratio": 0.0}
    assert [r["service"] for r in rates["services"]] == ["cart", "frontend", "checkout"], "worst first"
    assert rates["window"] == "30s" and any("[30s]" in q.get("query", "") for _, q in obs.requests)
    assert [r["service"] for r in ok(gw, "get_error_rate", service="cart")["services"]] == ["cart"]
    refused(gw, "get_error_rate", {"service": "nope"}, "not_found")


def test_frozen_source_serves_the_snapshots_capture_and_changes(tmp_path: Path, obs: FakeObservability) -> None:
    snap = tmp_path / "snap"
    write_capture(snap / "browser", NOW - 20)
    (snap / "changes.json").write_text(json.dumps(CHANGES[:3]))
    frozen = FrozenEvidence("s1", snap, NOW, ("changes", "browser"))
    assert frozen.browser_capture(since=NOW + 100) == snap / "browser", "a replay serves what was recorded"
    assert [c["id"] for c in frozen.changes()] == [c["id"] for c in CHANGES[:3]]
    assert not frozen.offers(type("T", (), {"name": "x", "family": "metrics", "acts": False})())
    empty = FrozenEvidence("s2", tmp_path / "other", NOW, ("browser",))
    assert empty.browser_capture() is None
    gw = make_gateway(browser_run(tmp_path / "live", obs), Clock())
    gw.ctx.evidence = frozen
    assert ok(gw, "get_cuj_report")["journeys"][0]["failed_step"] == "add-to-cart"
    assert ok(gw, "get_recent_changes")["total"] == 3


def test_a_replay_copies_the_browser_capture_and_the_change_journal(tmp_path: Path) -> None:
    from orchestrator.snapshots import format as fmt
    from orchestrator.snapshots.frozen_env import copy_served

    snap = tmp_path / "snap"
    write_capture(snap / fmt.BROWSER_DIR, NOW - 20)
    (snap / fmt.CHANGES).write_text(json.dumps(CHANGES[:3]))
    (snap / fmt.MANIFEST).write_text("{}")
    info = fmt.write_index(snap, scenario_id="shop-cuj-x", spec_version=1, frozen_now=NOW, window_start=NOW - 60,
                           families=["changes", "browser"])
    copy_served(info, tmp_path / "copy")
    served = FrozenEvidence("s1", tmp_path / "copy", NOW, info.families)
    assert served.browser_capture() == tmp_path / "copy" / fmt.BROWSER_DIR
    assert (tmp_path / "copy" / fmt.BROWSER_DIR / "checkout" / "step-02-add-to-cart.png").read_bytes() == PNG
    assert len(served.changes()) == 3


def test_the_trajectory_schema_knows_every_tool_family() -> None:
    """The trajectory record's `family` enum is the tools' Family: a new family must not make its calls bad lines."""
    from typing import get_args

    from orchestrator.gateway.tools.base import Family
    from orchestrator.schemacheck import load_schema

    assert set(load_schema("trajectory_record")["properties"]["family"]["enum"]) == set(get_args(Family))


def test_browser_calls_are_valid_trajectory_records(gw: Gateway) -> None:
    from gateway_fixtures import trajectory

    ok(gw, "get_cuj_report")
    ok(gw, "get_recent_changes")
    assert [r["family"] for r in trajectory(gw.ctx.run_dir)] == ["browser", "changes"]
