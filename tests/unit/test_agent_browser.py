"""The heuristic agent's browser step against canned tool answers: each family's symptom leads to its root cause."""

from __future__ import annotations

from typing import Any

import pytest

from orchestrator.agents.browser import explain
from orchestrator.agents.gateway_client import ToolError

STEPS = ["open-product", "add-to-cart", "open-cart"]


class FakeCall:
    """A gateway with one failing checkout journey; `network`, `console`, `changes` and `errors` shape the rest."""

    def __init__(self, *, failing: str | None = "add-to-cart", network: list[dict[str, Any]] | None = None,
                 console: list[dict[str, Any]] | None = None, changes: list[dict[str, Any]] | None = None,
                 frontend_errors: float = 0.0, assertion: str = "the text of add-status matches /^Added/") -> None:
        self.failing, self.assertion = failing, assertion
        self.network, self.console = network or [], console or []
        self.changes, self.frontend_errors = changes or [], frontend_errors
        self.calls: list[str] = []

    def __call__(self, tool: str, **args: Any) -> Any:
        self.calls.append(tool)
        if tool == "get_cuj_report" and "journey" not in args:
            status = "failed" if self.failing else "passed"
            return {"captured": True, "journeys": [{"journey": "checkout", "status": status,
                                                    "failed_step": self.failing}]}
        if tool == "get_cuj_report":
            return {"steps": [{"name": s, "status": "passed", "assertion": None} if s != self.failing else
                              {"name": s, "status": "failed", "assertion": self.assertion, "actual": '""'}
                              for s in STEPS]}
        if tool == "get_network_requests":
            return {"items": self.network}
        if tool == "get_browser_console":
            return {"items": [c for c in self.console if c["type"] in ("error", "pageerror")]}
        if tool == "get_recent_changes":
            return {"items": self.changes}
        if tool == "get_error_rate":
            return {"services": [{"service": "frontend", "errors_per_s": self.frontend_errors}]}
        raise ToolError(tool, "not offered")


def net(n: int, step: str, url: str, status: int | None, failure: str | None = None, ms: float = 20) -> dict[str, Any]:
    return {"id": f"net:checkout:{step}:{n}", "step": step, "url": url, "status": status, "failure": failure,
            "duration_ms": ms}


RELEASE = {"id": "change:frontend:product.js:1", "kind": "release", "service": "frontend",
           "summary": "frontend release 2026.11.2: product.js updated"}
FLAG = {"id": "change:flags:cartServiceFailure:1", "kind": "flag", "service": "flags",
        "summary": "feature flag cartServiceFailure: default variant 'on'",
        "details": {"flag": "cartServiceFailure", "variant": "on"}}


def root(out: dict[str, Any] | None) -> tuple[str, str, str]:
    assert out is not None
    [ent] = [e for e in out["entities"] if e["root_cause"]]
    return ent["id"], ent["layer"], ent["fault_type"]


def test_an_error_status_the_frontend_never_answered_is_the_edge() -> None:
    call = FakeCall(network=[net(1, "add-to-cart", "/api/cart", 503)])
    out = explain(call, backend_roots=())
    assert root(out) == ("gateway", "edge", "error_response")
    assert out is not None and out["evidence"][:2] == ["cuj:checkout:add-to-cart", "net:checkout:add-to-cart:1"]
    assert call.calls.count("get_cuj_report") == 2, "the summary, then the failing journey once"
    own = explain(FakeCall(network=[net(1, "add-to-cart", "/api/cart", 503)], frontend_errors=2.0), backend_roots=())
    assert own is not None and own["entities"] == [], "the frontend's own 5xx: left to the alert walk"
    assert own["evidence"] == ["cuj:checkout:add-to-cart", "net:checkout:add-to-cart:1"]


@pytest.mark.parametrize(("call", "expected"), [
    (FakeCall(network=[net(1, "open-product", "/static/app.js", 404)]), ("gateway", "edge", "asset_missing")),
    (FakeCall(console=[{"id": "console:checkout:open-product:1", "step": "open-product", "type": "error",
                        "text": "Refused to execute script from '/static/product.js' because its MIME type ('') is "
                                "not executable"}]), ("gateway", "edge", "header_dropped")),
    (FakeCall(failing="open-cart", network=[net(1, "open-cart", "/api/cart", 200, "net::ERR_CONTENT_LENGTH_MISMATCH")]),
     ("gateway", "edge", "truncated_response")),
    (FakeCall(failing="open-cart", network=[net(1, "open-cart", "/api/cart", None,
                                                "unfinished when the journey ended", ms=0)]),
     ("gateway", "edge", "slow_response")),
    (FakeCall(failing="place-order", network=[net(1, "place-order", "/api/checkout", 504, ms=10016)]),
     ("gateway", "edge", "slow_response")),
    (FakeCall(network=[net(1, "open-product", "/static/app.js", None, "net::ERR_ABORTED")]),
     ("gateway", "edge", "asset_missing")),
    (FakeCall(failing="open-cart", assertion="the line amount is 2 x the unit price"),
     ("gateway", "edge", "response_mutation")),
])
def test_edge_fault_types_from_the_symptom(call: FakeCall, expected: tuple[str, str, str]) -> None:
    assert root(explain(call, backend_roots=())) == expected


