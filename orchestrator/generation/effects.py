"""Effect models: what a fault mechanism does to its target and how that travels to the target's callers.

One per fault role, in ``roles/<role>/meta/effects.yml`` beside its argument spec. `derive` turns a model, a target
and the environment's topology into the incident's ground truth: the root-cause entity (the target's only instance,
or the service when it has several), its fault type and layer, the alerts expected on the target and on every
service on the shortest call paths from it to the entry (the service the load generator calls), and that chain.
A role that acts on one entity only names it (`target`) instead of an argument; a fault whose root cause is not the
entity that fails (a traffic source overloading it: `cause`) or that breaks the target's calls to a healthy
dependency (wrong credentials or address in the target's configuration: `dependency`) adds that first edge.
"""

from __future__ import annotations

import itertools
import math
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator.argspecs import role_dir
from orchestrator.errors import Problem, SpecInvalid
from orchestrator.schemacheck import json_path
from orchestrator.yamlfile import read_yaml

EFFECTS_FILE = Path("meta") / "effects.yml"
CALLER_ALERTS = {"errors": "ServiceErrorRateHigh", "latency": "ServiceLatencyHigh"}
ENTRY_ALERTS = {"errors": "CustomerErrorsHigh", "rejections": "CustomerErrorsHigh"}
"""What the entry service (the one users reach) shows: users see errors, not the entry's own latency alert."""
CALLER_EFFECTS = ("errors", "latency", "rejections")
"""`rejections`: 4xx answers (a rate limit's 429, a 404 from the wrong service) that callers pass on with their
status: no service's 5xx alert fires on the way, only the users' error alert at the entry."""
UNREADABLE = ("errors", "rejects", "passes", "ignores", "cached")
"""What a caller does with an answer it cannot read (a call edge's `unreadable` fact in the topology; an edge without
it keeps the model's caller effects and its `degrades` mark): answers 5xx; answers a 4xx its callers pass on with its
status; forwards it unread with a 200; does not use it; reads it only to refresh a cache once a minute (too few
failures for any alert)."""
EDGE_FACT_EFFECTS: dict[str, dict[str, tuple[str, ...] | None]] = {
    "unreadable": {"errors": None, "rejects": ("rejections",), "passes": (), "ignores": (), "cached": ()},
}
"""Per edge fact a model may follow (`source_edge`), what the source's answers become for each value: None keeps the
model's caller effects, a tuple replaces them (empty: nothing shows at the source or above it)."""
MODEL_FACTS = frozenset({"unreadable", "calls_per_request", "cpu_demand"})
"""Topology keys that only the effect models read (measured or read from the code, for deriving instances): the
deploy publishes the topology without them (env_shop's `env_shop_model_facts`), so agents see the application's
graph as before, not the generator's model of it."""
CALL_TIMEOUT_MS = 3000
"""How long a shop service waits for a call before it answers an error itself (the app's client timeout,
roles/env_shop/files/app/shop/client.py DEFAULT_TIMEOUT; tested to agree)."""
CALL_TIMEOUTS_MS = {("frontend", "checkout"): 10000}
"""Calls that wait longer: the frontend for checkout, which makes calls of its own (frontend.py CHECKOUT_TIMEOUT)."""
ENTRY_ERROR_SHARE = 0.05
"""The share of the users' requests that must fail for CustomerErrorsHigh (its rule: non-2xx over all > 0.05)."""
CALLER_ERROR_SHARE = 0.05
"""The share of a service's requests that must fail for ServiceErrorRateHigh (its rule: 5xx over all > 0.05)."""
ENTRY_SHARE_NEEDED = 1.5 * ENTRY_ERROR_SHARE
"""What a derivation asks of a fault whose only alert is the users' one: a margin of 1.5 over the rule's threshold,
since the rate over 15 s and the rule's `for` need the share above it all along, not on average."""
PASSED_ON = "{caller} passes the client error (4xx) of {target} on with its status"
REQUIRED = ("mechanism", "target_kinds", "fault_type", "layer", "target_alerts", "caller_effects", "condition",
            "effect")
BENIGN_REQUIRED = ("mechanism", "target_arg", "target_kinds")


