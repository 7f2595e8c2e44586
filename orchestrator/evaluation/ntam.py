"""NTAM, the Normalized Topology-Aware Match of ITBench (Jha et al., 2025, Appendix F).

Scores a diagnosis (the entities an agent blames and how it says the fault spread) against the
ground truth on the environment's topology, giving partial credit for entities that are close
to the true ones. Two scores, both in [0, 1]:

* ``ntam_fpc``: the fault propagation chains (App. F.2, ``NTAM = S(G, O) / S(G, G)``);
* ``ntam_fl``: fault localisation, the same formula on the root-cause entities only (App. F.3).

Deterministic and pure Python. ``docs/evaluation.md`` gives every formula and the reading this
module takes wherever the paper is ambiguous; the comments marked ``Reading:`` below are those
choices, where they are made.

Public API: :func:`ntam` (one call), :class:`NtamScorer` (prepare a ground truth and topology
once, score many predictions), :class:`NtamParams` (Table 33's parameters as defaults).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

OWNS = "owns"
CALLS = "calls"
EDGE_TYPES = (OWNS, CALLS)


@dataclass(frozen=True)
class NtamParams:
    """NTAM's hyper-parameters; the defaults are the values of ITBench Table 33.

    ``alpha``: exponent of the max ITD term (S1, S3); ``beta``: exponent of the max IFD term
    (S2, S4); ``gamma``: power of the entity importance GI; ``delta``: distance penalisation
    exponent; ``c``: chain-length mismatch penalty exponent; ``d``: number-of-chains mismatch
    penalty exponent; ``zeta``: cost of a ``calls`` edge relative to an ``owns`` edge (cost 1).
    All must be finite and > 0 (the paper requires positive values).
    """

    alpha: float = 1.0
    beta: float = 1.0
    gamma: float = 1.0
    delta: float = 0.289
    c: float = 0.5
    d: float = 0.5
    zeta: float = 2.1

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) \
                    or value <= 0:
                raise ValueError(f"NtamParams.{f.name} must be a finite number > 0, got {value!r}")

    def edge_cost(self, edge_type: str) -> float:
        """cost(edge type): ``owns`` = 1, ``calls`` = zeta (App. F.1.3)."""
        if edge_type == OWNS:
            return 1.0
        if edge_type == CALLS:
            return float(self.zeta)
        raise ValueError(f"unknown topology edge type {edge_type!r} (expected one of {', '.join(EDGE_TYPES)})")


# --------------------------------------------------------------------------------------------
# Topology: subtree sizes and the topology distance TD
# --------------------------------------------------------------------------------------------


class TopologyGraph:
    """The topology T: entities and typed edges (``{"entities": [{"id"}], "edges": [{"source",
    "target", "type"}]}``, the format of ``roles/env_*/files/topology.yml``)."""

    def __init__(self, topology: Mapping[str, Any]) -> None:
        if not isinstance(topology, Mapping):
            raise ValueError("topology must be a mapping with 'entities' and 'edges'")
        nodes: dict[str, None] = {}
        for ent in topology.get("entities") or []:
            if not isinstance(ent, Mapping) or not isinstance(ent.get("id"), str):
                raise ValueError(f"topology entity without a string id: {ent!r}")
            nodes[ent["id"]] = None
        children: dict[str, set[str]] = {}
        links: dict[str, list[tuple[str, str]]] = {}
        for edge in topology.get("edges") or []:
            if not isinstance(edge, Mapping):
                raise ValueError(f"topology edge is not a mapping: {edge!r}")
            src, dst, etype = edge.get("source"), edge.get("target"), edge.get("type")
            if not isinstance(src, str) or not isinstance(dst, str):
                raise ValueError(f"topology edge without string source/target: {dict(edge)!r}")
            if etype not in EDGE_TYPES:
                raise ValueError(f"unknown topology edge type {etype!r} in {src} -> {dst} "
                                 f"(expected one of {', '.join(EDGE_TYPES)})")
            nodes.setdefault(src, None)
            nodes.setdefault(dst, None)
            if src == dst:
                continue  # a self-loop changes neither a subtree nor a shortest path
            children.setdefault(src, set()).add(dst)
            # Reading: TD is measured on the undirected graph (the paper's Figure 30 example
            # moves from a pod to the deployment that owns it, against the edge direction).
            links.setdefault(src, []).append((dst, etype))
            links.setdefault(dst, []).append((src, etype))
        self.nodes: tuple[str, ...] = tuple(nodes)
        self.children = children
        self.links = links
        self.subtree_size: dict[str, int] = _subtree_sizes(self.nodes, children)
        self.by_casefold: dict[str, str] = {}
        for node in self.nodes:
            self.by_casefold.setdefault(node.casefold(), node)
        self._weighted: dict[float, dict[str, list[tuple[str, float]]]] = {}

    def weighted_links(self, params: NtamParams) -> dict[str, list[tuple[str, float]]]:
        """For every node x, its neighbours y with the cost of stepping x -> y:
        ``cost(x, y) = cost(edge_type(x, y)) * subtree_size(y)`` (App. F.1.3)."""
        key = float(params.zeta)
        if key not in self._weighted:
            weighted: dict[str, list[tuple[str, float]]] = {}
            for x, neighbours in self.links.items():
                best: dict[str, float] = {}
                for y, etype in neighbours:
                    # Reading: y is the node the path steps into, walking from the ground-truth
                    # entity towards the predicted one. So the predicted node's own subtree size
                    # counts, as in the paper's example (A5, which calls only A2, is closer to A2
                    # than A6, which calls A2 and A7). With several edges between x and y the
                    # cheapest one is used.
                    cost = params.edge_cost(etype) * self.subtree_size[y]
                    best[y] = min(cost, best.get(y, math.inf))
                weighted[x] = list(best.items())
            self._weighted[key] = weighted
        return self._weighted[key]

    def distances(self, source: str, params: NtamParams) -> dict[str, float]:
        """TD(source, y) for every y reachable from ``source``: the shortest path in T weighted by
        the edge costs (Dijkstra); ``TD(x, x) = 0``. Nodes absent from the result are unreachable
        (TD = infinity). ``source`` need not be a topology node (then only TD(source, source))."""
        links = self.weighted_links(params)
        dist: dict[str, float] = {source: 0.0}
        done: set[str] = set()
        heap: list[tuple[float, str]] = [(0.0, source)]
        while heap:
            d, x = heapq.heappop(heap)
            if x in done:
                continue
            done.add(x)
            for y, cost in links.get(x, ()):
                nd = d + cost
                if nd < dist.get(y, math.inf):
                    dist[y] = nd
                    heapq.heappush(heap, (nd, y))
        return dist


def _subtree_sizes(nodes: Sequence[str], children: Mapping[str, set[str]]) -> dict[str, int]:
    """subtree_size(y) = number of nodes reachable from y along directed edges (both types),
    y included.

    Reading: the paper's "sub-tree" of y is everything below y (A6 "calls both A2 and A7", a
    deployment owns its replica sets and pods); y itself is counted so a leaf has size 1 and every
    edge cost stays positive. Reachable sets, not tree unfoldings, so shared descendants and
    cycles count once. Computed with Tarjan's strongly connected components and bitsets, in
    O(V + E) set unions.
    """
    bit = {node: 1 << i for i, node in enumerate(nodes)}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    comp_of: dict[str, int] = {}
    reach: list[int] = []  # per component, in Tarjan's emission order (reverse topological)
    counter = 0
    for start in nodes:
        if start in index:
            continue
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        work: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(children.get(start, ()))))]
        while work:
            v, it = work[-1]
            descended = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(children.get(w, ())))))
                    descended = True
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            if descended:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[v])
            if low[v] == index[v]:
                members = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp_of[w] = len(reach)
                    members.append(w)
                    if w == v:
                        break
                mask = 0
                for m in members:
                    mask |= bit[m]
                # Components reachable from this one were all emitted before it.
                for m in members:
                    for child in children.get(m, ()):
                        if child not in members:
                            mask |= reach[comp_of[child]]
                reach.append(mask)
    return {node: reach[comp_of[node]].bit_count() for node in nodes}


# --------------------------------------------------------------------------------------------
# Fault propagation chains
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Chain:
    """One unordered fault propagation chain FP: its entities, its root causes R and the level
    of every entity (root causes at level K, K = number of levels)."""

    entities: tuple[str, ...]
    roots: tuple[str, ...]
    levels: Mapping[str, int]
    K: int

    def importance(self, entity: str, gamma: float) -> float:
        """GI(g) = ((K + 1) / (K - k + 1)) ** gamma with k = level(g) (App. F.1.1)."""
        k = self.levels[entity]
        return float(((self.K + 1) / (self.K - k + 1)) ** gamma)


def build_chains(entities: Sequence[tuple[str, bool]], propagations: Sequence[tuple[str, str]]) -> list[Chain]:
    """Split a diagnosis (entity ids with a root-cause flag, propagation edges source -> target)
    into chains. The same rules apply to the ground truth and to a prediction.

    Reading (our ground truth and agent output list entities and propagation edges, not chains):

    * the chain entities are the listed entities plus every propagation endpoint (root cause if
      any listing of it says so);
    * a chain is a weakly connected component of the propagation graph; entities on no
      propagation join the chain when there is exactly one, form the only chain when there are
      no propagations, and form one extra chain together when there are several (they cannot be
      attributed to one of them);
    * levels: the depth of an entity is its hop count along propagations (in their direction)
      from the nearest root cause of its chain (from the chain's sources, entities with no
      incoming propagation, when it has no root cause); entities no such path reaches sit one
      level below the deepest reached entity. K = 1 + the largest depth and level = K - depth, so
      root causes are at level K and the farthest symptoms at level 1.
    """
    is_root: dict[str, bool] = {}
    for name, root in entities:
        is_root[name] = is_root.get(name, False) or bool(root)
    edges = [(s, t) for s, t in propagations]
    for s, t in edges:
        is_root.setdefault(s, False)
        is_root.setdefault(t, False)

    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for s, t in edges:
        parent.setdefault(s, s)
        parent.setdefault(t, t)
        rs, rt = find(s), find(t)
        if rs != rt:
            parent[rt] = rs
    groups: dict[str, list[str]] = {}
    isolated: list[str] = []
    for name in is_root:  # first-seen order, so the result is deterministic
        if name in parent:
            groups.setdefault(find(name), []).append(name)
        else:
            isolated.append(name)
    members = list(groups.values())
    if isolated:
        if len(members) == 1:
            members[0].extend(isolated)
        else:
            members.append(isolated)

    chains = []
    for group in members:
        inside = set(group)
        out: dict[str, list[str]] = {}
        has_incoming: set[str] = set()
        on_edge: set[str] = set()
        for s, t in edges:
            if s in inside and s != t:
                out.setdefault(s, []).append(t)
                has_incoming.add(t)
                on_edge.update((s, t))
        roots = [g for g in group if is_root[g]]
        origins = roots or [g for g in group if g in on_edge and g not in has_incoming] \
            or [g for g in group if g in on_edge] or list(group)
        depth = dict.fromkeys(origins, 0)
        frontier = list(origins)
        while frontier:
            nxt = []
            for x in frontier:
                for y in out.get(x, ()):
                    if y not in depth:
                        depth[y] = depth[x] + 1
                        nxt.append(y)
            frontier = nxt
        deepest = max(depth.values())
        for g in group:
            depth.setdefault(g, deepest + 1)
        K = 1 + max(depth.values())
        chains.append(Chain(entities=tuple(group), roots=tuple(roots),
                            levels={g: K - depth[g] for g in group}, K=K))
    return chains


# --------------------------------------------------------------------------------------------
# Names
# --------------------------------------------------------------------------------------------


def ground_truth_names(ground_truth: Mapping[str, Any]) -> dict[str, str]:
    """Every name the ground truth accepts (entity ids and aliases, case-folded) -> entity id.
    On a collision the entity listed later wins (the rule ``fl_pass`` has always used)."""
    names: dict[str, str] = {}
    for ent in ground_truth.get("entities") or []:
        for name in [ent["id"], *(ent.get("aliases") or [])]:
            names[name.casefold()] = ent["id"]
    return names


def name_resolver(ground_truth: Mapping[str, Any], graph: TopologyGraph) -> dict[str, str]:
    """Case-folded name -> topology id: the ground truth's ids and aliases first (so ``fl_pass``
    and NTAM resolve a name alike), then the topology's own ids, case-insensitively."""
    return {**graph.by_casefold, **ground_truth_names(ground_truth)}


