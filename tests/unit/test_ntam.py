"""NTAM (ITBench App. F): topology distance, chains, hand-computed scores, properties on the shop."""

from __future__ import annotations

import itertools
import json
import math
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from orchestrator import paths
from orchestrator.evaluation import NtamParams, NtamScorer, TopologyGraph, ntam, score_diagnosis
from orchestrator.evaluation.ntam import build_chains

# A fixed ground truth on the real shop topology (scenario files may change; these numbers must not).
SHOP_GT: dict[str, Any] = yaml.safe_load("""
apiVersion: opsbench/v1
kind: GroundTruth
scenario: shop-cart-down
incident: true
alerts:
  - {name: ServiceDown, entity: cart-1}
  - {name: ServiceErrorRateHigh, entity: frontend}
entities:
  - {id: cart-1, aliases: [cart, cart service, cartservice, cart-service], rootCause: true}
  - {id: cart, aliases: [cartservice, cart-service]}
  - {id: frontend, aliases: [frontend-1, frontend-2, frontend service]}
  - {id: gateway, aliases: [gateway-1, nginx, ingress]}
propagations:
  - {source: cart-1, target: frontend, condition: cart stopped, effect: frontend 5xx}
  - {source: frontend, target: gateway, condition: frontend 5xx, effect: users see errors}
""")
SHOP_TOPO: dict[str, Any] = yaml.safe_load((paths.ROLES_DIR / "env_shop" / "files" / "topology.yml").read_text())
DELTA = 0.289  # Table 33


def f(td: float, delta: float = DELTA) -> float:
    """The closeness factor of ITD: (1 / (TD + 1)) ** delta."""
    return float((1.0 / (td + 1.0)) ** delta)


def topo(*edges: tuple[str, str, str]) -> dict[str, Any]:
    nodes = sorted({n for s, t, _ in edges for n in (s, t)})
    return {"entities": [{"id": n} for n in nodes],
            "edges": [{"source": s, "target": t, "type": ty} for s, t, ty in edges]}


def gt(roots: Sequence[str], others: Sequence[str] = (), chain: Sequence[str] = ()) -> dict[str, Any]:
    ents = [{"id": r, "rootCause": True} for r in roots] + [{"id": o} for o in others]
    return {"apiVersion": "opsbench/v1", "kind": "GroundTruth", "scenario": "t", "entities": ents,
            "propagations": [{"source": a, "target": b} for a, b in itertools.pairwise(chain)]}


def pred(roots: Sequence[str] = (), others: Sequence[str] = (), chain: Sequence[str] = ()) -> dict[str, Any]:
    ents = [{"id": r, "root_cause": True} for r in roots] + [{"id": o} for o in others]
    return {"entities": ents,
            "propagations": [{"source": a, "target": b} for a, b in itertools.pairwise(chain)]}


def as_prediction(ground_truth: dict[str, Any]) -> dict[str, Any]:
    """The ground truth written as an agent output: the exact prediction."""
    return {"entities": [{"id": e["id"], "root_cause": bool(e.get("rootCause"))} for e in ground_truth["entities"]],
            "propagations": [{"source": p["source"], "target": p["target"]}
                             for p in ground_truth.get("propagations", [])]}


# ------------------------------------------------------------------------------------------
# Parameters
# ------------------------------------------------------------------------------------------


def test_default_params_are_table_33() -> None:
    p = NtamParams()
    assert (p.alpha, p.beta, p.gamma, p.delta, p.c, p.d, p.zeta) == (1, 1, 1, 0.289, 0.5, 0.5, 2.1)
    assert (p.edge_cost("owns"), p.edge_cost("calls")) == (1.0, 2.1)


@pytest.mark.parametrize("bad", [{"alpha": 0}, {"delta": -1}, {"zeta": math.inf}, {"c": math.nan}, {"d": True},
                                 {"gamma": "1"}])
def test_invalid_params_raise(bad: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="must be a finite number > 0"):
        NtamParams(**bad)


# ------------------------------------------------------------------------------------------
# Topology: subtree sizes and TD
# ------------------------------------------------------------------------------------------


def test_subtree_size_counts_the_node_and_everything_below_it() -> None:
    # a -owns-> b -calls-> c, a -calls-> c (shared descendant counted once), c -calls-> d -calls-> c (cycle)
    g = TopologyGraph(topo(("a", "b", "owns"), ("b", "c", "calls"), ("a", "c", "calls"),
                           ("c", "d", "calls"), ("d", "c", "calls")))
    assert g.subtree_size == {"a": 4, "b": 3, "c": 2, "d": 2}