@dataclass(frozen=True)
class EffectModel:
    role: str
    mechanism: str
    target_arg: str | None
    """The argument that names the target; None when the role acts on one entity only (`target`)."""
    target_kinds: tuple[str, ...]
    fault_type: str
    layer: str
    target_alerts: dict[str, list[str]]
    caller_effects: tuple[str, ...]
    condition: str
    effect: str
    mitigation: str
    resolution_steps: int
    source_arg: str | None = None
    """Set for a fault on one call path (a network fault): the argument naming the caller whose calls it hits."""
    travels: int | None = None
    """How many callers up the chain goes (None: up to the entry)."""
    alert_hops: int | None = None
    """How many callers up the effect raises alerts (None: as far as the chain goes)."""
    root_cause: str = "instance"
    """`instance`: the target's only instance is the root cause (the service when it has several); `service`: the
    service (a fault in its code or configuration, whatever instance serves)."""
    alerts_on: str = "instances"
    """Where target_alerts fire: on each of the target's `instances`, or on the `service`."""
    target: str | None = None
    """The entity a role without a target argument always acts on (the ads flag acts on ads)."""
    cause: str | None = None
    """The root cause when it is not the target: an entity that makes the target fail (a traffic source overloading
    it). The chain starts with cause -> target; cause_effect says what the target does."""
    cause_effect: str = "{target} fails"
    dependency: str | None = None
    """A healthy entity the target calls whose calls the fault breaks from the target's side (a wrong password in
    the target's configuration): the chain gains root cause -> dependency; the dependency raises no alert."""
    dependency_arg: str | None = None
    """The argument naming that dependency by address (`host[:port]`, the host an entity id), when the role takes
    it (a wrong upstream address); instead of `dependency`."""
    dependency_effect: str = "{target} calls to {dependency} fail"
    source_edge: str | None = None
    """For a fault on one call path: the call edge's fact (a key of EDGE_FACT_EFFECTS) that says what the source
    makes of the fault (tampered answers: `unreadable`). It decides the caller effects from the source up, instead of
    the edge's `degrades` mark (which is about a callee that fails, not one whose answers cannot be read)."""
    edge_effects: tuple[tuple[str, str], ...] = ()
    """The propagation's effect text per value of that fact, where it differs from `effect` (a 4xx, not errors)."""
    share_arg: str | None = None
    """A fault that hits a share of the calls on its path: the argument holding that share (0-1). Where the source
    answers a 4xx (`rejects`), only the users' error alert can show it, on the users' requests that reach the source:
    the share times the calls per request from the entry down to the source must reach ENTRY_SHARE_NEEDED."""
    quota_arg: str | None = None
    """A fault that caps a resource at a quota (CPU): the argument holding the quota, compared with the target's
    demand at the default load (the topology's `cpu_demand`, per instance)."""
    quota_margin: float = 2.0
    """A quota at or above quota_margin x the demand binds too rarely to slow the callers reliably: no caller effect
    is derived (shipping at 4.8 x and 9.5 x its demand fired once in two, however densely checkout calls it)."""

    def target_in(self, args: dict[str, Any]) -> str:
        """The target a fault with these arguments acts on."""
        return str(args[self.target_arg]) if self.target_arg else str(self.target)

    def dependency_in(self, args: dict[str, Any] | None) -> str | None:
        """The dependency a fault with these arguments breaks the target's calls to (None: none, or unknown)."""
        if self.dependency_arg:
            value = (args or {}).get(self.dependency_arg)
            return str(value).split("://")[-1].split(":")[0].split("/")[0] if value else None
        return self.dependency

    def alerts_for(self, tech: str | None) -> list[str]:
        return list(self.target_alerts.get(tech or "", self.target_alerts.get("default", [])))

    def alert_names(self) -> set[str]:
        names = {a for alerts in self.target_alerts.values() for a in alerts}
        names |= {CALLER_ALERTS[e] for e in self.caller_effects if e in CALLER_ALERTS}
        names |= {ENTRY_ALERTS[e] for e in self.caller_effects if e in ENTRY_ALERTS}
        return names


@dataclass(frozen=True)
class BenignModel:
    """The effect model of a distractor's role (`benign: true`): a visible change that is not a root cause and
    raises no lasting alert (what comes and goes while it acts, such as a recreated container's ContainerRestarted,
    is left out as the root-cause models leave it out). Nothing travels: no chain, no alert, no fault type."""

    role: str
    mechanism: str
    target_arg: str
    target_kinds: tuple[str, ...]

    def target_in(self, args: dict[str, Any]) -> str:
        return str(args[self.target_arg])


