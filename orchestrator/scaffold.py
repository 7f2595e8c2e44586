"""``opsbench new``: scaffold a fault role or a scenario that already follows the conventions.

The scaffolds are honest TODOs, not fake passes: a new fault role's apply step fails with
"still the scaffold" until it is written, its end-to-end test is skipped with the reason
spelled out, and a new scenario validates but carries obvious ``TODO`` text and placeholder
values where the author must decide.

Templates live in ``orchestrator/templates/`` (Jinja with ``[[ ]]`` / ``[% %]`` delimiters, so
the ``{{ }}`` of the Ansible files they produce pass through untouched). Everything is read
and written through ``orchestrator.paths`` at call time, so tests can point it elsewhere.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2
import yaml

from orchestrator import paths
from orchestrator.argspecs import entry_options, load_argument_specs, role_dir
from orchestrator.complexity import complexity_level, complexity_value
from orchestrator.docgen import fault_family
from orchestrator.errors import OpsBenchError
from orchestrator.schemacheck import load_schema
from orchestrator.spec import SPEC_FILENAME, spec_files
from orchestrator.yamlfile import read_yaml

TEMPLATES_DIR = Path(__file__).resolve().parent / "templates"
FAULT_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
HEALTHY_CONTROL_CLASS = "healthy-control"
DEFAULT_BUDGET = 300

# Placeholders for required options without default or choices, by Ansible option type.
_TYPE_PLACEHOLDER: dict[str, Any] = {"int": 0, "float": 0.0, "bool": False, "list": [], "dict": {}}


@dataclass
class Scaffolded:
    """What a scaffold wrote, and what the author does next."""

    files: list[Path] = field(default_factory=list)
    next_steps: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _flow(value: Any) -> str:
    """One YAML value on one line, the way the example specs write args."""
    text = yaml.safe_dump(value, default_flow_style=True, width=2**31, sort_keys=False, allow_unicode=True)
    return text.rstrip().removesuffix("\n...").strip()


def _env() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES_DIR),
        variable_start_string="[[", variable_end_string="]]",
        block_start_string="[%", block_end_string="%]",
        comment_start_string="[#", comment_end_string="#]",
        trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined, autoescape=False,
    )


def _todo(text: str) -> str:
    return text if text.startswith("TODO") else f"TODO: {text}"


def _render(template: str, **context: Any) -> str:
    env = _env()
    env.filters["flow"] = _flow
    env.filters["todo"] = _todo
    return env.get_template(template).render(**context)


def _rel(path: Path) -> str:
    try:
        return str(path.relative_to(paths.PROJECT_ROOT))
    except ValueError:
        return str(path)


def _write_all(files: dict[Path, str]) -> list[Path]:
    """Write every file; on failure remove what was written so nothing half-made stays."""
    written: list[Path] = []
    try:
        for path, text in files.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("x") as handle:  # never overwrite
                handle.write(text)
            written.append(path)
    except OSError as exc:
        for path in written:
            path.unlink(missing_ok=True)
        raise OpsBenchError(f"could not write {path}: {exc}") from exc
    return written


# ---------------------------------------------------------------------------------------------
# opsbench new fault


def fault_role_name(name: str) -> str:
    """``NAME`` or ``fault_NAME`` -> ``fault_NAME``, with NAME matching ^[a-z][a-z0-9_]*$."""
    bare = name.removeprefix("fault_")
    if not FAULT_NAME.fullmatch(bare):
        raise OpsBenchError(
            f"bad fault name '{name}': after the optional 'fault_' prefix it must match "
            f"{FAULT_NAME.pattern} (lower case letters, digits, '_'; starts with a letter), e.g. redis_oom")
    return f"fault_{bare}"


def fault_test_path(role: str) -> Path:
    return paths.PROJECT_ROOT / "tests" / "e2e" / "faults" / f"test_{role}.py"


def new_fault(name: str, podman: bool = False) -> Scaffolded:
    """Create ``roles/fault_<name>/`` and its (skipped) end-to-end test stub."""
    role = fault_role_name(name)
    target = paths.ROLES_DIR / role
    test_file = fault_test_path(role)
    if target.exists():
        raise OpsBenchError(f"role {role} already exists at {_rel(target)}; pick another name")
    if test_file.exists():
        raise OpsBenchError(f"{_rel(test_file)} already exists; remove it or pick another name")
    if podman and not (paths.ROLES_DIR / "podman_control").is_dir():
        raise OpsBenchError(f"--podman: role podman_control is missing from {paths.ROLES_DIR}")

    files: dict[Path, str] = {}
    base = TEMPLATES_DIR / "fault_role"
    for template in sorted(base.rglob("*.j2")):
        rel = template.relative_to(base)
        files[target / str(rel).removesuffix(".j2")] = _render(
            str(template.relative_to(TEMPLATES_DIR)), role=role, podman=podman)
    init = test_file.parent / "__init__.py"
    if not init.exists():
        files[init] = ""
    files[test_file] = _render("fault_test.py.j2", role=role)

    done = Scaffolded(files=_write_all(files))
    done.next_steps = [
        f"describe the fault and its options in {_rel(target / 'meta' / 'argument_specs.yml')} "
        f"(options keep the {role}_ prefix)",
        f"write the fault in {_rel(target / 'tasks' / 'inject.yml')} (replace the task 'Apply the fault') "
        f"and its exact undo in {_rel(target / 'tasks' / 'remove.yml')}",
        f"scaffold a scenario that uses it: opsbench new scenario <id> --fault {role}",
        f"set SCENARIO in {_rel(test_file)} and remove its skip mark",
        f"ansible-lint --offline --profile production {_rel(target)}",
    ]
    return done


# ---------------------------------------------------------------------------------------------
# opsbench new scenario


@dataclass(frozen=True)
class _Arg:
    name: str
    value: Any
    hint: str


def _placeholder(opt: dict[str, Any]) -> Any:
    if opt.get("default") is not None:
        return opt["default"]
    if opt.get("choices"):
        return opt["choices"][0]
    return _TYPE_PLACEHOLDER.get(str(opt.get("type", "str")), "TODO")


def _hint(opt: dict[str, Any]) -> str:
    desc = opt.get("description") or ""
    text = " ".join(" ".join(str(d).split()) for d in (desc if isinstance(desc, list) else [desc]))
    if len(text) > 100:
        text = text[:97].rstrip() + "..."
    if opt.get("choices"):
        text += f" (one of: {', '.join(map(str, opt['choices']))})"
    return text or "set this"


def _fault_args(role: str) -> dict[str, list[_Arg]]:
    """The options of the role's inject entry point, unprefixed: ``required`` (with a placeholder),
    ``optional`` (with its default) and ``unset`` (optional without a default, left out)."""
    groups: dict[str, list[_Arg]] = {"required": [], "optional": [], "unset": []}
    for name, opt in entry_options(role, "inject").items():
        opt = opt if isinstance(opt, dict) else {}
        arg = _Arg(name.removeprefix(f"{role}_"), _placeholder(opt), _hint(opt))
        kind = "required" if opt.get("required") else "optional" if opt.get("default") is not None else "unset"
        groups[kind].append(arg)
    return groups


def _check_fault_role(role: str) -> None:
    if not role_dir(role).is_dir():
        known = ", ".join(sorted(p.name for p in paths.ROLES_DIR.glob("fault_*"))) or "none"
        raise OpsBenchError(f"--fault {role}: no such role under {paths.ROLES_DIR} (known: {known}); "
                            f"scaffold one with `opsbench new fault {role}`")
    if "inject" not in load_argument_specs(role):
        raise OpsBenchError(f"--fault {role}: the role has no 'inject' entry point in meta/argument_specs.yml")


def _registry_text() -> str:
    return paths.ID_REGISTRY.read_text() if paths.ID_REGISTRY.is_file() else ""


def _registered_ids() -> dict[str, Any]:
    data = read_yaml(paths.ID_REGISTRY) if paths.ID_REGISTRY.is_file() else None
    ids = (data or {}).get("ids") if isinstance(data, dict) else None
    return ids if isinstance(ids, dict) else {}


def _specs() -> dict[str, tuple[Path, dict[str, Any]]]:
    """Every readable spec by id (a malformed one elsewhere must not block scaffolding)."""
    found = {}
    for file in spec_files():
        try:
            data = read_yaml(file)
        except OpsBenchError:
            continue
        meta = data.get("metadata") if isinstance(data, dict) else None
        if isinstance(meta, dict) and "id" in meta:
            found[str(meta["id"])] = (file, data)
    return found


def baseline_source(application: str, baseline_from: str | None = None) -> tuple[Path, dict[str, Any]]:
    """The spec whose baseline checks are the application's standard ones.

    The application's healthy control (class ``healthy-control``, no faults) is the single
    source: its baseline checks are exactly "the environment is healthy". ``baseline_from``
    names another scenario id to copy them from instead.
    """
    specs = _specs()
    if baseline_from is not None:
        if baseline_from not in specs:
            raise OpsBenchError(f"--baseline-from {baseline_from}: no such scenario "
                                f"(known: {', '.join(sorted(specs))})")
        return specs[baseline_from]
    controls = []
    for sid, (file, data) in specs.items():
        env, meta = data.get("environment") or {}, data.get("metadata") or {}
        if (env.get("application") == application and meta.get("class") == HEALTHY_CONTROL_CLASS
                and not data.get("faults")):
            # Prefer the conventional <application>-healthy-baseline, then the first id.
            controls.append((sid != f"{application}-healthy-baseline", sid, file, data))
    if not controls:
        raise OpsBenchError(
            f"application '{application}' has no healthy-control scenario (metadata.class: {HEALTHY_CONTROL_CLASS}, "
            "faults: []) to take the standard baseline checks from; write one, or pass --baseline-from ID")
    _, _, file, data = min(controls, key=lambda c: (c[0], c[1]))
    return file, data


def _checks_yaml(checks: list[dict[str, Any]], indent: int = 4) -> str:
    lines = []
    pad = " " * indent
    for check in checks:
        for i, (key, value) in enumerate(check.items()):
            lines.append(f"{pad}{'- ' if i == 0 else '  '}{key}: {_flow(value)}")
    return "\n".join(lines)


def _known_alerts(application: str) -> list[str]:
    """Alert names the environment role defines (Prometheus rules under its templates/files)."""
    names: set[str] = set()
    for sub in ("templates", "files"):
        for file in sorted((role_dir(f"env_{application}") / sub).glob("*alert*")):
            if file.is_file():
                names.update(re.findall(r"^\s*-\s*alert:\s*([A-Za-z0-9_:]+)", file.read_text(), re.MULTILINE))
    return sorted(names)


def _topology(application: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    from orchestrator.validate import load_topology

    topo = load_topology(application) or {}
    return list(topo.get("entities") or []), list(topo.get("edges") or [])


def _tech(entity: str, entities: list[dict[str, Any]], edges: list[dict[str, Any]]) -> str | None:
    """The entity's technology, or that of the entity owning it (cart-1 -> cart -> python)."""
    by_id = {str(e.get("id")): e for e in entities}
    if by_id.get(entity, {}).get("tech"):
        return str(by_id[entity]["tech"])
    for edge in edges:
        if edge.get("type") == "owns" and edge.get("target") == entity:
            owner = by_id.get(str(edge.get("source")), {})
            if owner.get("tech"):
                return str(owner["tech"])
    return None


