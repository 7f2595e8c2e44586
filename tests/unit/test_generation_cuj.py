"""Generated CUJ incidents (CUJ templates, docs/generation.md): which journey steps a drawn fault breaks comes from
one mapping (orchestrator/cuj/journeys.py SHOP_STEP_NEEDS) and the derived chain; on its fixed target each CUJ
template reproduces its hand-written contract, gate and evidence ids; draws the browser would not show are dropped;
instances are deterministic and say nothing of their cause."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import yaml

from orchestrator.catalog import find_scenario
from orchestrator.cli.generate import generate_into
from orchestrator.cuj.journeys import SHOP_JOURNEYS, SHOP_STEP_NEEDS
from orchestrator.generation import effects, journeys
from orchestrator.generation.effects import Topology, load_effect_model
from orchestrator.generation.instances import CUJ_GOALS, build, generate
from orchestrator.generation.templates import Template, Variation, load_template
from orchestrator.role_topology import load_topology
from orchestrator.spec import spec_files

CUJ_TEMPLATES = sorted(f.parent.name for f in spec_files()
                       if "vary" in (data := yaml.safe_load(f.read_text())) and journeys.is_cuj(data))
APP = Path(__file__).resolve().parents[2] / "roles" / "env_shop" / "files" / "app"


def tree(folder: Path) -> dict[str, bytes]:
    return {str(f.relative_to(folder)): f.read_bytes() for f in sorted(folder.rglob("*")) if f.is_file()}


def fixed_draw(t: Template) -> Variation:
    """The variation the template's own values make (its fixed scenario)."""
    args = t.fault["args"]
    drawn = tuple((t.fault["name"], a["arg"], args[a["arg"]]) for a in t.scenario.data["vary"].get("args", []))
    # Offset 0 (the templates draw 0, 60 or 120 s) writes nothing: the hand-written scenario's own timing.
    offset = 0 if "offset" in t.scenario.data["vary"] else None
    variation = Variation(t.model.target_in(args), drawn, args.get(t.model.source_arg) if t.model.source_arg else None,
                          offset=offset)
    assert variation in t.variations
    return variation


def check(spec: dict, role: str, stage: str = "manifestation") -> dict | None:
    return next((c for c in spec["checks"].get(stage, []) if c["role"] == role), None)


def test_the_seven_compound_scenarios_are_templates() -> None:
    names = ("cart-down", "catalog-db-revoked", "catalog-latency", "currency-crashloop", "payment-abort",
             "recommendation-frozen", "redis-down")
    assert [f"shop-cuj-compound-{n}" for n in names] == CUJ_TEMPLATES


def test_every_journey_step_says_which_services_it_needs() -> None:
    topo = Topology(load_topology("shop") or {})
    pages = journeys.pages_service(topo)
    callees = {t for t, callers in topo.callers.items() if pages in callers}
    assert {j: [s.name for s in journey.steps] for j, journey in SHOP_JOURNEYS.items()} == \
        {j: list(steps) for j, steps in SHOP_STEP_NEEDS.items()}
    for journey, steps in SHOP_STEP_NEEDS.items():
        for step, needs in steps.items():
            assert needs and set(needs) <= callees, f"{journey}/{step} needs {needs}, not all called by {pages}"


def test_the_call_timeouts_are_the_shops() -> None:
    sys.path.insert(0, str(APP))
    try:
        from shop.client import DEFAULT_TIMEOUT
        from shop.services.frontend import CHECKOUT_TIMEOUT
    finally:
        sys.path.remove(str(APP))
    assert effects.CALL_TIMEOUT_MS == DEFAULT_TIMEOUT * 1000
    assert effects.CALL_TIMEOUTS_MS == {("frontend", "checkout"): CHECKOUT_TIMEOUT * 1000}
    assert 'upstream(app, "checkout", env, timeout=CHECKOUT_TIMEOUT)' in \
        (APP / "shop" / "services" / "frontend.py").read_text()