def effects_file(role: str) -> Path:
    return role_dir(role) / EFFECTS_FILE


def has_effect_model(role: str) -> bool:
    return effects_file(role).is_file()


def _model_data(role: str) -> tuple[Path, dict[str, Any]]:
    path = effects_file(role)
    if not path.is_file():
        raise SpecInvalid([Problem(str(path), "$", f"fault role {role} has no effect model: generation needs one "
                                   f"({EFFECTS_FILE} beside its argument spec)")])
    data = read_yaml(path)
    if not isinstance(data, dict):
        raise SpecInvalid([Problem(str(path), "$", "an effect model is a YAML mapping")])
    return path, data


def is_benign(role: str) -> bool:
    """Whether `role` is a distractor's role: its effect model says `benign: true`."""
    if not has_effect_model(role):
        return False
    data = read_yaml(effects_file(role))
    return isinstance(data, dict) and data.get("benign") is True


def load_benign_model(role: str) -> BenignModel:
    """The effect model of distractor role `role`; SpecInvalid naming the file and field when it is missing, not
    benign or incomplete."""
    path, data = _model_data(role)
    if data.get("benign") is not True:
        raise SpecInvalid([Problem(str(path), "$.benign", f"fault role {role} is not benign: a distractor's role "
                                   "says `benign: true` in its effect model (it raises no lasting alert)")])
    problems = [Problem(str(path), json_path((key,)), "required") for key in BENIGN_REQUIRED if key not in data]
    if not isinstance(data.get("target_kinds", []), list):
        problems.append(Problem(str(path), "$.target_kinds", "a list of entity kinds"))
    if problems:
        raise SpecInvalid(problems)
    return BenignModel(role=role, mechanism=str(data["mechanism"]), target_arg=str(data["target_arg"]),
                       target_kinds=tuple(data["target_kinds"]))


def load_effect_model(role: str) -> EffectModel:
    """The effect model of fault role `role`; SpecInvalid naming the file and field when it is missing or wrong."""
    path, data = _model_data(role)
    if data.get("benign") is True:
        raise SpecInvalid([Problem(str(path), "$.benign", f"fault role {role} is benign (a distractor): it is never "
                                   "a root cause, so no incident's ground truth derives from it")])
    problems = [Problem(str(path), json_path((key,)), "required") for key in REQUIRED if key not in data]
    if ("target_arg" in data) == ("target" in data):
        problems.append(Problem(str(path), "$.target_arg", "give either target_arg (the argument naming the target) "
                                "or target (the one entity the role acts on)"))
    if data.get("dependency") and data.get("dependency_arg"):
        problems.append(Problem(str(path), "$.dependency", "give either dependency or dependency_arg"))
    effects = data.get("caller_effects", [])
    if not isinstance(effects, list) or any(e not in CALLER_EFFECTS for e in effects):
        problems.append(Problem(str(path), "$.caller_effects", f"a list of {', '.join(CALLER_EFFECTS)}"))
    if data.get("source_edge") is not None and (data["source_edge"] not in EDGE_FACT_EFFECTS
                                                or not data.get("source_arg")):
        problems.append(Problem(str(path), "$.source_edge", f"one of {', '.join(EDGE_FACT_EFFECTS)}, for a model "
                                "with source_arg (a fault on one call path)"))
    margin = data.get("quota_margin")
    if margin is not None and (isinstance(margin, bool) or not isinstance(margin, int | float) or margin <= 0):
        problems.append(Problem(str(path), "$.quota_margin", "a positive number"))
    edge_effects = data.get("edge_effects") or {}
    if not isinstance(edge_effects, dict) or any(
            k not in UNREADABLE or not isinstance(v, str) for k, v in edge_effects.items()):
        problems.append(Problem(str(path), "$.edge_effects", f"a mapping of {', '.join(UNREADABLE)} to an effect text"))
    alerts = data.get("target_alerts", {})
    if not isinstance(alerts, dict) or "default" not in alerts or not all(
            isinstance(v, list) and all(isinstance(a, str) for a in v) for v in alerts.values()):
        problems.append(Problem(str(path), "$.target_alerts",
                                "a mapping of technology (and `default`) to a list of alert names"))
    if problems:
        raise SpecInvalid(problems)

    def opt(key: str) -> str | None:
        return str(data[key]) if data.get(key) else None

    return EffectModel(role=role, mechanism=str(data["mechanism"]), target_arg=opt("target_arg"),
                       target_kinds=tuple(data["target_kinds"]), fault_type=str(data["fault_type"]),
                       layer=str(data["layer"]), target_alerts={k: list(v) for k, v in alerts.items()},
                       caller_effects=tuple(effects), condition=str(data["condition"]), effect=str(data["effect"]),
                       mitigation=str(data.get("mitigation", "Remove the change that caused it")),
                       resolution_steps=int(data.get("resolution_steps", 1)),
                       source_arg=opt("source_arg"),
                       travels=int(data["travels"]) if data.get("travels") is not None else None,
                       alert_hops=int(data["alert_hops"]) if data.get("alert_hops") is not None else None,
                       root_cause=str(data.get("root_cause", "instance")),
                       alerts_on=str(data.get("alerts_on", "instances")), target=opt("target"),
                       cause=opt("cause"), cause_effect=str(data.get("cause_effect", EffectModel.cause_effect)),
                       dependency=opt("dependency"), dependency_arg=opt("dependency_arg"),
                       dependency_effect=str(data.get("dependency_effect", EffectModel.dependency_effect)),
                       source_edge=opt("source_edge"), share_arg=opt("share_arg"), quota_arg=opt("quota_arg"),
                       quota_margin=float(data.get("quota_margin", EffectModel.quota_margin)),
                       edge_effects=tuple(sorted((str(k), str(v)) for k, v in edge_effects.items())))


