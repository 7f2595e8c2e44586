"""Instances: fixed scenarios drawn from templates, each with a ground truth derived from its effect model.

Deterministic: the same templates, seed and count give byte-identical files. An instance's id is opaque
(``inc-`` and 12 hex digits of a hash of the seed, the template and the draw), and nothing an agent can read
(its id, name, description, task goals, fault names, file names) carries the template, the mechanism or a fault
word. Two draws that make the same incident (the same faults with the same arguments on the same environment,
from two templates) are one instance: the later is dropped and reported.
"""

from __future__ import annotations

import copy
import hashlib
import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from orchestrator.argspecs import entry_options
from orchestrator.complexity import complexity_level, complexity_value
from orchestrator.errors import OpsBenchError, Problem, SpecInvalid
from orchestrator.generation import journeys
from orchestrator.generation.effects import CALLER_ALERTS, ENTRY_ALERTS, Topology, aliases, derive, load_benign_model
from orchestrator.generation.templates import LOADS, Template, Variation

GOALS = {
    "diagnose": ("Users of the {app} report problems. Find the root-cause entity and explain how the failure "
                 "propagates to what users see."),
    "mitigate": ("Users of the {app} report problems. Bring it back to health: every alert must clear and stay "
                 "clear. Report the actions you took and your plan."),
}
"""Task goals by kind: the same words for every instance, so a goal never hints at the cause."""
CUJ_GOALS = {
    "diagnose": ("Users of the {app} report problems in their browser. Find the root-cause entity, its layer and "
                 "fault type, and explain how it reaches what users see; cite the evidence ids that show it."),
}
"""The goals of instances whose symptom is a browser journey (CUJ templates): the browser's evidence ids are asked
for, the same words for every CUJ instance."""
APPS = {"shop": "online shop", "loopweb": "web site"}
INSTANCE_ID = "inc-{:.12}"


@dataclass
class Instance:
    id: str
    template: str
    variation: Variation
    spec: dict[str, Any]
    ground_truth: dict[str, Any]
    cuj: journeys.CujParts | None = None
    """The browser journey parts of an instance of a CUJ template (None: not one)."""


@dataclass
class Generated:
    instances: list[Instance] = field(default_factory=list)
    dropped: list[dict[str, str]] = field(default_factory=list)


def seed_bytes(seed: str) -> bytes:
    return hashlib.sha256(seed.encode()).digest()


def _rng(seed: str, template_id: str) -> random.Random:
    return random.Random(int.from_bytes(hashlib.sha256(seed_bytes(seed) + template_id.encode()).digest(), "big"))


def instance_id(seed: str, template_id: str, variation: Variation) -> str:
    digest = hashlib.sha256(seed_bytes(seed) + f"\0{template_id}\0{variation.key()}".encode()).hexdigest()
    return INSTANCE_ID.format(digest)


def shares(count: int, templates: list[Template]) -> list[int]:
    """How many instances each template gets: `count` spread evenly in the order given, none over a template's
    variation space; OpsBenchError naming the templates when `count` exceeds their combined space."""
    space = sum(len(t.variations) for t in templates)
    if count > space:
        raise OpsBenchError(f"--count {count} is larger than the variation space of the templates given ({space}: "
                            + ", ".join(f"{t.scenario.id} {len(t.variations)}" for t in templates) + ")")
    out = [0] * len(templates)
    left = count
    while left:
        for i, t in enumerate(templates):
            if left and out[i] < len(t.variations):
                out[i] += 1
                left -= 1
    return out


def incident_key(spec: dict[str, Any]) -> str:
    """What makes two instances the same: environment, faults (roles and arguments) and the kinds of task."""
    key = [spec["environment"], [(f["role"], f.get("args", {})) for f in spec["faults"]],
           sorted(t["kind"] for t in spec["tasks"])]
    return json.dumps([*key, spec["timing"]] if "timing" in spec else key, sort_keys=True)


def incident_digest(spec: dict[str, Any]) -> str:
    """The SHA-256 of `incident_key`: what an exclusion holds, so a published split's incidents can be listed in a
    committed file without their specs (`opsbench corpus incidents`)."""
    return hashlib.sha256(incident_key(spec).encode()).hexdigest()


