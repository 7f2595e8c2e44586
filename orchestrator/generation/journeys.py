"""Browser journeys in generated incidents (CUJ templates): which steps of the shop's critical user journeys a drawn
fault breaks, and what follows from them: the check_cuj contract, the alerts the manifestation gate waits for and the
ground truth's evidence ids.

It rests on one fact, written beside the journeys: `SHOP_STEP_NEEDS` (orchestrator/cuj/journeys.py), the services each
step needs through the pages' service (the one the entry calls: the frontend). A step fails when the derived chain
reaches the frontend through a call the step needs and the fault makes calls fail: its model gives callers errors, or
it delays a call beyond its caller's timeout (a model's `delay_arg`). A failed call the frontend renders around (a
`degrades` edge: recommendations) shows only where a step checks what it renders (`dom` evidence: the page is whole,
the content missing); any other fails the step's request (`net` evidence). A journey stops at its first failing step.

An instance shows the first journey that breaks, in the shop's order (browse, checkout, currency, recommendations:
the common ways in first), as the fixed CUJ scenarios do: its contract names that journey's failing step, its
baseline runs that journey, and its evidence ids are what that journey's capture holds. One failing journey shows the
incident; each more would add a browser run to every check without telling the agent more.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from orchestrator.cuj.journeys import SHOP_JOURNEYS, SHOP_STEP_NEEDS
from orchestrator.errors import OpsBenchError
from orchestrator.generation.effects import CALLER_ALERTS, ENTRY_ALERTS, EffectModel, Topology, breaks_calls

FAMILIES = {"net": ("network", "console"), "dom": ("screenshot", "dom")}
"""The check_cuj evidence families a failing step surely carries, by how it shows: a failed request is in the network
log and the console; a page rendered without its content has only its screenshot and DOM to show it."""


@dataclass(frozen=True)
class FailingStep:
    journey: str
    step: str
    shows: str
    """`net`: a request of the step answers an error; `dom`: the page renders without what the step checks."""


@dataclass(frozen=True)
class CujParts:
    """What an instance of a CUJ template derives beyond the SRE parts."""

    steps: tuple[FailingStep, ...]
    """The first failing step of every journey the fault breaks (none: the browser shows nothing)."""
    shown: tuple[FailingStep, ...]
    """What the instance's contract checks and its capture holds: the first of `steps`."""
    gate: tuple[dict[str, str], ...]
    """The manifestation's alert labels (empty: the browser is the only gate)."""
    families: tuple[str, ...]
    evidence: tuple[str, ...]


def is_cuj(spec: dict[str, Any]) -> bool:
    """Whether a spec's symptom is a browser journey failing (a manifestation check_cuj that expects failure)."""
    return any(c.get("role") == "check_cuj" and (c.get("args") or {}).get("expect") == "fail"
               for c in (spec.get("checks") or {}).get("manifestation", []))


def pages_service(topo: Topology) -> str:
    """The service the browser's pages come from: the one the entry calls."""
    called = sorted(t for t, callers in topo.callers.items() if set(callers) & set(topo.entries))
    if len(called) != 1:
        raise OpsBenchError(f"browser journeys need one service behind the entry {topo.entries}, not {called}")
    return called[0]


def failing_calls(truth: dict[str, Any], topo: Topology) -> dict[str, str]:
    """The pages service's callees on the derived chain, each with how a step needing it shows its failure."""
    pages = pages_service(topo)
    calls: dict[str, str] = {}
    for p in truth["propagations"]:
        if p["target"] == pages:
            callee = topo.service_of(p["source"])
            calls[callee] = "dom" if (pages, callee) in topo.degrades else "net"
    return calls


def failing_steps(calls: dict[str, str], whole: bool) -> list[FailingStep]:
    """The first step of each shop journey that needs a failing call (every journey's first step when the pages'
    service itself fails: `whole`), in the journeys' order."""
    out = []
    for journey in SHOP_JOURNEYS.values():
        for step in journey.steps:
            shows = ["net"] if whole else [calls[s] for s in SHOP_STEP_NEEDS[journey.name][step.name] if s in calls]
            if shows:
                out.append(FailingStep(journey.name, step.name, "net" if "net" in shows else "dom"))
                break
    return out


