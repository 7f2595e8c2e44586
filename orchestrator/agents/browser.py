"""The heuristic agent's browser step: what the critical user journeys saw, joined with changes and error rates.

Used by ``orchestrator.agents.heuristic`` when the run has browser tools. Where a journey failed:

1. the backend's alerts explain it when some service other than the edge alerts (a compound fault: the alert walk
   already found the root, the browser evidence is cited beside it);
2. otherwise a feature-flag switch in the change journal names its service (a backend flag fault);
3. otherwise a frontend release names the frontend; the symptom gives the fault type: a 4xx from the API (a
   contract drift), an uncaught page error (a runtime error), a failed assertion on amounts (a wrong computation),
   on the currency (a storage inconsistency), or nothing at all (a listener that no longer fires);
4. otherwise the edge: the browser saw what the frontend did not answer: a missing asset (404 on /static), a script
   refused for its type (a dropped header), a cut body (truncation), a slow request, an error status the frontend's
   own error rate does not show, or wrong content with every request fine (a mutation).

With several failing journeys (two causes) each is explained on its own: a backend root explains a journey whose
symptom names it, a flag only a journey whose requests failed, and the roots found are added to the alert walk's.

Every conclusion cites the evidence ids it read (``cuj:``, ``net:``, ``console:``, ``dom:``, ``change:``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from orchestrator.agents.gateway_client import Call, ToolError

FLAG_ROOTS: dict[str, tuple[str, str, str]] = {
    "cartServiceFailure": ("cart", "application", "error_response"),
    "paymentServiceFailure": ("payment", "application", "error_response"),
    "productCatalogFailure": ("catalog", "application", "error_response"),
    "paymentServiceUnreachable": ("checkout", "configuration", "wrong_endpoint"),
    "adServiceFailure": ("ads", "application", "error_response"),
    "catalogSlowResponse": ("catalog", "application", "slow_response"),
}
SLOW_MS = 5000


def _items(call: Call, tool: str, **args: Any) -> list[dict[str, Any]]:
    try:
        result = call(tool, limit=200, **args)
    except ToolError:
        return []
    return [i for i in (result or {}).get("items", []) if isinstance(i, dict)]


Failed = tuple[str, str, dict[str, Any], list[str]]
"""A journey that did not pass: (journey, failing step, that step's record, the journey's step names)."""


def failed_journeys(call: Call) -> list[Failed]:
    """Every journey that did not pass, in the report's order; empty when all passed or nothing was captured."""
    try:
        report = call("get_cuj_report")
    except ToolError:
        return []
    found: list[Failed] = []
    for entry in (report or {}).get("journeys", []):
        if entry.get("status") != "passed" and entry.get("failed_step"):
            detail = call("get_cuj_report", journey=entry["journey"])
            steps = detail.get("steps", [])
            step: dict[str, Any] = next((s for s in steps if s.get("name") == entry["failed_step"]), {})
            found.append((str(entry["journey"]), str(entry["failed_step"]), step, [str(s.get("name")) for s in steps]))
    return found


def _upto(entries: list[dict[str, Any]], steps: list[str], step: str) -> list[dict[str, Any]]:
    if step not in steps:
        return entries
    kept = set(steps[:steps.index(step) + 1])
    return [e for e in entries if e.get("step") in kept]


def _changes(call: Call) -> list[dict[str, Any]]:
    return [c for c in _items(call, "get_recent_changes") if c.get("kind") in ("release", "flag")]


def _frontend_errors(call: Call) -> float:
    try:
        rows = call("get_error_rate", service="frontend", window="1m").get("services", [])
    except (ToolError, AttributeError):
        return 0.0
    return float(rows[0].get("errors_per_s") or 0.0) if rows else 0.0


def explain(call: Call, backend_roots: Sequence[str] = ()) -> dict[str, Any] | None:
    """The browser's diagnosis (root entities it found, evidence, explanation) when journeys failed; None when every
    journey passed or none was captured. `backend_roots`: the roots the alert walk found in the backend (not the
    edge). With one failing journey those roots explain it; with several (two causes), a journey is theirs only
    when its symptom names one of them (a request, an assertion, a console line), and the others are explained from
    the browser's evidence, each on its own."""
    found = failed_journeys(call)
    if not found:
        return None
    changes = _changes(call)
    roots: list[dict[str, Any]] = []
    evidence: list[str] = []
    said: list[str] = []
    for journey, step, record, steps in found:
        network = _upto(_items(call, "get_network_requests", journey=journey), steps, step)
        console = _upto(_items(call, "get_browser_console", journey=journey, level="error"), steps, step)
        seen = _journey(call, journey, step, record, network, console, changes,
                        explained=bool(backend_roots) and (len(found) == 1 or _names(
                            backend_roots, journey, record, network, console)))
        evidence += seen["evidence"]
        said.append(seen["explanation"])
        roots += [e for e in seen.get("entities", []) if e["id"] not in {r["id"] for r in roots}]
    return {"incident": True, "entities": roots, "propagations": [], "evidence": list(dict.fromkeys(evidence)),
            "explanation": "; ".join(said)}