def unknown_alerts(model: EffectModel, defined: set[str]) -> list[Problem]:
    """The alerts `model` names that no alert rule of the environment defines."""
    own = {a for alerts in model.target_alerts.values() for a in alerts}
    return [Problem(str(effects_file(model.role)), "$.target_alerts" if name in own else "$.caller_effects",
                    f"names alert {name}, which no alert rule of the environment defines")
            for name in sorted(model.alert_names() - defined)]


def _number(value: Any) -> float | None:
    """`value` as a number >= 0, or None when it is not one."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        return None
    return float(value)


# -- topology ---------------------------------------------------------------------------------
class Topology:
    """The declared entities and edges of an environment (roles/env_*/files/topology.yml)."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.entities: dict[str, dict[str, Any]] = {e["id"]: e for e in data.get("entities", [])}
        edges = data.get("edges", [])
        self.data_edges: list[dict[str, Any]] = list(edges)
        self.data_entities: list[dict[str, Any]] = list(data.get("entities", []))
        self.owned: dict[str, list[str]] = {}
        self.callers: dict[str, list[str]] = {}
        # Calls whose caller degrades gracefully when the callee fails (the frontend renders a page without ads):
        # the callee's errors do not become the caller's.
        self.degrades = {(e["source"], e["target"]) for e in edges if e.get("type") == "calls" and e.get("degrades")}
        # What a caller does with an answer it cannot read (see UNREADABLE), per (caller, callee).
        self.unreadable: dict[tuple[str, str], str] = {
            (e["source"], e["target"]): str(e["unreadable"]) for e in edges
            if e.get("type") == "calls" and e.get("unreadable") is not None}
        # Measured at the default load (the topology's comment says how): calls per request of the caller's own, and
        # the CPU an instance of a service uses.
        self.calls: dict[tuple[str, str], float] = {
            (e["source"], e["target"]): float(e["calls_per_request"]) for e in edges
            if e.get("type") == "calls" and _number(e.get("calls_per_request")) is not None}
        self.cpu: dict[str, float] = {i: float(e["cpu_demand"]) for i, e in self.entities.items()
                                      if _number(e.get("cpu_demand")) is not None}
        for e in edges:
            if e.get("type") == "owns" and self.entities.get(e["target"], {}).get("kind") == "instance":
                self.owned.setdefault(e["source"], []).append(e["target"])
            elif e.get("type") == "calls":
                self.callers.setdefault(e["target"], []).append(e["source"])
        sources = {s for callers in self.callers.values() for s in callers}
        # Synthetic users call the entry; they are not part of the system under test.
        self.users = {s for s in sources if self.entities.get(s, {}).get("description", "").startswith("synthetic")}
        self.entries = sorted({t for t, callers in self.callers.items() if set(callers) & self.users})

    def fact_problems(self, path: str) -> list[Problem]:
        """The edge facts of this topology (read from `path`) that are not one of their values."""
        out = [Problem(path, f"$.edges[{i}].unreadable", f"'{e['unreadable']}' on {e['source']} -> {e['target']}: "
                       f"one of {', '.join(UNREADABLE)}")
               for i, e in enumerate(self.data_edges)
               if e.get("type") == "calls" and e.get("unreadable") is not None and e["unreadable"] not in UNREADABLE]
        out += [Problem(path, f"$.edges[{i}].calls_per_request", f"'{e['calls_per_request']}' on {e['source']} -> "
                        f"{e['target']}: a number >= 0")
                for i, e in enumerate(self.data_edges)
                if e.get("calls_per_request") is not None and _number(e["calls_per_request"]) is None]
        out += [Problem(path, f"$.entities[{i}].cpu_demand", f"'{e['cpu_demand']}' on {e.get('id')}: a number >= 0")
                for i, e in enumerate(self.data_entities)
                if e.get("cpu_demand") is not None and _number(e["cpu_demand"]) is None]
        return out

    def edge_fact(self, caller: str, callee: str, fact: str) -> str | None:
        """The value of edge fact `fact` on the call from `caller` to `callee` (None when the edge declares none)."""
        if fact == "unreadable":
            return self.unreadable.get((caller, callee))
        raise KeyError(fact)

    def kind(self, entity: str) -> str:
        return str(self.entities.get(entity, {}).get("kind", ""))

    def tech(self, entity: str) -> str | None:
        tech = self.entities.get(entity, {}).get("tech")
        return str(tech) if tech else None

    def instances(self, service: str) -> list[str]:
        return sorted(self.owned.get(service, []))

    def service_of(self, entity: str) -> str:
        """The service that owns `entity` (an instance), or `entity` itself."""
        return next((s for s, insts in self.owned.items() if entity in insts), entity)

    def system_callers(self, entity: str) -> list[str]:
        return sorted(c for c in self.callers.get(entity, []) if c not in self.users)

    def paths_to_entry(self, start: str) -> list[list[str]]:
        """Every shortest caller path from `start` up to an entry service (start first), by breadth-first search."""
        if start in self.entries:
            return [[start]]
        best: list[list[str]] = []
        queue: deque[list[str]] = deque([[start]])
        while queue:
            path = queue.popleft()
            if best and len(path) >= len(best[0]):
                break
            for caller in self.system_callers(path[-1]):
                if caller in path:
                    continue
                longer = [*path, caller]
                if caller in self.entries:
                    best.append(longer)
                else:
                    queue.append(longer)
        return best