def test_subtree_sizes_on_the_shop() -> None:
    sizes = TopologyGraph(SHOP_TOPO).subtree_size
    assert (sizes["cart-1"], sizes["cart"], sizes["frontend"], sizes["flags"]) == (1, 4, 27, 1)
    assert sizes["loadgen"] == len(SHOP_TOPO["entities"]) - 1  # reaches everything but the flags file


# Graph H1 (4 nodes): A -owns-> A2, B -calls-> A, B -owns-> B2.
# subtree sizes: A2 = 1, B2 = 1, A = |{A, A2}| = 2, B = |{B, A, A2, B2}| = 4.
H1 = topo(("A", "A2", "owns"), ("B", "A", "calls"), ("B", "B2", "owns"))


def test_topology_distance_charges_the_entered_node() -> None:
    g = TopologyGraph(H1)
    # From A2: step into A over owns: 1 * 2 = 2; into B over calls: 2.1 * 4 = 8.4 (total 10.4);
    # into B2 over owns: 1 * 1 = 1 (total 11.4).
    assert g.distances("A2", NtamParams()) == pytest.approx({"A2": 0, "A": 2, "B": 10.4, "B2": 11.4})
    # TD is not symmetric: from A into A2 costs 1 * subtree(A2) = 1.
    assert g.distances("A", NtamParams())["A2"] == pytest.approx(1.0)
    # zeta scales calls edges only: into B = 3 * 4 = 12.
    assert g.distances("A2", NtamParams(zeta=3))["B"] == pytest.approx(14.0)


def test_figure_30_intuitions() -> None:
    # Root cause pod A2. A1 (its deployment) owns it; A5 calls only A2; A6 (another deployment's
    # pod) calls A2 and A7. The paper: A1 beats A6 though both are one hop away, and A5 beats A6.
    # TD(A2, A1) = 1 * |{A1, A2}| = 2; TD(A2, A5) = 2.1 * |{A5, A2}| = 4.2;
    # TD(A2, A6) = 2.1 * |{A6, A2, A7}| = 6.3.
    t = topo(("A1", "A2", "owns"), ("A5", "A2", "calls"), ("A6", "A2", "calls"), ("A6", "A7", "calls"),
             ("A8", "A6", "owns"))
    truth = gt(["A2"])
    fl = {o: ntam(truth, pred([o]), t)["ntam_fl"] for o in ("A1", "A5", "A6")}
    assert fl["A1"] > fl["A5"] > fl["A6"] > 0
    assert fl["A1"] == pytest.approx(f(2) ** 2)  # see test_hand_computed_single_root_cause


# ------------------------------------------------------------------------------------------
# Hand-computed scores on small graphs
# ------------------------------------------------------------------------------------------


def test_hand_computed_single_root_cause() -> None:
    # Ground truth on H1: root cause A2 alone. One chain {A2}, K = 1, level(A2) = 1,
    # GI(A2) = ((K + 1) / (K - k + 1)) ** gamma = (2 / 1) ** 1 = 2.
    # Ideal: ITD(A2, A2) = 2 * (1 / (0 + 1)) ** delta = 2; IFD({A2}, A2) = 2 / 1 = 2;
    #        S(R, R) = S3 * S4 / (|1 - 1| + 1) ** c = 2 * 2 = 4 (and the same for the chain).
    # Predict A (TD 2): ITD = 2 * 3 ** -0.289 = 2 * 0.727967 = 1.455935 = IFD; S = 1.455935 ** 2 = 2.119746
    #        -> FL = FPC = 2.119746 / 4 = 0.529937 (= 3 ** -0.578).
    # Predict B2 (TD 11.4): ITD = 2 * 12.4 ** -0.289 = 2 * 0.483060 = 0.966120;
    #        -> FL = FPC = 0.966120 ** 2 / 4 = 0.233347 (= 12.4 ** -0.578).
    truth = gt(["A2"])
    exact = ntam(truth, pred(["A2"]), H1)
    assert (exact["ntam_fl"], exact["ntam_fpc"], exact["fl_ideal"], exact["fpc_ideal"]) == (1.0, 1.0, 4.0, 4.0)
    a = ntam(truth, pred(["A"]), H1)
    assert (a["ntam_fl"], a["ntam_fpc"]) == (pytest.approx(0.529937, abs=1e-6), pytest.approx(0.529937, abs=1e-6))
    assert a["fl_score"] == pytest.approx(2.119746, abs=1e-6)
    b2 = ntam(truth, pred(["B2"]), H1)
    assert (b2["ntam_fl"], b2["ntam_fpc"]) == (pytest.approx(0.233347, abs=1e-6), pytest.approx(0.233347, abs=1e-6))