def gate(template_alerts: list[str], alerts: list[dict[str, str]], topo: Topology) -> list[dict[str, str]]:
    """The alerts the manifestation waits for: those the template's gate names that the incident raises (each where it
    fires nearest the root cause), else the target's first own alert; none when the template waits for none."""
    if not template_alerts:
        return []
    names = [n for n in dict.fromkeys(template_alerts) if any(a["name"] == n for a in alerts)]
    if not names:
        callers = set(CALLER_ALERTS.values()) | set(ENTRY_ALERTS.values())
        names = [a["name"] for a in alerts if a["name"] not in callers][:1]
    labels: list[dict[str, str]] = []
    for name in names:
        first = next(a for a in alerts if a["name"] == name)
        labels.append({"alertname": name, "service": topo.service_of(first["entity"])})
    return labels


def families(steps: list[FailingStep]) -> tuple[str, ...]:
    """The evidence families every failing step carries (a check_cuj contract asks each of each failing journey)."""
    kinds = {s.shows for s in steps}
    return FAMILIES[kinds.pop()] if len(kinds) == 1 else FAMILIES["dom"]


def evidence(steps: list[FailingStep], labels: list[dict[str, str]]) -> tuple[str, ...]:
    """The ground truth's evidence ids: each failing step's report and its network log or DOM, then the gate's
    alerts (stable prefixes: an agent cites `net:checkout:add-to-cart:3`)."""
    ids = [i for s in steps for i in (f"cuj:{s.journey}:{s.step}", f"{s.shows}:{s.journey}:{s.step}")]
    return tuple(ids + [f"alert:{n}" for n in dict.fromkeys(g["alertname"] for g in labels)])


def template_gate(spec: dict[str, Any]) -> list[str]:
    """The alert names a spec's manifestation check_alerts waits for."""
    return [str(labels.get("alertname")) for c in spec["checks"].get("manifestation", [])
            if c["role"] == "check_alerts" for labels in (c.get("args") or {}).get("firing") or []]


def derive_cuj(spec: dict[str, Any], model: EffectModel, truth: dict[str, Any], topo: Topology, target: str,
               source: str | None, args: dict[str, Any]) -> CujParts:
    """The CUJ parts of an instance of the CUJ template `spec`, from its derived SRE parts `truth`."""
    whole = topo.service_of(target) == pages_service(topo)
    broken = breaks_calls(model, target, topo, source, args)
    steps = failing_steps(failing_calls(truth, topo), whole) if broken else []
    shown = steps[:1]
    labels = gate(template_gate(spec), truth["alerts"], topo)
    return CujParts(tuple(steps), tuple(shown), tuple(labels), families(shown) if shown else (),
                    evidence(shown, labels))


def apply(checks: dict[str, Any], parts: CujParts) -> None:
    """Rewrite a CUJ instance's checks for its draw: the baseline journeys are the ones that will fail, the contract
    names their failing steps and evidence families, and the alert gate waits for the derived alerts (it goes when
    there are none: the browser is then the only gate)."""
    journeys = list(dict.fromkeys(s.journey for s in parts.shown))
    for check in checks.get("baseline", []):
        if check["role"] == "check_cuj" and (check.get("args") or {}).get("expect", "pass") == "pass":
            check["args"] = {**(check.get("args") or {}), "journeys": journeys}
    kept = []
    for check in checks.get("manifestation", []):
        args = check.get("args") or {}
        if check["role"] == "check_cuj" and args.get("expect") == "fail":
            check["args"] = {**args, "failing": [{"journey": s.journey, "step": s.step} for s in parts.shown],
                             "evidence": list(parts.families)}
        elif check["role"] == "check_alerts" and "firing" in args:
            if not parts.gate:
                continue
            check["args"] = {**args, "firing": [dict(g) for g in parts.gate]}
        kept.append(check)
    checks["manifestation"] = kept