def aliases(topo: Topology, entity: str) -> list[str]:
    """Names an agent may use for `entity`: its service or instances, and the usual spellings of a service name."""
    service = topo.service_of(entity)
    names = [n for n in [service, *topo.instances(service)] if n != entity]
    names += [f"{service} service", f"{service}service", f"{service}-service"]
    return list(dict.fromkeys(names))


def _quota_does_not_bind(model: EffectModel, service: str, topo: Topology, args: dict[str, Any] | None) -> bool:
    """Whether a quota fault's quota is too loose to show at the callers: at or above the model's margin over the
    service's measured demand per instance. Unknown demand or quota keep the model's caller effects."""
    quota = _number((args or {}).get(model.quota_arg)) if model.quota_arg else None
    demand = topo.cpu.get(service)
    return quota is not None and bool(demand) and quota >= model.quota_margin * (demand or 0.0)


def _users_share_too_small(model: EffectModel, topo: Topology, paths: list[list[str]],
                           args: dict[str, Any] | None) -> bool:
    """Whether the share of the users' requests a fault on one path fails (its share of the calls times the calls per
    request from the entry down to the source, on the likeliest path) stays under ENTRY_SHARE_NEEDED. Unknown share
    or calls per request keep the derivation as it is."""
    share = _number((args or {}).get(model.share_arg)) if model.share_arg else None
    if share is None or not paths:
        return False
    best = 0.0
    for path in paths:
        edges = [(caller, callee) for callee, caller in itertools.pairwise(path[1:])]
        if any(e not in topo.calls for e in edges):
            return False
        best = max(best, share * math.prod(topo.calls[e] for e in edges))
    return min(best, 1.0) < ENTRY_SHARE_NEEDED