# Graph H2 (5 nodes): gw -calls-> fe, fe -calls-> be, be -owns-> be1, fe -owns-> fe1.
# subtree sizes: be1 = 1, fe1 = 1, be = 2, fe = |{fe, fe1, be, be1}| = 4, gw = 5.
# Ground truth: root cause be1, propagations be1 -> fe -> gw: one chain, K = 3,
# levels be1 = 3, fe = 2, gw = 1; GI = 4 / 1 = 4, 4 / 2 = 2, 4 / 3.
# TD from be1: be 1*2 = 2, fe 2 + 2.1*4 = 10.4, gw 10.4 + 2.1*5 = 20.9
# TD from fe:  be 2.1*2 = 4.2, be1 4.2 + 1 = 5.2, gw 2.1*5 = 10.5
# TD from gw:  fe 2.1*4 = 8.4, be 8.4 + 4.2 = 12.6, be1 13.6
# closeness f(TD) = (TD + 1) ** -0.289: f(5.2) = 0.590199, f(8.4) = 0.523318, f(10.4) = 0.494942,
#                                       f(10.5) = 0.493695, f(13.6) = 0.460789, f(20.9) = 0.409837
# IFD(FP, be1) = (4 + 2 f(5.2) + 4/3 f(13.6)) / 3 = 1.931595
# IFD(FP, fe)  = (4 f(10.4) + 2 + 4/3 f(8.4)) / 3 = 1.559176
# IFD(FP, gw)  = (4 f(20.9) + 2 f(10.5) + 4/3) / 3 = 1.320024
# Ideal FPC: S1 = GI (exact matches) -> sum 4 + 2 + 4/3 = 7.333333; S2 = max IFD = 1.931595;
#            S(G, G) = 7.333333 * 1.931595 = 14.165028.  Ideal FL: S3 * S4 = 4 * 1.931595 = 7.726379.
H2 = topo(("gw", "fe", "calls"), ("fe", "be", "calls"), ("be", "be1", "owns"), ("fe", "fe1", "owns"))
H2_GT = gt(["be1"], ["fe", "gw"], chain=["be1", "fe", "gw"])


def test_hand_computed_chain_ideal() -> None:
    chain, = NtamScorer(H2_GT, H2).truth
    assert (chain.K, dict(chain.levels)) == (3, {"be1": 3, "fe": 2, "gw": 1})
    r = ntam(H2_GT, as_prediction(H2_GT), H2)
    assert r["fpc_ideal"] == pytest.approx(14.165028, abs=1e-6)
    assert r["fl_ideal"] == pytest.approx(7.726379, abs=1e-6)
    assert (r["ntam_fpc"], r["ntam_fl"]) == (1.0, 1.0)


def test_hand_computed_chain_with_a_wrong_short_prediction() -> None:
    # Prediction: fe alone, as root cause (J = 1, I = 3, V = U = 1).
    # FPC: S1 = ITD(be1, fe) + ITD(fe, fe) + ITD(gw, fe) = 4 f(10.4) + 2 + 4/3 f(8.4) = 4.677527;
    #      S2 = IFD(FP, fe) = 1.559176; length penalty (|1 - 3| + 1) ** 0.5 = sqrt(3);
    #      S = 4.677527 * 1.559176 / 1.732051 = 4.210665 -> FPC = 4.210665 / 14.165028 = 0.297258.
    # FL:  S3 = ITD(be1, fe) = 4 f(10.4) = 1.979768; S4 = IFD(FP, fe) = 1.559176 (over the whole chain);
    #      S = 3.086807 -> FL = 3.086807 / 7.726379 = 0.399515.
    r = ntam(H2_GT, pred(["fe"]), H2)
    assert r["fpc_score"] == pytest.approx(4.210665, abs=1e-6)
    assert r["ntam_fpc"] == pytest.approx(0.297258, abs=1e-6)
    assert r["ntam_fl"] == pytest.approx(0.399515, abs=1e-6)
    # Same numbers from the formulas, unrounded:
    ifd_fe = (4 * f(10.4) + 2 + 4 / 3 * f(8.4)) / 3
    ifd_be1 = (4 + 2 * f(5.2) + 4 / 3 * f(13.6)) / 3
    assert r["ntam_fl"] == pytest.approx(4 * f(10.4) * ifd_fe / (4 * ifd_be1), rel=1e-12)