def generate(templates: list[Template], seed: str, count: int, exclude: frozenset[str] = frozenset()) -> Generated:
    """`count` instances drawn from `templates` with `seed` (see the module's docstring). Each template walks its
    variations in an order its own stream shuffles, keeping draws until it has its share: a draw that shows no
    alert (for a CUJ template: that breaks no journey step), that repeats an incident already drawn, or whose
    `incident_digest` is in `exclude` (an incident of another split) is dropped with its reason and the next one is
    taken. Shares a template cannot fill go, one at a time in the templates' order, to those with draws left."""
    out = Generated()
    seen: dict[str, str] = {}
    orders = {t.scenario.id: iter(_rng(seed, t.scenario.id).sample(t.variations, len(t.variations)))
              for t in templates}

    def take(template: Template) -> bool:
        for variation in orders[template.scenario.id]:
            inst = build(template, variation, instance_id(seed, template.scenario.id, variation))
            reason = ("no journey step would fail: the browser shows nothing" if inst.cuj and not inst.cuj.steps else
                      "no alert would fire: nothing shows the incident" if not inst.cuj
                      and not inst.ground_truth["alerts"] else
                      f"the same incident as {seen[key]}" if (key := incident_key(inst.spec)) in seen else
                      "an incident of an excluded split" if incident_digest(inst.spec) in exclude else "")
            if reason:
                out.dropped.append({"template": template.scenario.id, "draw": variation.key(), "reason": reason})
                continue
            seen[key] = inst.id
            out.instances.append(inst)
            return True
        return False

    short = 0
    for template, n in zip(templates, shares(count, templates), strict=True):
        kept = 0
        while kept < n and take(template):
            kept += 1
        short += n - kept
    while short:
        took = 0
        for template in templates:
            if short and take(template):
                short, took = short - 1, took + 1
        if not took:
            break
    return out


def build(template: Template, variation: Variation, iid: str) -> Instance:
    """The instance of `template` for `variation`: its spec and ground truth."""
    scn, model, topo = template.scenario, template.model, template.topology
    data = copy.deepcopy(scn.data)
    data.pop("vary", None)
    data.pop("groundTruth", None)
    app = data["environment"]["application"]
    add_distractors(template, variation, data)
    names = {f["name"]: f"f{i}" for i, f in enumerate(data["faults"], 1)}
    varied_args: dict[str, Any] = {}
    for f in data["faults"]:
        if f["name"] == template.fault["name"]:
            if model.target_arg:  # else the role acts on its one entity
                f["args"] = {**f.get("args", {}), model.target_arg: variation.target}
            if model.source_arg:
                f["args"][model.source_arg] = variation.source
        for fault, arg, value in variation.args:
            if f["name"] == fault:
                f["args"] = {**f.get("args", {}), arg: value}
        if f["name"] == template.fault["name"]:
            varied_args = f.get("args", {})  # they may name the dependency the fault breaks
        f["name"] = names[f["name"]]
    truth = derive(model, variation.target, topo, variation.source, varied_args)
    cuj = journeys.derive_cuj(scn.data, model, truth, topo, variation.target, variation.source, varied_args) \
        if journeys.is_cuj(scn.data) else None
    if cuj:  # the browser's evidence, and its pages are one more technology to read
        journeys.apply(data["checks"], cuj)
        truth = {**truth, "evidence": list(cuj.evidence),
                 "technologies": sorted({*truth["technologies"], "javascript"})}
    else:
        for check in data["checks"].get("manifestation", []):
            if check["role"] == "check_alerts" and "firing" in check.get("args", {}):
                check["args"] = {**check["args"], "firing": firing(truth["alerts"], topo)}
    goals = CUJ_GOALS if cuj else GOALS
    unknown = sorted({t["kind"] for t in data["tasks"]} - set(goals))
    if unknown:
        raise SpecInvalid([Problem(str(scn.path), "$.tasks", f"task kinds {unknown} cannot be generated yet "
                                   f"(generated goals exist for {', '.join(goals)})")])
    for task in data["tasks"]:
        task["goal"] = goals[task["kind"]].format(app=APPS.get(app, app))
    steps = model.resolution_steps
    value = complexity_value(truth["propagation_length"], steps, len(truth["technologies"]))
    data["metadata"] = {
        "id": iid, "name": f"Incident {iid}",
        "description": f"A generated incident on the {APPS.get(app, app)}; the tasks say what is known.",
        "version": 1, "generated": True, "domain": scn.data["metadata"]["domain"],
        "class": scn.data["metadata"]["class"],
        "complexity": {"level": complexity_level(value), "propagationLength": truth["propagation_length"],
                       "resolutionSteps": steps, "technologies": truth["technologies"], "value": value},
        "tags": [],
    }
    ground_truth = {"apiVersion": "opsbench/v1", "kind": "GroundTruth", "scenario": iid, "incident": True,
                    **{k: truth[k] for k in ("alerts", "evidence", "entities", "propagations", "faults",
                                             "mitigations")}}
    # A distractor is an entity that is not a root cause: an agent that blames it loses precision.
    ground_truth["entities"] = [*ground_truth["entities"],
                                *({"id": d, "aliases": aliases(topo, d), "rootCause": False}
                                  for d in distractor_targets(data["faults"]))]
    if variation.offset:
        data["timing"] = {**data.get("timing", {}), "startOffsetSeconds": variation.offset}
    if variation.load is not None:
        set_load(data, scn.environment_role, variation.load)
    return Instance(iid, scn.id, variation, data, ground_truth, cuj)


