"""CUJ scenarios end to end in a real browser: recorded live, then replayed (issue 20).

`opsbench snapshot record --check` over two CUJ scenarios on one shop: for each, the journeys run in Debian's
Chromium at baseline (they pass) and at manifestation (the outcome contract holds), the heuristic baseline agent
diagnoses the incident live through the gateway's browser tools, the snapshot keeps the browser capture and the
change journal, and the same agent replaying the snapshot reaches the same diagnosis and the same scores. Then the
recovery checks run the journeys again (they pass) and nothing is left behind.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .conftest import assert_no_leftovers, run_json

pytestmark = pytest.mark.e2e
EXPECTED = {
    "shop-cuj-edge-cart-api-503": ("gateway", "edge", "error_response"),
    "shop-cuj-release-cart-contract-drift": ("frontend", "frontend", "api_contract_drift"),
}


def test_cuj_scenarios_record_diagnose_and_replay_alike(home: Path) -> None:
    rc, result = run_json(home, "snapshot", "record", "--check", *EXPECTED, timeout=1200)
    assert rc == 0 and result["ok"], result
    assert {r["scenario"] for r in result["recordings"]} == set(EXPECTED)
    for check in result["checks"]:
        assert check["differences"] == [], check
        diagnosis, scores = check["live"]["diagnosis"], check["live"]["scores"]["diagnosis"]
        root, layer, fault_type = EXPECTED[check["scenario"]]
        assert diagnosis["root_causes"] == [root], check
        assert scores["a_at_1"] == 1.0 and scores["layer_match"] == 1.0, (layer, fault_type, scores)
        assert scores["evidence_recall"] and scores["evidence_recall"] > 0, "the agent cited browser evidence"
    for rec in result["recordings"]:
        snapshot = Path(rec["path"])
        index = json.loads((snapshot / "snapshot.json").read_text())
        assert {"browser", "changes"} <= set(index["families"])
        capture = json.loads((snapshot / "browser" / "cuj.json").read_text())
        [checkout] = [j for j in capture["journeys"] if j["name"] == "checkout"]
        assert checkout["status"] == "failed" and checkout["failed_step"] == "add-to-cart", checkout
        assert (snapshot / "browser" / "checkout" / "step-02-add-to-cart.png").read_bytes()[:4] == b"\x89PNG"
        assert any(f.startswith("browser/checkout/") for f in index["files"]), "the capture is checksummed"
    release = json.loads((Path(next(r["path"] for r in result["recordings"]
                                    if r["scenario"] == "shop-cuj-release-cart-contract-drift"))
                          / "changes.json").read_text())
    assert any(c["kind"] == "release" and c["details"].get("asset") == "product.js" for c in release)
    for host in {r["host"] for r in result["recordings"]}:
        assert_no_leftovers(home / "runs" / host)