def test_hand_computed_chain_count_penalty() -> None:
    # Prediction: two chains, {be1 (root)} and {gw} (no propagations between them -> P = 1, Q = 2).
    # Chain {be1}: S1 = 4 + 2 f(5.2) + 4/3 f(13.6) = 5.794784, S2 = IFD(be1) = 1.931595,
    #              penalty sqrt(3): S = 6.462382.
    # Chain {gw}:  S1 = 4 f(20.9) + 2 f(10.5) + 4/3 = 3.960072, S2 = IFD(gw) = 1.320024: S = 3.018035.
    # S(G, O) = max(6.462382, 3.018035) / (|1 - 2| + 1) ** 0.5 = 4.569594 -> FPC = 0.322597.
    # FL: chain {be1} has S(R, R') = 4 * 1.931595 = the ideal; {gw} has no root (0); / sqrt(2) -> FL = 0.707107.
    two = {"entities": [{"id": "be1", "root_cause": True}, {"id": "gw"}],
           "propagations": [{"source": "be1", "target": "be1"}, {"source": "gw", "target": "gw"}]}
    assert [sorted(c) for c in ntam(H2_GT, two, H2)["predicted_chains"]] == [["be1"], ["gw"]]
    r = ntam(H2_GT, two, H2)
    assert r["ntam_fpc"] == pytest.approx(0.322597, abs=1e-6)
    assert r["ntam_fl"] == pytest.approx(1 / math.sqrt(2), rel=1e-12)


def test_hand_computed_gamma_and_delta() -> None:
    # gamma = 2 squares the importances: GI(be1) = 16, GI(fe) = 4, GI(gw) = 16/9; delta = 1 makes
    # the closeness 1 / (TD + 1). Predict fe as root cause:
    # FL = [16 / 11.4 * IFD'(fe)] / [16 * IFD'(be1)], IFD'(fe) = (16 / 11.4 + 4 + 16/9 / 9.4) / 3,
    # IFD'(be1) = (16 + 4 / 6.2 + 16/9 / 14.6) / 3.
    p = NtamParams(gamma=2, delta=1)
    ifd_fe = (16 / 11.4 + 4 + 16 / 9 / 9.4) / 3
    ifd_be1 = (16 + 4 / 6.2 + 16 / 9 / 14.6) / 3
    assert ntam(H2_GT, pred(["fe"]), H2, p)["ntam_fl"] == pytest.approx((16 / 11.4 * ifd_fe) / (16 * ifd_be1))


def test_alpha_beta_c_exponents() -> None:
    # On H1 predicting A with alpha = 2, beta = 3: S = ITD ** 2 * IFD ** 3 = ITD ** 5, ideal 2 ** 5
    # -> FL = f(2) ** 5. With c = 1 and the exact root plus B2 (V = 2, U = 1): S3 = 2, S4 = 2,
    # penalty (|2 - 1| + 1) ** 1 = 2 -> FL = 4 / 2 / 4 = 0.5.
    assert ntam(gt(["A2"]), pred(["A"]), H1, NtamParams(alpha=2, beta=3))["ntam_fl"] == pytest.approx(f(2) ** 5)
    assert ntam(gt(["A2"]), pred(["A2", "B2"]), H1, NtamParams(c=1))["ntam_fl"] == pytest.approx(0.5)


# ------------------------------------------------------------------------------------------
# Chains and levels
# ------------------------------------------------------------------------------------------


def test_shop_ground_truth_chain_and_levels() -> None:
    chain, = NtamScorer(SHOP_GT, SHOP_TOPO).truth
    # cart is on no propagation: it joins the only chain one level below the deepest symptom.
    assert chain.entities == ("cart-1", "frontend", "gateway", "cart")
    assert (chain.roots, chain.K) == (("cart-1",), 4)
    assert dict(chain.levels) == {"cart-1": 4, "frontend": 3, "gateway": 2, "cart": 1}
    assert [chain.importance(g, 1.0) for g in chain.entities] == pytest.approx([5, 5 / 2, 5 / 3, 5 / 4])