@pytest.mark.parametrize(("call", "fault_type"), [
    (FakeCall(network=[net(1, "add-to-cart", "/api/cart", 400)], changes=[RELEASE]), "api_contract_drift"),
    (FakeCall(console=[{"id": "console:checkout:open-product:1", "step": "open-product", "type": "pageerror",
                        "text": "ReferenceError: trackImpression is not defined"}], changes=[RELEASE]),
     "js_runtime_error"),
    (FakeCall(failing="open-cart", assertion="the cart total equals the sum of the line amounts",
              changes=[RELEASE]), "wrong_computation"),
    (FakeCall(assertion="every product-price matches /EUR/", changes=[RELEASE]), "storage_inconsistency"),
    (FakeCall(changes=[RELEASE]), "listener_missing"),
])
def test_a_frontend_release_is_blamed_with_the_symptoms_type(call: FakeCall, fault_type: str) -> None:
    out = explain(call, backend_roots=())
    assert root(out) == ("frontend", "frontend", fault_type)
    assert out is not None and "change:frontend:product.js:1" in out["evidence"]


def test_a_flag_switch_names_its_service() -> None:
    out = explain(FakeCall(network=[net(1, "add-to-cart", "/api/cart", 500)], changes=[RELEASE, FLAG]),
                  backend_roots=())
    assert root(out) == ("cart", "application", "error_response")
    assert out is not None and "change:flags:cartServiceFailure:1" in out["evidence"]


def test_backend_roots_keep_the_alert_walk_and_add_the_browser_evidence() -> None:
    out = explain(FakeCall(network=[net(1, "add-to-cart", "/api/cart", 500)], changes=[FLAG]),
                  backend_roots=["recommendation-1"])
    assert out is not None and out["entities"] == [], "one failing journey: the alert walk's root explains it"
    assert out["evidence"] == ["cuj:checkout:add-to-cart", "net:checkout:add-to-cart:1",
                               "change:flags:cartServiceFailure:1"]


def test_nothing_failed_or_nothing_captured_says_nothing() -> None:
    assert explain(FakeCall(failing=None), backend_roots=()) is None

    def no_browser(tool: str, **args: Any) -> Any:
        raise ToolError(tool, "not offered")

    assert explain(no_browser, backend_roots=()) is None


class TwoJourneys:
    """A gateway whose capture has two failing journeys (a two-cause scenario): name -> (step, assertion, network)."""

    def __init__(self, journeys: dict[str, tuple[str, str, list[dict[str, Any]]]], changes: list[dict[str, Any]],
                 frontend_errors: float = 0.0) -> None:
        self.journeys, self.changes, self.frontend_errors = journeys, changes, frontend_errors

    def __call__(self, tool: str, **args: Any) -> Any:
        if tool == "get_cuj_report" and "journey" not in args:
            return {"journeys": [{"journey": j, "status": "failed", "failed_step": s}
                                 for j, (s, _, _) in self.journeys.items()]}
        if tool == "get_cuj_report":
            step, assertion, _ = self.journeys[args["journey"]]
            return {"steps": [{"name": step, "status": "failed", "assertion": assertion}]}
        if tool == "get_network_requests":
            return {"items": self.journeys[args["journey"]][2]}
        if tool == "get_browser_console":
            return {"items": []}
        if tool == "get_recent_changes":
            return {"items": self.changes}
        if tool == "get_error_rate":
            return {"services": [{"service": "frontend", "errors_per_s": self.frontend_errors}]}
        raise ToolError(tool, "not offered")


RECS = ("open-product", "at least 1 element matches [data-testid=recommendations] [data-testid=recommendation]", [])
UNREACHABLE = {"id": "change:flags:paymentServiceUnreachable:1", "kind": "flag", "service": "flags",
               "summary": "feature flag paymentServiceUnreachable: 'on'",
               "details": {"flag": "paymentServiceUnreachable", "variant": "on"}}


def roots(out: dict[str, Any] | None) -> set[tuple[str, str, str]]:
    assert out is not None
    return {(e["id"], e["layer"], e["fault_type"]) for e in out["entities"] if e["root_cause"]}


def test_two_causes_a_backend_root_explains_only_the_journey_that_names_it() -> None:
    call = TwoJourneys({"recommendations": RECS,
                        "checkout": ("place-order", "the order confirmation is visible",
                                     [net(1, "place-order", "/api/checkout", 400)])}, [RELEASE])
    out = explain(call, backend_roots=["recommendation-1"])
    assert roots(out) == {("frontend", "frontend", "api_contract_drift")}
    assert out is not None and {"cuj:recommendations:open-product", "cuj:checkout:place-order"} <= set(out["evidence"])


def test_two_causes_with_no_backend_root_each_journey_gets_its_own() -> None:
    call = TwoJourneys({"checkout": ("place-order", "the order confirmation is visible",
                                     [net(1, "place-order", "/api/checkout", 502)]),
                        "currency": ("select-eur", "every product-price matches /EUR/", [])},
                       [UNREACHABLE, RELEASE])
    assert roots(explain(call)) == {("checkout", "configuration", "wrong_endpoint"),
                                    ("frontend", "frontend", "storage_inconsistency")}, \
        "the flag fails requests, so it is not the cause of a journey whose requests all succeeded"


def test_two_causes_an_unnamed_symptom_with_every_request_fine_is_the_edge() -> None:
    call = TwoJourneys({"checkout": ("add-to-cart", "the text of add-status matches /^Added/",
                                     [net(1, "add-to-cart", "/api/cart", 503)]),
                        "recommendations": RECS}, [], frontend_errors=1.5)
    out = explain(call, backend_roots=["redis-1"])
    assert roots(out) == {("gateway", "edge", "response_mutation")}, "the cart's 503s stay the alert walk's (redis)"