@pytest.mark.parametrize("template", CUJ_TEMPLATES)
def test_the_fixed_target_reproduces_the_hand_written_cuj_scenario(template: str) -> None:
    """The instance of the template's own values derives its root cause, chain, failing journey step, baseline
    journeys, alert gate and evidence ids; the contract's evidence families are ones the step surely carries."""
    t = load_template(find_scenario(template))
    inst = build(t, fixed_draw(t), "inc-000000000000")
    fixed = yaml.safe_load(t.scenario.ground_truth_path.read_text())
    root = next(e for e in fixed["entities"] if e.get("rootCause"))
    mine = inst.ground_truth["entities"][0]
    assert (mine["id"], mine["faultType"], mine["layer"]) == (root["id"], root["faultType"], root["layer"])
    assert [(p["source"], p["target"]) for p in inst.ground_truth["propagations"]] == \
        [(p["source"], p["target"]) for p in fixed["propagations"]]
    assert inst.ground_truth["evidence"] == fixed["evidence"]
    spec, hand = inst.spec, t.scenario.data
    assert check(spec, "check_cuj")["args"]["failing"] == check(hand, "check_cuj")["args"]["failing"]
    assert check(spec, "check_cuj", "baseline")["args"]["journeys"] == \
        check(hand, "check_cuj", "baseline")["args"]["journeys"]
    gate, hand_gate = check(spec, "check_alerts"), check(hand, "check_alerts")
    assert (gate and gate["args"]["firing"]) == (hand_gate and hand_gate["args"]["firing"])
    families = check(spec, "check_cuj")["args"]["evidence"]
    assert tuple(families) in journeys.FAMILIES.values() and families[0] in check(hand, "check_cuj")["args"]["evidence"]
    assert inst.cuj is not None and inst.cuj.shown == inst.cuj.steps[:1]
    assert inst.spec["tasks"][0]["goal"] == CUJ_GOALS["diagnose"].format(app="online shop")


def _instance(template: str, target: str, source: str | None = None, **args: object) -> journeys.CujParts:
    t = load_template(find_scenario(template))
    drawn = tuple((t.fault["name"], k, v) for k, v in args.items())
    parts = build(t, Variation(target, drawn, source), "inc-000000000000").cuj
    assert parts is not None
    return parts


def test_a_step_fails_where_a_call_it_needs_fails() -> None:
    steps = _instance("shop-cuj-compound-cart-down", "catalog").steps
    assert [(s.journey, s.step, s.shows) for s in steps] == [
        ("browse", "open-home", "net"), ("checkout", "open-product", "net"), ("currency", "open-home", "net"),
        ("recommendations", "open-product", "net")]
    # behind checkout: only the order fails; behind cart: adding to the cart
    assert [(s.journey, s.step) for s in _instance("shop-cuj-compound-cart-down", "shipping").steps] == \
        [("checkout", "place-order")]
    assert [(s.journey, s.step) for s in _instance("shop-cuj-compound-redis-down", "redis").steps] == \
        [("checkout", "add-to-cart")]


def test_the_pages_service_failing_breaks_every_journey_at_its_first_step() -> None:
    parts = _instance("shop-cuj-compound-cart-down", "frontend")
    assert [(s.journey, s.step) for s in parts.steps] == [(j.name, j.steps[0].name) for j in SHOP_JOURNEYS.values()]
    assert [(s.journey, s.step) for s in parts.shown] == [("browse", "open-home")]


def test_a_call_the_page_renders_around_shows_only_where_a_step_checks_it() -> None:
    parts = _instance("shop-cuj-compound-currency-crashloop", "recommendation")
    assert [(s.journey, s.step, s.shows) for s in parts.steps] == [("recommendations", "open-product", "dom")]
    assert parts.families == journeys.FAMILIES["dom"]
    assert parts.evidence == ("cuj:recommendations:open-product", "dom:recommendations:open-product",
                              "alert:ServiceDown")


def test_a_delay_fails_a_call_only_beyond_its_callers_timeout() -> None:
    t = "shop-cuj-compound-catalog-latency"
    assert _instance(t, "catalog", "frontend", delay_ms=5000).steps
    assert not _instance(t, "catalog", "frontend", delay_ms=2000).steps  # slower pages, every journey passes
    assert not _instance(t, "checkout", "frontend", delay_ms=5000).steps  # the frontend waits 10 s for checkout
    assert [(s.journey, s.step) for s in _instance(t, "payment", "checkout", delay_ms=5000).steps] == \
        [("checkout", "place-order")]  # checkout gives up after 3 s and answers an error


def test_the_gate_keeps_the_templates_alert_where_the_target_raises_it() -> None:
    assert _instance("shop-cuj-compound-cart-down", "catalog").gate == (
        {"alertname": "ServiceDown", "service": "catalog"},)
    # a stopped datastore raises no ServiceDown: its own first alert instead
    assert _instance("shop-cuj-compound-cart-down", "redis").gate == ({"alertname": "RedisDown", "service": "redis"},)
    assert _instance("shop-cuj-compound-redis-down", "postgres").gate == (
        {"alertname": "PostgresDown", "service": "postgres"},)
    assert _instance("shop-cuj-compound-payment-abort", "cart", "frontend", status=500).gate == ()