# --------------------------------------------------------------------------------------------
# Scoring
# --------------------------------------------------------------------------------------------


def _max(values: Iterable[float]) -> float:
    """max over an empty set is 0: a missing prediction earns nothing."""
    return max(values, default=0.0)


class NtamScorer:
    """A ground truth and topology prepared once (chains, importances, distances, the ideal
    scores S(G, G)); :meth:`score` then scores predictions against them.

    ``ground_truth``: a ground-truth document (``orchestrator/schemas/ground_truth.schema.json``);
    ``topology``: ``{"entities", "edges"}`` or a prepared :class:`TopologyGraph`;
    ``params``: :class:`NtamParams` (default: Table 33).
    """

    def __init__(self, ground_truth: Mapping[str, Any], topology: Mapping[str, Any] | TopologyGraph,
                 params: NtamParams | None = None) -> None:
        self.params = params or NtamParams()
        self.graph = topology if isinstance(topology, TopologyGraph) else TopologyGraph(topology)
        self.names = name_resolver(ground_truth, self.graph)
        self.incident = ground_truth.get("incident", True) is not False
        # The ground truth's own ids are used as they are; a propagation endpoint that is not an
        # id (of the ground truth or the topology) is resolved like a predicted name.
        ids = {e["id"] for e in ground_truth.get("entities") or []} | set(self.graph.nodes)
        self.truth = build_chains(
            [(e["id"], bool(e.get("rootCause"))) for e in ground_truth.get("entities") or []],
            [(end if end in ids else self._resolve(end), other if other in ids else self._resolve(other))
             for end, other in ((p["source"], p["target"]) for p in ground_truth.get("propagations") or [])],
        )
        delta, gamma = self.params.delta, self.params.gamma
        # closeness[g][o] = (1 / (TD(g, o) + 1)) ** delta; absent o: TD infinite, closeness 0.
        self._closeness: dict[str, dict[str, float]] = {}
        self._gi: list[dict[str, float]] = []
        for chain in self.truth:
            self._gi.append({g: chain.importance(g, gamma) for g in chain.entities})
            for g in chain.entities:
                if g not in self._closeness:
                    self._closeness[g] = {o: (1.0 / (td + 1.0)) ** delta
                                          for o, td in self.graph.distances(g, self.params).items()}
        # Reading: the ideals S(G, G) and S_FL(G, G) are the same function with the ground truth as
        # the prediction (the paper's FL denominator "sum_p max_P S(R_p, R_p)" mirrors max_Q).
        self.ideal_fpc, self.ideal_fl = self._scores(self.truth)
        self._known = frozenset(self.graph.nodes) | frozenset(self._closeness)

    def _resolve(self, name: str) -> str:
        if not isinstance(name, str):
            raise ValueError(f"entity names must be strings, got {name!r}")
        folded = name.casefold()
        return self.names.get(folded, folded)

    def itd(self, p: int, g: str, o: str) -> float:
        """ITD_wt(g, o) = GI(g) * (1 / (TD(g, o) + 1)) ** delta for entity g of ground-truth chain p."""
        return self._gi[p][g] * self._closeness[g].get(o, 0.0)

    def ifd(self, p: int, o: str) -> float:
        """IFD_wt(FP_p, o) = (1 / I) * sum over g in FP_p of ITD_wt(g, o)."""
        chain = self.truth[p].entities
        return math.fsum(self.itd(p, g, o) for g in chain) / len(chain)

    def pair_score(self, p: int, targets: Sequence[str], predicted: Sequence[str],
                   ifd_cache: dict[tuple[int, str], float] | None = None) -> float:
        """Eq. (7) for ``targets`` ⊆ FP_p against ``predicted``:
        ``sum_i (max_j ITD(g_i, o_j)) ** alpha * (max_j IFD(FP_p, o_j)) ** beta / (|J - I| + 1) ** c``.
        With ``targets`` = FP_p and ``predicted`` = FP'_q it is S(FP_p, FP'_q) (App. F.2.3); with
        the root causes R_p and R'_q it is S(R_p, R'_q) (App. F.3), where IFD still runs over the
        whole chain FP_p as the paper writes S4."""
        if not targets or not predicted:
            return 0.0
        a, b, c = self.params.alpha, self.params.beta, self.params.c
        cache = {} if ifd_cache is None else ifd_cache
        best_ifd = 0.0
        for o in predicted:
            key = (p, o)
            if key not in cache:
                cache[key] = self.ifd(p, o)
            best_ifd = max(best_ifd, cache[key])
        s1 = math.fsum(_max(self.itd(p, g, o) for o in predicted) ** a for g in targets)
        return float(s1 * best_ifd ** b / (abs(len(predicted) - len(targets)) + 1) ** c)

    def _scores(self, predicted: Sequence[Chain]) -> tuple[float, float]:
        """(S(G, O), S_FL(G, O)): for each ground-truth chain the best predicted chain, over the
        chain-count penalty ``(|P - Q| + 1) ** d`` (App. F.2.4 and F.3)."""
        count_penalty = float((abs(len(self.truth) - len(predicted)) + 1) ** self.params.d)
        cache: dict[tuple[int, str], float] = {}
        fpc = fl = 0.0
        for p, chain in enumerate(self.truth):
            fpc += _max(self.pair_score(p, chain.entities, q.entities, cache) for q in predicted) / count_penalty
            fl += _max(self.pair_score(p, chain.roots, q.roots, cache) for q in predicted) / count_penalty
        return fpc, fl

    def prediction_chains(self, prediction: Mapping[str, Any]) -> list[Chain]:
        """The chains of an agent output (``orchestrator/schemas/diagnosis_output.schema.json``),
        names resolved to topology ids."""
        if not isinstance(prediction, Mapping):
            raise ValueError("the prediction must be a mapping (a diagnosis output)")
        ents, props = prediction.get("entities") or [], prediction.get("propagations") or []
        if not isinstance(ents, list) or not isinstance(props, list):
            raise ValueError("the prediction's entities and propagations must be lists")
        for e in ents:
            if not isinstance(e, Mapping) or not isinstance(e.get("id"), str):
                raise ValueError(f"predicted entity without a string id: {e!r}")
        for p in props:
            if not isinstance(p, Mapping) or not isinstance(p.get("source"), str) \
                    or not isinstance(p.get("target"), str):
                raise ValueError(f"predicted propagation without string source/target: {p!r}")
        return build_chains([(self._resolve(e["id"]), e.get("root_cause") is True) for e in ents],
                            [(self._resolve(p["source"]), self._resolve(p["target"])) for p in props])

    def score(self, prediction: Mapping[str, Any]) -> dict[str, Any]:
        """Score one agent output. Returns ``ntam_fl`` and ``ntam_fpc`` (in [0, 1]), the raw
        scores and their ideals (``fl_score``/``fl_ideal``, ``fpc_score``/``fpc_ideal``), the
        predicted chains (lists of topology ids) and the predicted names that are neither
        topology ids nor ground-truth names (``unknown_entities``: they can only hurt)."""
        chains = self.prediction_chains(prediction)
        unknown = sorted({e for q in chains for e in q.entities if e not in self._known})
        result: dict[str, Any] = {"predicted_chains": [list(q.entities) for q in chains],
                                  "unknown_entities": unknown}
        if not self.incident:
            # OpsBench extension (the paper has no healthy controls): right only when nothing is
            # blamed and no incident is asserted, as for fl_pass; the chains must be empty too.
            says_none = prediction.get("incident") is not True
            fl_ok = says_none and not any(q.roots for q in chains)
            fpc_ok = says_none and not chains
            return {**result, "ntam_fl": float(fl_ok), "ntam_fpc": float(fpc_ok),
                    "fl_score": float(fl_ok), "fl_ideal": 1.0, "fpc_score": float(fpc_ok), "fpc_ideal": 1.0}
        fpc, fl = self._scores(chains)
        return {**result, "ntam_fl": _normalise(fl, self.ideal_fl), "ntam_fpc": _normalise(fpc, self.ideal_fpc),
                "fl_score": fl, "fl_ideal": self.ideal_fl, "fpc_score": fpc, "fpc_ideal": self.ideal_fpc}