def timeout_ms(caller: str, callee: str) -> int:
    return CALL_TIMEOUTS_MS.get((caller, callee), CALL_TIMEOUT_MS)


def delay_of(model: EffectModel, args: dict[str, Any]) -> float | None:
    """The delay (ms) a fault adds to each call, from the model's `delay_arg` (None: the model declares none)."""
    data = read_yaml(effects_file(model.role))
    arg = data.get("delay_arg") if isinstance(data, dict) else None
    return float(args[arg]) if arg and args.get(arg) is not None else None


def breaks_calls(model: EffectModel, target: str, topo: Topology, source: str | None, args: dict[str, Any]) -> bool:
    """Whether the fault makes the calls it reaches fail rather than only slow them: its callers see errors, or its
    delay passes the timeout of every caller it delays (then each answers an error itself)."""
    if "errors" in model.caller_effects:
        return True
    delay = delay_of(model, args)
    callers = [source] if source else topo.system_callers(target)
    return delay is not None and bool(callers) and all(delay > timeout_ms(c, target) for c in callers)


def _source_share_too_small(model: EffectModel, topo: Topology, source: str | None, walk: str,
                            carried: tuple[str, ...], args: dict[str, Any] | None) -> bool:
    """Whether a fault on one call path reaches too few of the source's requests for its own alert: the share of the
    calls it hits (its `share_arg`, else all) times the source's calls per request on the edge, under 0.05. That is
    ServiceErrorRateHigh's threshold (5xx over all) and the tail that ServiceLatencyHigh's p95 needs slowed. So an edge
    the source seldom calls shows nothing: recommendation refreshes its product list from catalog about once a
    minute (0.004 calls per request; an abort of 0.5 and a packet loss there never fired in 90 s, held-out draws of
    2026-12-05). Except a fault that fails every call on an edge marked `unreadable: cached` (errors, or a delay past
    the source's timeout): the source retries a failed refresh on its next request, so each request calls (a partition
    and delays of 4 and 6 s there showed in the dev split). No margin over the
    threshold, unlike the users' alert: aborts of 0.8 on frontend -> checkout (0.06 of the frontend's requests) fired
    in both dev-split instances that drew them. An unknown share or calls per request keeps the derivation."""
    if not source or not {"errors", "latency"} & set(carried):
        return False
    calls = topo.calls.get((source, walk))
    share = _number((args or {}).get(model.share_arg)) if model.share_arg else 1.0
    if calls is None or share is None:
        return False
    if (share >= 1.0 and topo.edge_fact(source, walk, "unreadable") == "cached"
            and breaks_calls(model, walk, topo, source, args or {})):  # errors, or a delay past the source's timeout
        return False
    return min(share * calls, 1.0) < CALLER_ERROR_SHARE


def _edge_effect(model: EffectModel, fact: str | None, carried: tuple[str, ...], first: bool) -> str:
    """The effect text of one propagation: the model's own, or for a model that follows an edge fact its text for
    that fact on the source's edge, and a passed-on 4xx above it."""
    if fact is None:
        return model.effect
    if first:
        return dict(model.edge_effects).get(fact, model.effect)
    return PASSED_ON if carried == ("rejections",) else model.effect