def add_distractors(template: Template, variation: Variation, data: dict[str, Any]) -> None:
    """Put the drawn distractors before the template's faults (their changes precede the incident's first symptom,
    as a suspect deploy does), named like any fault (`f1`... after renaming: nothing says which is benign)."""
    if not variation.distractors:
        return
    assert template.distractor is not None
    taken = {f["name"] for f in data["faults"]}
    extra = []
    for i, target in enumerate(variation.distractors, 1):
        name = next(n for n in (f"distractor-{i}", *(f"distractor-{i}-{k}" for k in range(2, 99))) if n not in taken)
        extra.append({"name": name, "role": template.distractor.role,
                      "args": {template.distractor.target_arg: target}, "distractor": True})
    data["faults"] = [*extra, *data["faults"]]


def distractor_targets(faults: list[dict[str, Any]]) -> list[str]:
    """The targets of an instance's distractors (drawn or written in the template), in fault order."""
    return list(dict.fromkeys(str(f["args"][load_benign_model(f["role"]).target_arg]) for f in faults
                              if f.get("distractor")))


def set_load(data: dict[str, Any], role: str, load: int) -> None:
    """The drawn load into the environment's arguments; left out when it is the role's default, so such an
    instance shares its deployment with every instance of the default load (deployments group by the arguments
    as written)."""
    arg = LOADS[role][0]
    env_args = {**data["environment"].get("args", {}), arg: load}
    if load == entry_options(role, "deploy").get(f"{role}_{arg}", {}).get("default"):
        env_args.pop(arg)
    if env_args:
        data["environment"]["args"] = env_args
    else:
        data["environment"].pop("args", None)


def firing(alerts: list[dict[str, str]], topo: Topology) -> list[dict[str, str]]:
    """The manifestation check's alerts: the target's first own alert and the first alert its nearest caller
    raises, as alert labels (every shop alert carries `service`)."""
    callers = set(CALLER_ALERTS.values()) | set(ENTRY_ALERTS.values())
    own = [a for a in alerts if a["name"] not in callers]
    first_caller = [a for a in alerts if a["name"] in callers][:1]
    return [{"alertname": a["name"], "service": topo.service_of(a["entity"])}
            for a in [*own[:1], *first_caller]]


def dump(data: dict[str, Any]) -> str:
    return yaml.safe_dump(data, sort_keys=False, width=120, allow_unicode=True)


def write(generated: Generated, out: Path) -> list[Path]:
    """Each instance as ``<out>/<id>/scenario.yaml`` and ``ground_truth.yaml``; returns the spec files."""
    files = []
    for inst in generated.instances:
        folder = out / inst.id
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "scenario.yaml").write_text(dump(inst.spec))
        (folder / "ground_truth.yaml").write_text(dump(inst.ground_truth))
        files.append(folder / "scenario.yaml")
    return files