def test_a_draw_the_browser_would_not_show_is_dropped() -> None:
    """Stopping ads or email (pages render without ads; an order is placed without its e-mail) breaks no journey
    step: dropped, although the SRE twin keeps them (their alerts fire)."""
    cuj = load_template(find_scenario("shop-cuj-compound-cart-down"))
    out = generate([cuj], "drops", len(cuj.variations))
    dropped = {d["draw"]: d["reason"] for d in out.dropped}
    assert dropped == {f"{target}|offset={offset}": "no journey step would fail: the browser shows nothing"
                       for target in ("ads", "email") for offset in (0, 60, 120)}
    assert len(out.instances) == len(cuj.variations) - 6 and all(i.cuj and i.cuj.shown for i in out.instances)
    sre = load_template(find_scenario("shop-cart-down"))
    kept = generate([sre], "drops", len(sre.variations))
    assert {"ads", "email"} <= {i.variation.target for i in kept.instances}


def test_the_same_seed_gives_byte_identical_cuj_instances(tmp_path: Path) -> None:
    first = generate_into(tuple(CUJ_TEMPLATES), "cuj-a", 14, tmp_path / "a")
    again = generate_into(tuple(CUJ_TEMPLATES), "cuj-a", 14, tmp_path / "b")
    other = generate_into(tuple(CUJ_TEMPLATES), "cuj-b", 14, tmp_path / "c")
    assert first["count"] == 14 and tree(tmp_path / "a") == tree(tmp_path / "b")
    assert again == {**first, "out": again["out"]}
    assert {i["id"] for i in first["instances"]} != {i["id"] for i in other["instances"]}
    for inst in first["instances"]:
        spec = yaml.safe_load((tmp_path / "a" / inst["id"] / "scenario.yaml").read_text())
        truth = yaml.safe_load((tmp_path / "a" / inst["id"] / "ground_truth.yaml").read_text())
        failing = check(spec, "check_cuj")["args"]["failing"]
        assert len(failing) == 1 and f"cuj:{failing[0]['journey']}:{failing[0]['step']}" in truth["evidence"]
        assert check(spec, "check_cuj", "baseline")["args"]["journeys"] == [failing[0]["journey"]]


def test_cuj_instances_say_nothing_of_their_cause(tmp_path: Path) -> None:
    result = generate_into(tuple(CUJ_TEMPLATES), "cuj-leak-check", 40, tmp_path)
    words = set(CUJ_TEMPLATES)
    for template in CUJ_TEMPLATES:
        scn = find_scenario(template)
        model = load_effect_model(load_template(scn).fault["role"])
        words |= {model.role, model.fault_type, model.mechanism, *(f["name"] for f in scn.faults)}
        words |= {w for w in re.split(r"[-_ ]", template) if len(w) > 3 and w not in {"shop", "down"}}
        words |= set(re.split(r"[-_ ]", model.fault_type)) | set(model.role.split("_")[1:])
    words |= {s for steps in SHOP_STEP_NEEDS.values() for needs in steps.values() for s in needs}
    words |= {j for j in SHOP_JOURNEYS} | {s.name for j in SHOP_JOURNEYS.values() for s in j.steps}
    words.discard("container")
    goals = set()
    assert result["count"] == 40
    for inst in result["instances"]:
        spec = yaml.safe_load((tmp_path / inst["id"] / "scenario.yaml").read_text())
        goals |= {t["goal"] for t in spec["tasks"]}
        readable = " ".join([inst["id"], spec["metadata"]["name"], spec["metadata"]["description"],
                             *(t["goal"] for t in spec["tasks"]), *(f["name"] for f in spec["faults"]),
                             *(p.name for p in (tmp_path / inst["id"]).iterdir())]).lower()
        tokens = set(re.findall(r"[a-z0-9]+", readable))
        leaked = sorted(w for w in words
                        if (w.lower() in readable if re.search(r"[-_ ]", w) else w.lower() in tokens))
        assert not leaked, f"{inst['id']} ({inst['template']}) shows {leaked}: {readable}"
    assert goals == {CUJ_GOALS["diagnose"].format(app="online shop")}