def _fault_items(faults: list[str], entities: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One spec entry per fault role: a unique name, its options, and the entity it acts on
    (the first option value that is a topology entity id, else the first service: a placeholder)."""
    entity_ids = [str(e.get("id")) for e in entities]
    placeholder = next((str(e.get("id")) for e in entities if e.get("kind") == "service"),
                       entity_ids[0] if entity_ids else "TODO-entity")
    items: list[dict[str, Any]] = []
    names: set[str] = set()
    for role in faults:
        args = _fault_args(role)
        name = base = role.removeprefix("fault_").replace("_", "-")
        n = 1
        while name in names:
            n += 1
            name = f"{base}-{n}"
        names.add(name)
        named = [a.value for a in [*args["required"], *args["optional"]]
                 if isinstance(a.value, str) and a.value in entity_ids]
        items.append({"name": name, "role": role, **args, "entity": named[0] if named else placeholder,
                      "derived": bool(named)})
    return items


def new_scenario(scenario_id: str, faults: list[str], application: str = "shop",
                 baseline_from: str | None = None, propagation_length: int = 1,
                 resolution_steps: int | None = None, technologies: list[str] | None = None) -> Scaffolded:
    """Create ``scenario_specs/<id>/`` (spec + ground truth) and register the id."""
    pattern = load_schema("scenario")["properties"]["metadata"]["properties"]["id"]["pattern"]
    if not re.fullmatch(pattern, scenario_id):
        raise OpsBenchError(f"bad scenario id '{scenario_id}': it must match {pattern} "
                            "(lower case letters, digits, '-'; 3-80 characters), e.g. shop-cart-redis-oom")
    registry = _registered_ids()
    if scenario_id in registry:
        retired = " (retired: ids are never reused)" if (registry[scenario_id] or {}).get("retired") else ""
        raise OpsBenchError(f"id '{scenario_id}' is already registered in {paths.ID_REGISTRY.name}{retired}")
    target = paths.SPECS_DIR / scenario_id
    existing = _specs().get(scenario_id)
    if target.exists() or existing:
        raise OpsBenchError(f"scenario '{scenario_id}' already exists at {_rel(existing[0] if existing else target)}")
    if not faults:
        raise OpsBenchError("give at least one --fault ROLE")
    if not role_dir(f"env_{application}").is_dir():
        raise OpsBenchError(f"--application {application}: no environment role env_{application} "
                            f"under {paths.ROLES_DIR}")
    if propagation_length < 1 or (resolution_steps is not None and resolution_steps < 1):
        raise OpsBenchError("--propagation-length and --resolution-steps must be at least 1")
    faults = [fault_role_name(role) for role in faults]
    for role in faults:
        _check_fault_role(role)

    entities, edges = _topology(application)
    fault_items = _fault_items(faults, entities)
    derived = list(dict.fromkeys(f["entity"] for f in fault_items if f["derived"]))
    root_causes = derived or [fault_items[0]["entity"]]

    techs = list(dict.fromkeys(technologies or [t for e in root_causes if (t := _tech(e, entities, edges))]))
    techs = techs or ["TODO-technology"]
    steps = resolution_steps or len(faults)
    value = complexity_value(propagation_length, steps, len(techs))
    complexity = {"level": complexity_level(value), "propagationLength": propagation_length,
                  "resolutionSteps": steps, "technologies": techs, "value": value}
    families = list(dict.fromkeys(fault_family(r) for r in faults))

    source_file, source = baseline_source(application, baseline_from)
    alerts = _known_alerts(application)
    baseline = (source.get("checks") or {}).get("baseline") or []
    spec_text = _render(
        "scenario/scenario.yaml.j2", id=scenario_id, class_=families[0], complexity=complexity,
        tags=[application, *[f for f in families if f != application]], application=application,
        faults=fault_items, baseline=_checks_yaml(baseline), baseline_source=_rel(source_file),
        known_alerts=textwrap.wrap(f"Alerts of {application}: {', '.join(alerts)}.", 92) if alerts else [],
        budget=(source.get("budget") or {}).get("wallClockSeconds", DEFAULT_BUDGET))
    topology_file = role_dir(f"env_{application}") / "files" / "topology.yml"
    gt_text = _render("scenario/ground_truth.yaml.j2", id=scenario_id, root_causes=root_causes, derived=derived,
                      faults=fault_items, topology=_rel(topology_file))

    done = Scaffolded(files=_write_all({target / SPEC_FILENAME: spec_text, target / "ground_truth.yaml": gt_text}))
    try:
        done.files.append(register_id(scenario_id, application, faults))
    except OpsBenchError:
        for file in done.files:
            file.unlink(missing_ok=True)
        target.rmdir()
        raise
    if not derived:
        done.notes.append(f"no fault argument names an entity of {application}'s topology: the ground truth's "
                          f"root cause '{root_causes[0]}' is a placeholder")
    done.next_steps = [
        f"replace every TODO in {_rel(target / SPEC_FILENAME)} and {_rel(target / 'ground_truth.yaml')}",
        f"opsbench validate {_rel(target)}",
        f"opsbench verify-scenarios {scenario_id}   (inject -> manifest -> remove -> recover, no agent)",
        "opsbench docs   (the scenario and fault catalogs list it)",
    ]
    return done


def register_id(scenario_id: str, application: str, faults: list[str]) -> Path:
    """Append the id to REGISTRY.yaml as text (comments and layout stay), then check it parsed."""
    original = _registry_text()
    before = original if original.strip() else "ids:\n"
    if not before.endswith("\n"):
        before += "\n"
    roles = list(dict.fromkeys(faults))
    entry = f"  {scenario_id}:\n    application: {application}\n    faults: {_flow(roles)}\n"
    paths.ID_REGISTRY.write_text(before + entry)
    try:
        got = _registered_ids().get(scenario_id)
    except OpsBenchError:
        got = None
    if not isinstance(got, dict) or got.get("application") != application or got.get("faults") != roles:
        paths.ID_REGISTRY.write_text(original)
        raise OpsBenchError(f"could not append '{scenario_id}' to {paths.ID_REGISTRY}: it does not end with the "
                            "`ids:` mapping; add the entry by hand")
    return paths.ID_REGISTRY


def render_scaffolded(done: Scaffolded) -> str:
    """The files a scaffold wrote (relative to the project when inside it), its notes and the numbered next steps."""
    lines = []
    for file in done.files:
        shown = file.relative_to(paths.PROJECT_ROOT) if file.is_relative_to(paths.PROJECT_ROOT) else file
        lines.append(f"  wrote {shown}")
    for note in done.notes:
        lines.append(f"note: {note}")
    lines.append("next:")
    for i, step in enumerate(done.next_steps, 1):
        lines.append(f"  {i}. {step}")
    return "\n".join(lines)
