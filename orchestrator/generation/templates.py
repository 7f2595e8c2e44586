"""Templates: scenario specs with a `vary` section, and the checks that make a bad one fail before anything is drawn.

A template stays a valid fixed scenario (the values written in it are one instance); `vary` names the fault whose
target is drawn from the environment's topology (by a predicate) and the fault arguments drawn from a range or a
list of choices. `variations` lists every draw a template allows, in a fixed order, so the generator can count the
variation space and draw from it reproducibly.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from orchestrator.argspecs import entry_options, role_dir
from orchestrator.errors import Problem, SpecInvalid
from orchestrator.generation.effects import EffectModel, Topology, has_effect_model, load_effect_model, unknown_alerts
from orchestrator.role_topology import load_topology
from orchestrator.spec import Scenario

ALERT_RULE = re.compile(r"^\s*-\s*alert:\s*([A-Za-z0-9_]+)\s*$", re.M)


@dataclass(frozen=True)
class Variation:
    """One draw: the target entity and the drawn arguments (fault name, argument, value)."""

    target: str
    args: tuple[tuple[str, str, Any], ...]
    source: str | None = None
    """The caller of `target` whose calls the fault hits, for a fault on one call path."""

    def key(self) -> str:
        where = f"{self.source}>{self.target}" if self.source else self.target
        return "|".join([where, *(f"{f}.{a}={v!r}" for f, a, v in self.args)])


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


def candidate_targets(scn: Scenario, topo: Topology, model: EffectModel) -> list[str]:
    """The entities the predicate of `vary.target` matches that the fault role can take as its target."""
    target = scn.data["vary"]["target"]
    kinds = set(target.get("kinds") or model.target_kinds)
    exclude = exclude_of(scn) | topo.users
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
    if problems:
        raise SpecInvalid(problems)
    places = [(None, t) for t in targets] if model.source_arg is None else [
        (s, t) for t in targets for s in topo.system_callers(t) if s not in exclude_of(scn)]
    variations = [Variation(t, tuple(combo), s) for s, t in places for combo in itertools.product(*axes)]
    return Template(scn, fault, model, topo, variations)