def derive(model: EffectModel, target: str, topo: Topology, source: str | None = None,
           args: dict[str, Any] | None = None) -> dict[str, Any]:
    """The ground-truth parts an instance of `model` on `target` implies: entities (with the root cause), alerts,
    propagations, faults, mitigations, evidence, and the propagation length and technologies of its chain. A
    fault on one call path (`source` calls `target`) travels from the target through that caller only. `args`
    (the fault's arguments) name the dependency of a model with `dependency_arg`. A target that is one instance of
    a service with several (a canary) is the root cause itself; the chain starts at its service."""
    walk = topo.service_of(target)
    instances = topo.instances(target) if walk == target else [target]
    own = instances[0] if len(instances) == 1 and model.root_cause == "instance" else target
    root = model.cause or own
    dependency = model.dependency_in(args)
    dependency = dependency if dependency in topo.entities else None  # an address no entity answers names none
    fill = {"target": target, "source": source or "", "cause": model.cause or "", "dependency": dependency or ""}
    on = instances if model.alerts_on == "instances" else [walk]
    alerts = [{"name": a, "entity": where} for a in model.alerts_for(topo.tech(walk)) for where in on]
    paths = [[walk, *p] for p in topo.paths_to_entry(source)] if source else topo.paths_to_entry(walk)
    # A fault on one call path whose model follows an edge fact (tampered answers: what the source does with an
    # answer it cannot read): that fact, not the edge's `degrades` mark, decides what the source answers; its answers
    # then travel up as any caller's errors (or 4xx) do.
    fact = topo.edge_fact(source, walk, model.source_edge) if source and model.source_edge else None
    carried = model.caller_effects
    if fact is not None and model.source_edge is not None:
        replaced = EDGE_FACT_EFFECTS[model.source_edge][fact]
        carried = model.caller_effects if replaced is None else replaced
    first_edge = (source, walk) if fact is not None else None
    silent = fact is not None and not carried
    if _quota_does_not_bind(model, walk, topo, args) or (
            carried == ("rejections",) and _users_share_too_small(model, topo, paths, args)) or (
            _source_share_too_small(model, topo, source, walk, carried, args)):
        carried, silent = (), True
    cut: list[list[str]] = []
    for path in paths:  # a caller that degrades gracefully ends the chain (and one that shows nothing of the fault)
        end = next((i + 2 for i in range(len(path) - 1)
                    if (path[i + 1], path[i]) in topo.degrades and (path[i + 1], path[i]) != first_edge), len(path))
        end = min(end, 2) if silent else end
        end = min(end, model.travels + 1) if model.travels is not None else end
        cut.append(path[:end])
    paths = list({tuple(p): p for p in cut}.values())
    chain: list[tuple[str, str]] = []
    for path in paths:
        for callee, caller in itertools.pairwise(path):
            if (callee, caller) not in chain:
                chain.append((callee, caller))
    on_path = list(dict.fromkeys(s for path in paths for s in path[1:]))
    hops = {s: min(p.index(s) for p in paths if s in p) for s in on_path}
    for callee, service in chain:
        if model.alert_hops is not None and hops[service] > model.alert_hops:
            continue
        effects = [e for e in carried
                   if e == "latency" or (service, callee) not in topo.degrades or (service, callee) == first_edge]
        table = ENTRY_ALERTS if service in topo.entries and service != source else CALLER_ALERTS
        alerts += [{"name": table[e], "entity": service} for e in effects
                   if e in table and {"name": table[e], "entity": service} not in alerts]
    # The first edges of a fault whose root cause is not the failing target, or that breaks the target's calls to a
    # healthy dependency: both start at the root cause, with the model's condition.
    first = [(root, target, model.cause_effect)] if model.cause else []
    first += [(root, dependency, model.dependency_effect)] if dependency else []
    involved = [e for e in dict.fromkeys([*(t for _r, t, _e in first), *on_path]) if e != root]
    entities = [{"id": root, "aliases": aliases(topo, root), "rootCause": True, "layer": model.layer,
                 "faultType": model.fault_type}]
    entities += [{"id": s, "aliases": aliases(topo, s)} for s in involved]
    propagations = [{"source": src, "target": dst, "condition": model.condition.format(**fill),
                     "effect": effect.format(**fill)} for src, dst, effect in first]
    propagations += [{"source": own if callee == walk else callee, "target": caller,
                      "condition": model.condition.format(**fill) if callee == walk and not model.cause
                      else f"{callee} fails",
                      "effect": _edge_effect(model, fact, carried, (caller, callee) == first_edge).format(
                          **{**fill, "caller": caller, "target": callee})}
                     for callee, caller in chain]
    techs = sorted({t for s in [walk, *involved, root] if (t := topo.tech(s))} | {"podman"})
    return {
        "alerts": alerts,
        "evidence": sorted({f"alert:{a['name']}" for a in alerts}),
        "entities": entities,
        "propagations": propagations,
        "faults": [{"entity": root, "mechanism": model.mechanism}],
        "mitigations": [{"description": model.mitigation.format(**fill) + "; the alerts resolve.",
                         "actions": [model.mitigation.format(**fill).lower()]}],
        "propagation_length": (1 + len(on_path) if paths else 1) + (1 if model.cause else 0),
        "technologies": techs,
    }