def _normalise(score: float, ideal: float) -> float:
    """NTAM = S(G, O) / S(G, G), clipped to [0, 1].

    Reading: the paper states the ratio lies in [0, 1]. It can exceed 1 only in corner cases
    (the IFD maximiser S2 need not be a ground-truth entity), so the ratio is clipped. A ground
    truth with nothing to score (S(G, G) = 0, e.g. no root cause for FL) scores 0.
    """
    if ideal <= 0.0:
        return 0.0
    return min(1.0, max(0.0, score / ideal))


def ntam(ground_truth: dict[str, Any], prediction: dict[str, Any], topology: dict[str, Any],
         params: NtamParams | None = None) -> dict[str, Any]:
    """NTAM scores of one agent output (ITBench App. F).

    ``ground_truth``: a ground-truth document (entities with ``aliases``/``rootCause``,
    ``propagations``); ``prediction``: an agent's diagnosis output (``entities`` with
    ``root_cause``, ``propagations``); ``topology``: ``{"entities": [{"id"}], "edges":
    [{"source", "target", "type": "owns"|"calls"}]}``; ``params``: default Table 33.

    Returns at least ``{"ntam_fl": float, "ntam_fpc": float}``, both in [0, 1] (1: a perfect
    match), plus the details listed in :meth:`NtamScorer.score`. Predicted names are mapped to
    topology ids through the ground truth's ids and aliases, then the topology's ids, all
    case-insensitively. Raises ``ValueError`` on a malformed topology or prediction.
    To score many predictions against one ground truth, build an :class:`NtamScorer` once.
    """
    return NtamScorer(ground_truth, topology, params).score(prediction)