def test_chains_are_propagation_components() -> None:
    chains = build_chains([("a", True), ("x", True), ("lonely", False)], [("a", "b"), ("b", "c"), ("x", "y")])
    assert [c.entities for c in chains] == [("a", "b", "c"), ("x", "y"), ("lonely",)]
    assert [c.roots for c in chains] == [("a",), ("x",), ()]
    assert dict(chains[0].levels) == {"a": 3, "b": 2, "c": 1}
    # Without propagations all listed entities form one chain; the root outranks the rest.
    only, = build_chains([("a", False), ("r", True)], [])
    assert (only.entities, dict(only.levels)) == (("a", "r"), {"a": 1, "r": 2})
    # A chain with no root cause is levelled from its sources; an upstream entity the root
    # cannot reach sits at the lowest level.
    rootless, = build_chains([], [("s", "t")])
    assert dict(rootless.levels) == {"s": 2, "t": 1}
    upstream, = build_chains([("r", True)], [("u", "r"), ("r", "v")])
    assert dict(upstream.levels) == {"u": 1, "r": 3, "v": 2}


# ------------------------------------------------------------------------------------------
# The "done when" properties on the shop
# ------------------------------------------------------------------------------------------


def test_exact_prediction_scores_one() -> None:
    r = ntam(SHOP_GT, as_prediction(SHOP_GT), SHOP_TOPO)
    assert (r["ntam_fl"], r["ntam_fpc"]) == (1.0, 1.0)
    assert r["unknown_entities"] == []


def test_every_real_ground_truth_scores_its_own_exact_prediction_one() -> None:
    for gt_file in sorted(paths.SPECS_DIR.glob("*/ground_truth.yaml")):
        truth = yaml.safe_load(gt_file.read_text())
        app = yaml.safe_load((gt_file.parent / "scenario.yaml").read_text())["environment"]["application"]
        topology = yaml.safe_load((paths.ROLES_DIR / f"env_{app}" / "files" / "topology.yml").read_text())
        # A healthy control may name an entity (a distractor, rootCause false) so that blaming
        # it resolves; its exact answer is still "no incident, nothing named".
        exact = as_prediction(truth) if truth.get("incident", True) else {"incident": False, "entities": []}
        r = ntam(truth, exact, topology)
        assert (r["ntam_fl"], r["ntam_fpc"]) == (1.0, 1.0), gt_file


def test_names_resolve_through_aliases_case_insensitively() -> None:
    # "Cart-1" (case), "Frontend Service" and "NGINX" (aliases) name the ground truth's entities.
    spelled = {"entities": [{"id": "Cart-1", "root_cause": True}, {"id": "cart"}, {"id": "Frontend Service"},
                            {"id": "NGINX"}],
               "propagations": [{"source": "CART-1", "target": "frontend-1"},
                                {"source": "FRONTEND", "target": "ingress"}]}
    r = ntam(SHOP_GT, spelled, SHOP_TOPO)
    assert r["predicted_chains"] == [["cart-1", "frontend", "gateway", "cart"]]
    assert (r["ntam_fl"], r["ntam_fpc"]) == (1.0, 1.0)
    # Topology ids outside the ground truth resolve case-insensitively too.
    assert ntam(SHOP_GT, pred(["REDIS"]), SHOP_TOPO)["predicted_chains"] == [["redis"]]


def test_scores_lie_in_the_unit_interval() -> None:
    rng = random.Random(20250101)
    names = [e["id"] for e in SHOP_TOPO["entities"]] + ["nginx", "CartService", "Frontend-2", "no-such-thing"]
    scorer = NtamScorer(SHOP_GT, SHOP_TOPO)
    seen = set()
    for _ in range(2000):
        chosen = rng.sample(names, rng.randint(0, 8))
        links = [(rng.choice(chosen), rng.choice(chosen)) for _ in range(rng.randint(0, 6))] if chosen else []
        prediction = {"entities": [{"id": n, "root_cause": rng.random() < 0.3} for n in chosen],
                      "propagations": [{"source": s, "target": t} for s, t in links]}
        r = scorer.score(prediction)
        for key in ("ntam_fl", "ntam_fpc"):
            assert 0.0 <= r[key] <= 1.0, (key, prediction)
        seen.add((round(r["ntam_fl"], 3), round(r["ntam_fpc"], 3)))
    assert len(seen) > 100  # the loop really explores distinct scores