def _names(roots: Sequence[str], journey: str, record: dict[str, Any], network: list[dict[str, Any]],
           console: list[dict[str, Any]]) -> bool:
    """Whether a journey's symptom names one of the roots (`recommendation-1` in "the recommendations list")."""
    text = " ".join([journey, str(record.get("assertion") or ""), str(record.get("actual") or ""),
                     str(record.get("error") or ""), *(str(n.get("url")) for n in network if _failed(n)),
                     *(str(c.get("text", "")) for c in console)]).lower()
    return any(re.sub(r"-\d+$", "", r).lower() in text for r in roots)


def _failed(n: dict[str, Any]) -> bool:
    return bool(n.get("failure") or n.get("blocked") or (n.get("status") or 0) >= 400)


def _journey(call: Call, journey: str, step: str, record: dict[str, Any], network: list[dict[str, Any]],
             console: list[dict[str, Any]], changes: list[dict[str, Any]], *, explained: bool) -> dict[str, Any]:
    """One failing journey: its evidence and explanation, and a root (``entities``) unless `explained` (the
    backend's alerts already name its root) or the frontend itself fails (left to the alert walk)."""
    failed = [n for n in network if _failed(n)]
    slow = [n for n in network if (n.get("duration_ms") or 0) >= SLOW_MS]
    evidence = [f"cuj:{journey}:{step}"] + [str(n["id"]) for n in failed[:3]] + [str(c["id"]) for c in console[:3]]
    symptom = f"journey {journey} fails at step {step}: {record.get('assertion') or record.get('error') or ''}"
    cited = {"evidence": evidence, "explanation": symptom}
    if explained:  # the flag switches the backend's alerts may stem from are evidence too
        return {**cited, "evidence": evidence + [str(c["id"]) for c in changes if c.get("kind") == "flag"]}
    # A backend flag fails requests: a journey whose requests all succeeded is not its doing.
    flag = next((c for c in changes if c.get("kind") == "flag" and (c.get("details") or {}).get("flag") in FLAG_ROOTS
                 and (c.get("details") or {}).get("variant") == "on"), None) if failed else None
    if flag is not None:
        entity, layer, fault_type = FLAG_ROOTS[str(flag["details"]["flag"])]
        return _root(entity, layer, fault_type, [*evidence, str(flag["id"])],
                     f"{symptom}; the change journal shows {flag.get('summary')}")
    release = next((c for c in changes if c.get("kind") == "release" and c.get("service") == "frontend"), None)
    texts = " ".join(str(c.get("text", "")) for c in console).lower()
    assertion = str(record.get("assertion") or "").lower() + " " + str(record.get("actual") or "").lower()
    if release is not None:
        api_4xx = [n for n in failed if 400 <= (n.get("status") or 0) < 500 and "/api/" in str(n.get("url"))]
        if api_4xx:
            fault_type = "api_contract_drift"
        elif "pageerror" in {c.get("type") for c in console} or "cannot read properties" in assertion:
            fault_type = "js_runtime_error"
        elif re.search(r"total|sum|amount", assertion):
            fault_type = "wrong_computation"
        elif re.search(r"eur|usd|currenc", assertion):
            fault_type = "storage_inconsistency"
        else:
            fault_type = "listener_missing"
        evidence.append(f"dom:{journey}:{step}")
        return _root("frontend", "frontend", fault_type, [*evidence, str(release["id"])],
                     f"{symptom}; right after {release.get('summary')}")
    failures = " ".join(str(n.get("failure") or "") for n in failed).lower()
    unfinished = [n for n in failed if "unfinished" in str(n.get("failure") or "")]
    if any("mime type" in str(c.get("text", "")).lower() or "refused to" in str(c.get("text", "")).lower()
           for c in console):
        fault_type = "header_dropped"
    elif "content_length" in failures or "incomplete" in failures or "unexpected end" in texts + assertion:
        fault_type = "truncated_response"
    elif any("/static/" in str(n.get("url")) and n not in unfinished for n in failed):
        fault_type = "asset_missing"  # a script or style that did not arrive (404, or aborted by the browser)
    elif unfinished or slow or any((n.get("duration_ms") or 0) >= SLOW_MS for n in failed):
        fault_type = "slow_response"
    elif failed and _frontend_errors(call) == 0.0:
        fault_type = "error_response"
    elif not failed:
        fault_type = "response_mutation"
        evidence.append(f"dom:{journey}:{step}")
    else:
        return cited  # the frontend itself fails: leave it to the alert walk
    return _root("gateway", "edge", fault_type, evidence,
                 f"{symptom}; the frontend did not answer this (its error rate shows none): an edge rule did")


def _root(entity: str, layer: str, fault_type: str, evidence: list[str], explanation: str) -> dict[str, Any]:
    return {"incident": True, "entities": [{"id": entity, "root_cause": True, "layer": layer,
                                            "fault_type": fault_type}],
            "propagations": [], "evidence": list(dict.fromkeys(evidence)), "explanation": explanation}
