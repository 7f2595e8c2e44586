"""Templates: scenario specs with a `vary` section, and the checks that make a bad one fail before anything is drawn.

A template stays a valid fixed scenario (the values written in it are one instance); `vary` names the fault whose
target is drawn from the environment's topology (by a predicate) and the fault arguments drawn from a range or a
list of choices, and may add distractors (benign changes off the derived chain), a start offset and a load level.
`variations` lists every draw a template allows, in a fixed order, so the generator can count the variation space
and draw from it reproducibly. A template without the optional sections has exactly the variations (and keys) it
had before they existed, so its instances stay byte-identical.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from orchestrator.argspecs import entry_options, role_dir
from orchestrator.errors import Problem, SpecInvalid
from orchestrator.generation.effects import (
    BenignModel,
    EffectModel,
    Topology,
    derive,
    has_effect_model,
    is_benign,
    load_benign_model,
    load_effect_model,
    unknown_alerts,
)
from orchestrator.role_topology import load_topology
from orchestrator.spec import Scenario

ALERT_RULE = re.compile(r"^\s*-\s*alert:\s*([A-Za-z0-9_]+)\s*$", re.M)
MAX_START_OFFSET = 240
"""Seconds (the schema's `timing.startOffsetSeconds` maximum): the handover waits them, under its idle limit (300 s)."""
LOADS: dict[str, tuple[str, int, int]] = {"env_shop": ("loadgen_rps", 2, 8)}
"""The load argument of an environment role and the loads generation may draw for it. Ansible argument specs have no
bounds, so they live here: 2 and 6 journeys/s are proven by fixed scenarios (ads GC pauses, the busy healthy
control), the default is 3, and 8 is the most two shared cores are asked to carry."""


@dataclass(frozen=True)
class Variation:
    """One draw: the target entity and the drawn arguments (fault name, argument, value)."""

    target: str
    args: tuple[tuple[str, str, Any], ...]
    source: str | None = None
    """The caller of `target` whose calls the fault hits, for a fault on one call path."""
    distractors: tuple[str, ...] = ()
    """The targets of the distractors drawn (`vary.distractors`), none by default."""
    offset: int | None = None
    """The start offset drawn (`vary.offset`), in seconds; None: the template draws none."""
    load: int | None = None
    """The load drawn (`vary.load`); None: the template draws none."""

    def key(self) -> str:
        """The draw in one string (ids hash it). The optional parts are added only when drawn, so the keys of a
        template without them are what they were before they existed."""
        where = f"{self.source}>{self.target}" if self.source else self.target
        return "|".join([where, *(f"{f}.{a}={v!r}" for f, a, v in self.args),
                         *(f"distractor={d}" for d in self.distractors),
                         *([f"offset={self.offset}"] if self.offset is not None else []),
                         *([f"load={self.load}"] if self.load is not None else [])])


def defined_alerts(scn: Scenario) -> set[str]:
    """Every alert name the environment's alert rules define (roles/<env role>/{templates,files}/alert_rules*)."""
    names: set[str] = set()
    for rules in sorted(role_dir(scn.environment_role).glob("*/alert_rules*")):
        names |= set(ALERT_RULE.findall(rules.read_text()))
    return names


def grid(low: float, high: float, step: float) -> list[float | int]:
    """The values of [low, high] on a grid of `step`, exact in decimal (0.01 + 0.02 is 0.03, not 0.0300...04)."""
    lo, hi, st = Decimal(str(low)), Decimal(str(high)), Decimal(str(step))
    count = int((hi - lo) / st) + 1
    values = [lo + i * st for i in range(count)]
    as_int = all(v == v.to_integral_value() for v in values) and float(step).is_integer()
    return [int(v) if as_int else float(v) for v in values]


def exclude_of(scn: Scenario) -> set[str]:
    return set(scn.data["vary"]["target"].get("exclude", []))


def role_choices(role: str, arg: str) -> list[Any] | None:
    """The values the fault role's argument spec allows for `arg` (None: any)."""
    options = entry_options(role, "inject")
    choices = options.get(f"{role}_{arg}", {}).get("choices")
    return list(choices) if choices else None


def fixed_distractors(scn: Scenario) -> set[str]:
    """The targets of the distractors a template writes among its faults (`distractor: true`, a benign role):
    never a drawn root cause."""
    out = set()
    for f in scn.faults:
        if f.get("distractor") and is_benign(f["role"]):
            out.add(str(f["args"].get(load_benign_model(f["role"]).target_arg)))
    return out


def candidate_targets(scn: Scenario, topo: Topology, model: EffectModel) -> list[str]:
    """The entities the predicate of `vary.target` matches that the fault role can take as its target (never one a
    distractor of the template acts on)."""
    target = scn.data["vary"]["target"]
    kinds = set(target.get("kinds") or model.target_kinds)
    exclude = exclude_of(scn) | topo.users | fixed_distractors(scn)
    called = target.get("called", True)
    # A role without a target argument acts on its one entity (still subject to the predicate).
    allowed = role_choices(model.role, model.target_arg) if model.target_arg else [model.target]
    return sorted(e for e, ent in topo.entities.items()
                  if ent.get("kind") in kinds and e not in exclude and (not called or topo.system_callers(e))
                  and (allowed is None or e in allowed))


@dataclass(frozen=True)
class Template:
    """A checked template: its scenario, the varied fault's effect model, the topology and every variation."""

    scenario: Scenario
    fault: dict[str, Any]
    model: EffectModel
    topology: Topology
    variations: list[Variation]
    distractor: BenignModel | None = None
    """The distractors' model, when the template draws distractors."""


def template_problems(scn: Scenario) -> list[Problem]:
    """What makes `scn`'s `vary` section unusable, each naming the template's file and field; [] when it is fine."""
    try:
        load_template(scn)
    except SpecInvalid as exc:
        return exc.problems
    return []


def load_template(scn: Scenario) -> Template:
    """`scn` as a template (a spec without `vary` is one with nothing to vary: its target is the one written)."""
    f = str(scn.path)
    vary = scn.data.get("vary")
    faults = {x["name"]: x for x in scn.faults}
    if vary is None:
        raise SpecInvalid([Problem(f, "$.vary", "not a template: the spec has no vary section")])
    name = vary["target"]["fault"]
    if name not in faults:
        raise SpecInvalid([Problem(f, "$.vary.target.fault", f"no fault named '{name}' in faults "
                                   f"(names: {', '.join(faults) or 'none'})")])
    fault = faults[name]
    if not has_effect_model(fault["role"]):
        raise SpecInvalid([Problem(f, "$.vary.target.fault", f"fault role {fault['role']} has no effect model "
                                   "(meta/effects.yml): its instances' ground truth cannot be derived")])
    model = load_effect_model(fault["role"])
    problems = unknown_alerts(model, defined_alerts(scn))
    data = load_topology(scn.data["environment"]["application"], scn.backend)
    if data is None:
        raise SpecInvalid([*problems, Problem(f, "$.environment.application",
                                             "the environment declares no topology: nothing to draw targets from")])
    topo = Topology(data)
    problems += topo.fact_problems(
        f"roles/env_{scn.data['environment']['application']}/files/topology.yml")
    targets = candidate_targets(scn, topo, model)
    if not targets:
        problems.append(Problem(f, "$.vary.target", f"the predicate matches no entity of the "
                                f"{scn.data['environment']['application']} topology (kinds "
                                f"{list(vary['target'].get('kinds') or model.target_kinds)}, called by a service: "
                                f"{vary['target'].get('called', True)}, excluded {vary['target'].get('exclude', [])})"))
    axes: list[list[tuple[str, str, Any]]] = []
    for i, arg in enumerate(vary.get("args", [])):
        where = f"$.vary.args[{i}]"
        if arg["fault"] not in faults:
            problems.append(Problem(f, f"{where}.fault", f"no fault named '{arg['fault']}' in faults"))
            continue
        if arg["fault"] == name and arg["arg"] in {model.target_arg, model.source_arg} - {None}:
            problems.append(Problem(f, f"{where}.arg", "the target is drawn by vary.target, not by args"))
            continue
        if ("range" in arg) == ("choices" in arg):
            problems.append(Problem(f, where, "give either range or choices"))
            continue
        if "range" in arg:
            low, high = arg["range"]
            if low > high:
                problems.append(Problem(f, f"{where}.range", f"inverted range [{low}, {high}]: low must not exceed "
                                        "high"))
                continue
            values: list[Any] = grid(low, high, arg.get("step", 1))
        else:
            values = list(arg["choices"])
        if not values:
            problems.append(Problem(f, where, "the range holds no value"))
            continue
        axes.append([(arg["fault"], arg["arg"], v) for v in values])
    distractor = _distractor_model(scn, problems)
    offsets = _drawn_numbers(scn, "offset", problems)
    loads = _drawn_numbers(scn, "load", problems)
    if problems:
        raise SpecInvalid(problems)
    places = [(None, t) for t in targets] if model.source_arg is None else [
        (s, t) for t in targets for s in topo.system_callers(t) if s not in exclude_of(scn)]
    variations = []
    for s, t in places:
        for combo in itertools.product(*axes):
            picks = distractor_picks(scn, distractor, model, topo, fault, t, s, combo) if distractor else [()]
            variations += [Variation(t, tuple(combo), s, picked, offset, load) for picked in picks
                           for offset in offsets for load in loads]
    if distractor and not variations:
        raise SpecInvalid([Problem(f, "$.vary.distractors", "no draw has a service outside its chain for the "
                                   f"{max(vary['distractors'].get('count', [0, 1]))} distractor(s) asked: give a "
                                   "count of 0 or fewer exclusions")])
    return Template(scn, fault, model, topo, variations, distractor)


def _distractor_model(scn: Scenario, problems: list[Problem]) -> BenignModel | None:
    """The model of `vary.distractors.role` (None: the template draws none); its problems appended."""
    spec = scn.data["vary"].get("distractors")
    if spec is None:
        return None
    f, role = str(scn.path), spec["role"]
    if not is_benign(role):
        problems.append(Problem(f, "$.vary.distractors.role", f"fault role {role} is not a distractor's role: its "
                                "effect model (meta/effects.yml) must say `benign: true`, or it would be a cause"))
        return None
    try:
        return load_benign_model(role)
    except SpecInvalid as exc:
        problems.extend(exc.problems)
        return None


def distractor_picks(scn: Scenario, model: BenignModel, cause: EffectModel, topo: Topology, fault: dict[str, Any],
                     target: str, source: str | None, combo: tuple[tuple[str, str, Any], ...]) -> list[tuple[str, ...]]:
    """The distractor targets a draw of the varied fault allows, for each count `vary.distractors` allows (the
    empty pick for a count of 0): services of the model's kinds its role accepts, never the root cause, and (with
    `exclude_chain`, the default) none the draw's derived ground truth names (its chain, a dependency it breaks)."""
    spec = scn.data["vary"]["distractors"]
    args = {**fault.get("args", {}), **{a: v for name, a, v in combo if name == fault["name"]}}
    if cause.target_arg:
        args[cause.target_arg] = target
    truth = derive(cause, target, topo, source, args)
    named = {e["id"] for e in truth["entities"]} if spec.get("exclude_chain", True) else {
        e["id"] for e in truth["entities"] if e.get("rootCause")}
    named |= {topo.service_of(e) for e in named} | {target, *([source] if source else [])} | fixed_distractors(scn)
    kinds = set(spec.get("kinds") or model.target_kinds)
    allowed = role_choices(model.role, model.target_arg)
    candidates = sorted(e for e, ent in topo.entities.items()
                        if ent.get("kind") in kinds and e not in named and e not in topo.users
                        and e not in set(spec.get("exclude", [])) and (allowed is None or e in allowed))
    return [pick for n in sorted(set(spec.get("count", [0, 1]))) for pick in itertools.combinations(candidates, n)]


def _drawn_numbers(scn: Scenario, section: str, problems: list[Problem]) -> list[Any]:
    """The values `vary.<section>` (offset or load) draws from ([None]: the template draws none), checked against
    their bounds; its problems appended."""
    spec = scn.data["vary"].get(section)
    if spec is None:
        return [None]
    f, where = str(scn.path), f"$.vary.{section}"
    if section == "offset":
        low, high, what = 0, MAX_START_OFFSET, "a start offset (seconds)"
    else:
        role = scn.environment_role
        if role not in LOADS:
            problems.append(Problem(f, where, f"the {scn.data['environment']['application']} environment "
                                    f"({role}) has no load to vary (loads are known for {', '.join(LOADS)})"))
            return []
        _arg, low, high = LOADS[role]
        what = f"a load ({role} {_arg})"
    if ("range" in spec) == ("choices" in spec):
        problems.append(Problem(f, where, "give either range or choices"))
        return []
    if "range" in spec:
        lo, hi = spec["range"]
        if lo > hi:
            problems.append(Problem(f, f"{where}.range", f"inverted range [{lo}, {hi}]: low must not exceed high"))
            return []
        values: list[Any] = grid(lo, hi, spec.get("step", 1))
    else:
        values = list(dict.fromkeys(spec["choices"]))
    bad = [v for v in values if not float(v).is_integer() or not low <= v <= high]
    if bad:
        problems.append(Problem(f, f"{where}.{'range' if 'range' in spec else 'choices'}",
                                f"{bad} outside {what}: whole numbers from {low} to {high}"))
        return []
    return [int(v) for v in values]