def test_root_cause_owner_scores_above_an_unrelated_service() -> None:
    owner = ntam(SHOP_GT, pred(["cart"]), SHOP_TOPO)
    assert 0 < owner["ntam_fl"] < 1
    for unrelated in ("email", "payment", "shipping", "ads", "currency", "catalog", "recommendation", "postgres",
                      "loadgen"):
        other = ntam(SHOP_GT, pred([unrelated]), SHOP_TOPO)
        assert owner["ntam_fl"] > other["ntam_fl"], unrelated
        assert owner["ntam_fpc"] > other["ntam_fpc"], unrelated
    # The same holds with the rest of the chain right: blaming cart beats blaming email.
    symptoms = ["frontend", "gateway"]
    with_chain = ntam(SHOP_GT, pred(["cart"], symptoms, chain=["cart", *symptoms]), SHOP_TOPO)
    wrong = ntam(SHOP_GT, pred(["email"], symptoms, chain=["email", *symptoms]), SHOP_TOPO)
    assert with_chain["ntam_fl"] > wrong["ntam_fl"] and with_chain["ntam_fpc"] > wrong["ntam_fpc"]


def test_extra_far_away_entities_lower_the_score() -> None:
    exact = as_prediction(SHOP_GT)
    previous = ntam(SHOP_GT, exact, SHOP_TOPO)["ntam_fpc"]
    assert previous == 1.0
    for far in ("loadgen-1", "postgres-data", "email-1", "shipping-1"):
        exact["entities"].append({"id": far})
        score = ntam(SHOP_GT, exact, SHOP_TOPO)["ntam_fpc"]
        assert score < previous, far
        previous = score
    # For fault localisation, extra far-away root causes lower FL the same way.
    claimed = ["cart-1"]
    previous = 1.0
    for far in ("loadgen-1", "postgres-data", "email-1"):
        claimed.append(far)
        score = ntam(SHOP_GT, pred(claimed), SHOP_TOPO)["ntam_fl"]
        assert score < previous, far
        previous = score


def test_empty_prediction_scores_zero() -> None:
    for empty in ({"entities": []}, {"entities": [], "propagations": []}, {"incident": True, "entities": []}):
        r = ntam(SHOP_GT, empty, SHOP_TOPO)
        assert (r["ntam_fl"], r["ntam_fpc"], r["predicted_chains"]) == (0.0, 0.0, [])
    # Blaming no root cause scores 0 on FL, not on the chain.
    symptoms = ntam(SHOP_GT, pred([], ["frontend", "gateway"], chain=["frontend", "gateway"]), SHOP_TOPO)
    assert symptoms["ntam_fl"] == 0.0 and symptoms["ntam_fpc"] > 0


def test_unknown_names_are_reported_and_earn_nothing() -> None:
    r = ntam(SHOP_GT, pred(["mystery-db"]), SHOP_TOPO)
    assert (r["ntam_fl"], r["ntam_fpc"], r["unknown_entities"]) == (0.0, 0.0, ["mystery-db"])
    # ...but they still count in the chain length.
    exact = as_prediction(SHOP_GT)
    exact["entities"].append({"id": "Mystery-DB"})
    r = ntam(SHOP_GT, exact, SHOP_TOPO)
    assert r["unknown_entities"] == ["mystery-db"]
    assert r["ntam_fpc"] == pytest.approx(1 / math.sqrt(2))  # J = 5, I = 4: (|5 - 4| + 1) ** 0.5


def test_ground_truth_entity_outside_the_topology() -> None:
    truth = gt(["ghost"], ["A"], chain=["ghost", "A"])
    assert ntam(truth, as_prediction(truth), H1)["ntam_fpc"] == 1.0
    assert ntam(truth, pred(["A2"]), H1)["ntam_fl"] == 0.0  # infinitely far from the ghost


def test_healthy_control() -> None:
    healthy = {"apiVersion": "opsbench/v1", "kind": "GroundTruth", "scenario": "h", "incident": False, "entities": []}
    assert ntam(healthy, {"incident": False, "entities": []}, SHOP_TOPO)["ntam_fl"] == 1.0
    assert ntam(healthy, {"entities": []}, SHOP_TOPO)["ntam_fpc"] == 1.0
    assert ntam(healthy, {"incident": True, "entities": []}, SHOP_TOPO)["ntam_fl"] == 0.0
    blamed = ntam(healthy, pred(["cart"]), SHOP_TOPO)
    assert (blamed["ntam_fl"], blamed["ntam_fpc"]) == (0.0, 0.0)
    symptoms = ntam(healthy, pred([], ["frontend"]), SHOP_TOPO)
    assert (symptoms["ntam_fl"], symptoms["ntam_fpc"]) == (1.0, 0.0)


