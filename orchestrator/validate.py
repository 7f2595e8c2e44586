"""``opsbench validate``: JSON Schema plus the semantic checks a schema cannot express.

Semantic checks: roles exist and accept the given args (Ansible's own argument-spec
validator), complexity agrees with ITBench Eq. 6, names are unique, the tasks' kinds can
share one output file, ids are registered and never reused with a new meaning, and
ground-truth entities exist in the topology the environment declares. (A DevOps spec's
class is one of the DevOps classes: the schema checks that.)
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from orchestrator import paths
from orchestrator.arglimits import limit_problems
from orchestrator.argspecs import check_role_args, role_dir, value_kind
from orchestrator.complexity import complexity_level, complexity_value
from orchestrator.errors import Problem, SpecInvalid
from orchestrator.evaluation.outputs import shared_output_conflicts
from orchestrator.role_topology import load_topology, with_upstream
from orchestrator.schemacheck import json_path, schema_problems
from orchestrator.spec import Scenario, spec_files
from orchestrator.yamlfile import read_yaml

GENERATED_ID = re.compile(r"inc-[0-9a-f]{12}|"
                          r"devops-gen-(?:issue|testgen|build|monitoring|pipeline)-[a-z0-9-]+-[0-9a-f]{8}")
"""Ids of generated instances: `opsbench generate`'s opaque ones, `opsbench devops generate`'s (family, project and
a digest of the draw; the family is the task's kind and the project its workspace, both in the manifest anyway)."""
DEFAULT_STEP_TIMEOUTS = {"job": 600, "idle": 300}
"""lifecycle.DEFAULT_TIMEOUTS (not imported: validation stays clear of the step engine); a test keeps them equal."""


def load_registry() -> dict[str, Any]:
    """The registry's ``ids`` mapping (empty if the file or the mapping is missing); entries are as written,
    so callers check that each is a mapping."""
    data = read_yaml(paths.ID_REGISTRY) if paths.ID_REGISTRY.is_file() else None
    ids = data.get("ids", {}) if isinstance(data, dict) else {}
    return ids if isinstance(ids, dict) else {}


def _role_problems(file: str, where: str, role: str, entry: str, args: Any) -> list[Problem]:
    if not isinstance(args, dict):
        return [Problem(file, where, "must be a mapping")]
    return [Problem(file, where, msg) for msg in check_role_args(role, entry, args)]


def semantic_problems(scn: Scenario) -> list[Problem]:
    f = str(scn.path)
    data = scn.data
    out: list[Problem] = []

    cx = data["metadata"]["complexity"]
    want = complexity_value(cx["propagationLength"], cx["resolutionSteps"], len(cx["technologies"]))
    if not abs(want - cx["value"]) <= 0.005:  # written so that a YAML .nan is reported too
        out.append(Problem(f, "$.metadata.complexity.value",
                           f"is {cx['value']} but Eq. 6 gives {want} for these inputs"))
    if complexity_level(want) != cx["level"]:
        out.append(Problem(f, "$.metadata.complexity.level",
                           f"is {cx['level']} but value {want} is {complexity_level(want)}"))

    env_role = scn.environment_role
    out += _role_problems(f, "$.environment.args", env_role, "deploy",
                          data["environment"].get("args", {}))
    if role_dir(env_role).is_dir() and not (role_dir(env_role) / "tasks" / "teardown.yml").is_file():
        out.append(Problem(f, "$.environment.application", f"role '{env_role}' has no teardown entry point"))

    topo = load_topology(data["environment"]["application"], scn.backend)
    env_args = data["environment"].get("args") or {}
    for i, fault in enumerate(scn.faults):
        found: list[Problem] = []
        for entry in ("inject", "remove"):
            found += _role_problems(f, f"$.faults[{i}].args", fault["role"], entry, fault["args"])
        out += list(dict.fromkeys(found))  # inject and remove share options: report each once
        if not found and isinstance(env_args, dict):  # bounds the environment sets (meta/limits.yml)
            out += limit_problems(f, i, fault["role"], fault["args"], topo, env_args)
    out += _duplicates(f, "$.faults", [x["name"] for x in scn.faults])
    out += distractor_role_problems(scn)
    out += noise_problems(scn)
    for i, ref in enumerate(scn.reference):
        out += _role_problems(f, f"$.reference[{i}].args", ref["role"], "main", ref["args"])
    out += _duplicates(f, "$.reference", [x["name"] for x in scn.reference])

    for phase in ("baseline", "manifestation", "recovery"):
        if phase not in data["checks"]:
            continue
        checks = scn.checks(phase)
        for i, chk in enumerate(checks):
            out += _role_problems(f, f"$.checks.{phase}[{i}].args", chk["role"], "main", chk["args"])
        out += _duplicates(f, f"$.checks.{phase}", [c["name"] for c in checks])

    for i, ev in enumerate(scn.evaluators):
        out += _role_problems(f, f"$.evaluation.evaluators[{i}].params", ev["role"], "main", ev["params"])
    out += _duplicates(f, "$.tasks", [t["id"] for t in data["tasks"]])
    out += [Problem(f, "$.tasks", msg) for msg in shared_output_conflicts([t["kind"] for t in data["tasks"]])]

    offset = (data.get("timing") or {}).get("startOffsetSeconds", 0)
    handover = {**DEFAULT_STEP_TIMEOUTS, **(data.get("timeouts") or {}).get("handover", {})}
    if offset >= min(handover.values()):
        out.append(Problem(f, "$.timing.startOffsetSeconds", f"the handover waits {offset} s, which its step timeouts "
                           f"(job {handover['job']} s, idle {handover['idle']} s) would cut: raise timeouts.handover"))

    out += registry_problems(scn)
    if "vary" in scn.data:
        from orchestrator.generation.templates import template_problems
        out += template_problems(scn)
    out += ground_truth_problems(scn)
    return out


def _duplicates(file: str, where: str, names: list[str]) -> list[Problem]:
    seen: set[str] = set()
    dups = sorted({n for n in names if n in seen or seen.add(n)})  # type: ignore[func-returns-value]
    return [Problem(file, where, f"duplicate name '{n}'") for n in dups]


def registry_problems(scn: Scenario) -> list[Problem]:
    """Ids are registered once and keep their meaning: same application and fault roles."""
    f = str(scn.path)
    if scn.data["metadata"].get("generated"):  # drawn by `opsbench generate`: opaque, never registered
        return [] if GENERATED_ID.fullmatch(scn.id) else [
            Problem(f, "$.metadata.id", "a generated instance's id is inc- and 12 hex digits (or "
                                        f"devops-gen-<family>-<project>-<8 hex digits>), not '{scn.id}'")]
    entry = load_registry().get(scn.id)
    if entry is None:
        return [Problem(f, "$.metadata.id",
                        f"id '{scn.id}' is not registered; add it to {paths.ID_REGISTRY.name} "
                        "(ids are immutable and never reused)")]
    registered_faults = entry.get("faults", []) if isinstance(entry, dict) else None
    if not isinstance(registered_faults, list) or not all(isinstance(x, str) for x in registered_faults):
        return [Problem(str(paths.ID_REGISTRY), json_path(("ids", scn.id)),
                        "must be a mapping with application and faults (a list of role names)")]
    if entry.get("retired"):
        return [Problem(f, "$.metadata.id", f"id '{scn.id}' is retired and may not be reused")]
    problems = []
    if entry.get("application") != scn.data["environment"]["application"]:
        problems.append(Problem(f, "$.environment.application",
                                f"id '{scn.id}' is registered for application "
                                f"'{entry.get('application')}'; a new meaning needs a new id"))
    if set(registered_faults) != {x["role"] for x in scn.faults}:
        problems.append(Problem(f, "$.faults",
                                f"id '{scn.id}' is registered with fault roles {entry.get('faults', [])}; "
                                "a new meaning needs a new id"))
    return problems


def ground_truth_problems(scn: Scenario) -> list[Problem]:
    gt_path = scn.ground_truth_path
    if not gt_path.is_file():
        return [Problem(str(scn.path), "$.groundTruth", f"ground-truth file {gt_path} does not exist")]
    try:
        gt = read_yaml(gt_path)
    except SpecInvalid as exc:
        return exc.problems
    g = str(gt_path)
    problems = schema_problems(gt_path, gt, "ground_truth")
    if problems:
        return problems
    problems += finops_truth_problems(g, gt)
    if gt["scenario"] != scn.id:
        problems.append(Problem(g, "$.scenario", f"is '{gt['scenario']}' but the spec's id is '{scn.id}'"))
    topo = with_upstream(load_topology(scn.data["environment"]["application"], scn.backend),
                         scn.data["environment"].get("args"))
    if topo is None:
        return [*problems, Problem(g, "$.entities", f"environment '{scn.environment_role}' declares no "
                                                    "topology (files/topology.yml), so entities cannot be checked")]
    entities = topo.get("entities", [])
    if not isinstance(entities, list) or not all(isinstance(e, dict) and isinstance(e.get("id"), str)
                                                 for e in entities):
        topo_file = role_dir(scn.environment_role) / "files" / "topology.yml"
        return [*problems, Problem(str(topo_file), "$.entities", "must be a list of mappings, each with a string id")]
    known = {e["id"] for e in entities}
    refs: list[tuple[str, str]] = [(f"$.entities[{i}].id", e["id"]) for i, e in enumerate(gt["entities"])]
    for i, p in enumerate(gt.get("propagations", [])):
        refs += [(f"$.propagations[{i}].source", p["source"]), (f"$.propagations[{i}].target", p["target"])]
    for key in ("alerts", "faults"):
        refs += [(f"$.{key}[{i}].entity", a["entity"]) for i, a in enumerate(gt.get(key, [])) if "entity" in a]
    for where, ent in refs:
        if ent not in known:
            problems.append(Problem(g, where, f"entity '{ent}' is not in the topology of "
                                              f"'{scn.environment_role}' (known: {', '.join(sorted(known))})"))
    if gt.get("incident", True) and not any(e.get("rootCause") for e in gt["entities"]):
        problems.append(Problem(g, "$.entities", "an incident needs at least one entity with rootCause: true"))
    problems += distractor_truth_problems(scn, gt, topo)
    problems += noise_truth_problems(scn, gt, topo)
    # The manifestation gate waits for alerts; each must be one the ground truth expects, so the
    # evaluator and the gate never disagree about what the incident looks like.
    expected = {a["name"] for a in gt.get("alerts", [])}
    for i, check in enumerate(scn.checks("manifestation")):
        if check["role"] != "check_alerts":
            continue
        firing = check["args"].get("firing")
        if not isinstance(firing, list):  # null, a string, a mapping: the argument checks report it
            continue
        for j, labels in enumerate(firing):
            where = f"$.checks.manifestation[{i}].args.firing[{j}]"
            name = labels.get("alertname") if isinstance(labels, dict) else None
            if not isinstance(name, str) or name not in expected:  # a list or mapping names no alert
                problems.append(Problem(str(scn.path), where,
                                        f"alert '{name}' is not among the ground truth's alerts "
                                        f"({', '.join(sorted(expected)) or 'none'}) in {gt_path.name}"))
            for label, value in labels.items() if isinstance(labels, dict) else ():
                if not isinstance(value, str):  # Alertmanager's labels are strings: this one never matches
                    problems.append(Problem(str(scn.path), f"{where}.{label}",
                                            f"label value must be a string, not {value_kind(value)}"))
    return problems


def distractor_role_problems(scn: Scenario) -> list[Problem]:
    """A fault is a distractor exactly when its role is benign (its effect model says `benign: true`): a benign
    change counted as a cause, or a cause counted as benign, would make the ground truth lie."""
    from orchestrator.generation.effects import is_benign

    out = []
    for i, fault in enumerate(scn.faults):
        marked, benign = bool(fault.get("distractor")), is_benign(fault["role"])
        if marked and not benign:
            out.append(Problem(str(scn.path), f"$.faults[{i}].distractor", f"role {fault['role']} is not a "
                               "distractor's role: its effect model (meta/effects.yml) does not say `benign: true`"))
        elif benign and not marked:
            out.append(Problem(str(scn.path), f"$.faults[{i}].distractor", f"role {fault['role']} makes a benign "
                               "change that is never a cause: mark the fault `distractor: true`"))
    return out


NOISE_ENTITY_ARGS = ("target", "source")
"""The arguments of a noise role that name an entity it acts on: none may be a root cause."""


def noise_problems(scn: Scenario) -> list[Problem]:
    """Each noise entry's role exists with an `inject` and a `remove` task (the remove step must be able to take
    it out again, whatever ended the run) and accepts its args; names are unique among faults and noise (they
    name the saved state and helper containers)."""
    f = str(scn.path)
    out: list[Problem] = []
    for i, item in enumerate(scn.noise):
        role = item["role"]
        if not role_dir(role).is_dir():
            out.append(Problem(f, f"$.noise[{i}].role", f"role '{role}' does not exist under {paths.ROLES_DIR}"))
            continue
        missing = [e for e in ("inject", "remove") if not (role_dir(role) / "tasks" / f"{e}.yml").is_file()]
        if missing:
            out.append(Problem(f, f"$.noise[{i}].role", f"noise role '{role}' has no {' and no '.join(missing)} "
                               f"task (tasks/{missing[0]}.yml): noise is started by inject and must be removed "
                               "at the end like a fault"))
            continue
        found: list[Problem] = []
        for entry in ("inject", "remove"):
            found += _role_problems(f, f"$.noise[{i}].args", role, entry, item["args"])
        out += list(dict.fromkeys(found))
    out += _duplicates(f, "$.noise", [x["name"] for x in (*scn.faults, *scn.noise)]
                       ) if scn.noise else []
    return out


def noise_truth_problems(scn: Scenario, gt: dict[str, Any], topo: dict[str, Any]) -> list[Problem]:
    """No entity a noise entry acts on is a root cause: noise is unrelated to the incident by definition, and noise
    on the cause would change the incident the ground truth describes."""
    from orchestrator.generation.effects import Topology

    graph = Topology(topo)
    roots = {graph.service_of(e["id"]) for e in gt["entities"] if e.get("rootCause")}
    out: list[Problem] = []
    for i, item in enumerate(scn.noise):
        for arg in NOISE_ENTITY_ARGS:
            value = item["args"].get(arg)
            if isinstance(value, str) and graph.service_of(value) in roots:
                out.append(Problem(str(scn.path), f"$.noise[{i}].args.{arg}",
                                   f"noise on a root cause: '{value}' is a root cause in "
                                   f"{scn.ground_truth_path.name}; noise runs beside the incident, never in it"))
    return out


def distractor_truth_problems(scn: Scenario, gt: dict[str, Any], topo: dict[str, Any]) -> list[Problem]:
    """A distractor's target is an entity of the ground truth that is not a root cause (of the same service as
    none): blaming it must cost the agent, and a distractor that is also a root cause is a contradiction."""
    from orchestrator.generation.effects import Topology, is_benign, load_benign_model

    out: list[Problem] = []
    graph = Topology(topo)
    roots = {graph.service_of(e["id"]) for e in gt["entities"] if e.get("rootCause")}
    listed = {graph.service_of(e["id"]) for e in gt["entities"] if not e.get("rootCause")}
    for i, fault in enumerate(scn.faults):
        if not fault.get("distractor") or not is_benign(fault["role"]):
            continue
        model = load_benign_model(fault["role"])
        target = fault["args"].get(model.target_arg)
        if not isinstance(target, str):  # a missing or mistyped target: the argument checks report it
            continue
        where = f"$.faults[{i}].args.{model.target_arg}"
        if graph.service_of(target) in roots:
            out.append(Problem(str(scn.path), where, f"a distractor that is also a root cause: '{target}' is a root "
                               f"cause in {scn.ground_truth_path.name}; a distractor is never the cause"))
        elif graph.service_of(target) not in listed:
            out.append(Problem(str(scn.path), where, f"distractor target '{target}' is not among the entities of "
                               f"{scn.ground_truth_path.name}: list it (rootCause false) so that blaming it counts "
                               "against the agent"))
    return out


def finops_truth_problems(file: str, gt: dict[str, Any]) -> list[Problem]:
    """What the FinOps scorers index without a default: every reference row has its question's keys and
    fields, and a ranking's anomalies have their importance."""
    finops = gt.get("finops", {})
    problems = []
    for i, question in enumerate(finops.get("answers", [])):
        wanted = [*question["keys"], *question.get("fields", [])]
        for j, row in enumerate(question["rows"]):
            missing = [c for c in wanted if c not in row]
            if missing:
                problems.append(Problem(file, f"$.finops.answers[{i}].rows[{j}]",
                                        f"lacks column(s) {', '.join(missing)} named by keys/fields"))
    anomalies = finops.get("anomalies")
    if anomalies is not None and anomalies["mode"] == "rank":
        for i, item in enumerate(anomalies["items"]):
            if not isinstance(item.get("importance"), int | float):
                problems.append(Problem(file, f"$.finops.anomalies.items[{i}]",
                                        "a ranking's anomaly needs a numeric importance"))
    return problems


def checked_scenario(path: Path) -> tuple[Scenario | None, list[Problem]]:
    """The spec at `path` read once and checked (schema, then the semantic checks): the scenario when it has no
    problem, else None and its problems."""
    try:
        data = read_yaml(path)
    except SpecInvalid as exc:
        return None, exc.problems
    problems = schema_problems(path, data, "scenario")
    if problems:
        return None, problems
    scn = Scenario(path=path, data=data)
    problems = loaded_problems(scn)
    return (None, problems) if problems else (scn, [])


def loaded_problems(scn: Scenario) -> list[Problem]:
    """The semantic problems of a spec already read and schema-checked (`spec.load_scenario`)."""
    try:
        return semantic_problems(scn)
    except SpecInvalid as exc:  # a malformed registry or topology file the checks had to read
        return exc.problems


def validate_scenario_file(path: Path) -> list[Problem]:
    return checked_scenario(path)[1]


def validate_paths(roots: list[Path] | None = None) -> list[Problem]:
    """Validate every spec found under ``roots``, plus id uniqueness across them."""
    problems: list[Problem] = []
    seen: dict[str, Path] = {}
    files = spec_files(roots)
    if not files:
        where = ", ".join(map(str, roots or [paths.SPECS_DIR]))
        return [Problem(where, "$", f"no {paths.SPECS_DIR.name}/*/scenario.yaml found")]
    for file in files:
        scn, file_problems = checked_scenario(file)
        problems += file_problems
        if scn is None:
            continue
        sid = scn.id
        if sid in seen:
            problems.append(Problem(str(file), "$.metadata.id", f"duplicate id '{sid}' (also in {seen[sid]})"))
        seen[sid] = file
    return problems