def test_ground_truth_without_a_root_cause_has_no_fault_localisation_score() -> None:
    truth = gt([], ["fe", "gw"], chain=["fe", "gw"])
    r = ntam(truth, as_prediction(truth), H2)
    assert (r["fl_ideal"], r["ntam_fl"], r["ntam_fpc"]) == (0.0, 0.0, 1.0)


def test_ratio_above_one_is_clipped() -> None:
    # m is owned by r, b and c (cheap to reach from all three), r calls ten more services (entering r
    # costs 1 * 13). With a tiny length penalty (c = 0.05) adding m raises S2 = max IFD more than
    # the penalty (|4 - 3| + 1) ** 0.05 costs, so S(G, O) > S(G, G); NTAM is clipped to 1.
    edges = [("r", "m", "owns"), ("b", "m", "owns"), ("c", "m", "owns")] + [("r", f"x{i}", "calls") for i in range(10)]
    truth = gt(["r"], ["b", "c"], chain=["r", "b", "c"])
    prediction = as_prediction(truth)
    prediction["entities"].append({"id": "m"})
    r = ntam(truth, prediction, topo(*edges), NtamParams(c=0.05))
    assert r["fpc_score"] > r["fpc_ideal"]
    assert r["ntam_fpc"] == 1.0


def test_prepared_scorer_matches_the_one_shot_call_and_is_deterministic() -> None:
    scorer = NtamScorer(SHOP_GT, TopologyGraph(SHOP_TOPO))
    prediction = pred(["cart"], ["frontend"], chain=["cart", "frontend"])
    assert scorer.score(prediction) == ntam(SHOP_GT, prediction, SHOP_TOPO) == scorer.score(prediction)
    json.dumps(scorer.score(prediction))  # plain JSON values


@pytest.mark.parametrize(
    ("topology", "prediction", "message"),
    [
        (topo(("a", "b", "depends")), pred(["a"]), "unknown topology edge type 'depends'"),
        ({"entities": [{"name": "a"}], "edges": []}, pred(["a"]), "topology entity without a string id"),
        (H1, [{"id": "a"}], "must be a mapping"),
        (H1, {"entities": [{"name": "a"}]}, "predicted entity without a string id"),
        (H1, {"entities": [], "propagations": [{"source": "a"}]}, "propagation without string source/target"),
    ],
)
def test_malformed_inputs_raise(topology: Any, prediction: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ntam(gt(["A2"]), prediction, topology)


# ------------------------------------------------------------------------------------------
# score_diagnosis reports NTAM
# ------------------------------------------------------------------------------------------


def test_score_diagnosis_reports_ntam(tmp_path: Path) -> None:
    out = tmp_path / "diagnosis.json"
    out.write_text(json.dumps(pred(["cart"])))
    with_topology = score_diagnosis(out, SHOP_GT, topology=SHOP_TOPO)
    expected = ntam(SHOP_GT, pred(["cart"]), SHOP_TOPO)
    assert (with_topology["ntam_fl"], with_topology["ntam_fpc"]) == (expected["ntam_fl"], expected["ntam_fpc"])
    assert with_topology["fl_pass"] == 0.0 and 0 < with_topology["ntam_fl"] < 1
    without = score_diagnosis(out, SHOP_GT)
    assert (without["status"], without["ntam_fl"], without["ntam_fpc"]) == ("scored", None, None)
    missing = score_diagnosis(tmp_path / "absent.json", SHOP_GT, topology=SHOP_TOPO)
    assert (missing["status"], missing["ntam_fl"], missing["ntam_fpc"]) == ("no_submission", 0.0, 0.0)
    out.write_text(json.dumps(as_prediction(SHOP_GT)))
    exact = score_diagnosis(out, SHOP_GT, topology=SHOP_TOPO, ntam_params=NtamParams(zeta=5))
    assert (exact["fl_pass"], exact["ntam_fl"], exact["ntam_fpc"]) == (1.0, 1.0, 1.0)
