"""``opsbench new``: scaffold a fault role or a scenario that already follows the conventions.

The scaffolds are honest TODOs, not fake passes: a new fault role's apply step fails with
"still the scaffold" until it is written, its end-to-end test is skipped with the reason
spelled out, and a new scenario validates but carries obvious ``TODO`` text and placeholder
values where the author must decide. An application deployed by ``env_workspace`` gets a DevOps
scenario instead (a class, a workspace project, a reference solution for verify-scenarios).

Templates live in ``orchestrator/templates/`` (Jinja with ``[[ ]]`` / ``[% %]`` delimiters, so
the ``{{ }}`` of the Ansible files they produce pass through untouched). Everything is read
and written through ``orchestrator.paths`` at call time, so tests can point it elsewhere.
"""

from __future__ import annotations

import re
import shutil
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
from orchestrator.errors import OpsBenchError, Problem, SpecInvalid
from orchestrator.schemacheck import load_schema
from orchestrator.spec import SPEC_FILENAME, environment_role, spec_files
from orchestrator.yamlfile import read_yaml

TEMPLATES_DIR = Path(__file__).resolve().parent / "templates"
FAULT_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
MAX_FAULT_NAME = 60
"""Longest fault name (without the fault_ prefix): a role folder, a test file and Ansible variable names carry it."""
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
    if len(bare) > MAX_FAULT_NAME:
        raise OpsBenchError(f"fault name '{name[:40]}...' is {len(bare)} characters long: keep it to "
                            f"{MAX_FAULT_NAME} (it names a role folder and a test file), e.g. redis_oom")
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
    from orchestrator.role_topology import load_topology

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
                 resolution_steps: int | None = None, technologies: list[str] | None = None,
                 scenario_class: str | None = None, project: str | None = None) -> Scaffolded:
    """Create ``scenario_specs/<id>/`` (spec + ground truth) and register the id.

    An application deployed by ``env_workspace`` gets a DevOps scenario (``scenario_class``, ``project``);
    any other an SRE one, whose class follows the fault family.
    """
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
    if environment_role(application) == DEVOPS_ENV_ROLE:
        return _new_devops_scenario(scenario_id, faults, application, scenario_class or DEFAULT_DEVOPS_CLASS,
                                    project, baseline_from, propagation_length, resolution_steps, technologies)
    for option, given in (("--class", scenario_class), ("--project", project)):
        if given is not None:
            raise OpsBenchError(f"{option} is for DevOps scenarios (an application deployed by {DEVOPS_ENV_ROLE}, "
                                f"e.g. --application workspace), not for {application}")

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

    done = Scaffolded(files=_write_checked(target, {SPEC_FILENAME: spec_text, "ground_truth.yaml": gt_text},
                                           scenario_id, application, faults))
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


# ---------------------------------------------------------------------------------------------
# opsbench new scenario, DevOps: an application deployed by env_workspace (scenario_specs/devops-*)

DEVOPS_ENV_ROLE = "env_workspace"
DEFAULT_DEVOPS_CLASS = "build-config"
AT_BASELINE = 'git diff --quiet HEAD && test -z "$(git status --porcelain)"'
_GOAL_WIDTH = 100


@dataclass(frozen=True)
class _DevOpsClass:
    """The shape of one DevOps class, after the scenarios in scenario_specs/devops-*."""

    tag: str
    tasks: tuple[tuple[str, str], ...]  # (task id, kind), in order
    fault_name: str
    budget: int
    steps: int  # resolutionSteps by default


DEVOPS_CLASSES: dict[str, _DevOpsClass] = {
    "build-config": _DevOpsClass("build", (("fix-build", "fix"),), "broken-build", 900, 2),
    "issue-resolving": _DevOpsClass("issue-resolving", (("resolve-issue", "fix"),), "bug", 1800, 3),
    "test-generation": _DevOpsClass("test-generation", (("write-test", "write-tests"),), "bug", 1200, 2),
    "pipeline": _DevOpsClass("pipeline", (("fix-build", "fix"), ("fix-issue", "fix")), "breakage", 2400, 5),
    "monitoring": _DevOpsClass("monitoring", (("diagnose", "diagnose"),), "misbehaving-service", 300, 1),
}

_GOALS = {
    "fix-build": "TODO: the symptom as CI reports it, never the cause (e.g. `make check` in /workspace/{project} "
                 "fails on a clean checkout); ask to make `make check` pass again without changing, skipping or "
                 "deleting tests or the Makefile's check target, and for a short "
                 "report of what was wrong and what changed.",
    "resolve-issue": "TODO: the issue a user filed against /workspace/{project} (what they did, what they saw, what "
                     "they expected; never the faulty line); ask to resolve it so that `make check` passes, keeping "
                     "the existing tests (the evaluation restores them and adds hidden tests of its own).",
    "fix-issue": "TODO: once the build works again, the issue a user filed against /workspace/{project} (what they "
                 "did, saw and expected; never the faulty line); ask to resolve it so that `make check` passes, "
                 "keeping the existing tests (the evaluation restores them and adds hidden tests of its own).",
    "write-test": "TODO: the bug report for /workspace/{project} (what goes wrong, for which input); ask for a test "
                  "that fails on the code as it is and passes once the bug is fixed, in a new test file ({tests}), "
                  "named in the output; the existing tests stay.",
    "diagnose": "TODO: the symptoms developers notice in the workspace, never the process; ask for the misbehaving "
                "process's program name (as ps shows it) as the root-cause entity, layer `process`, its anomaly as "
                "the fault type ({anomalies}), and to observe only (not stop or change the services).",
}


@dataclass(frozen=True)
class _Line:
    """One argument of a fault as the template writes it: inline ``text`` or an indented ``block``."""

    name: str
    comment: str
    text: str = ""
    block: str = ""


def _edits_yaml(edits: list[list[tuple[str, str, str]]], indent: int) -> str:
    """Edits as block YAML, each field ``(key, value, comment)``: the placeholders an author replaces."""
    lines = []
    for edit in edits:
        for i, (key, value, comment) in enumerate(edit):
            note = f"  # {comment}" if comment else ""
            lines.append(f"{' ' * indent}{'- ' if i == 0 else '  '}{key}: {_flow(value)}{note}")
    return "\n".join(lines)


def _block_yaml(value: Any, indent: int) -> str:
    text = yaml.safe_dump(value, default_flow_style=False, sort_keys=False, width=110, allow_unicode=True)
    return textwrap.indent(text.rstrip("\n"), " " * indent)


def _projects(application: str) -> dict[str, dict[str, Any]]:
    """The workspace projects (``files/projects.yml`` of the environment role): how each is built and tested."""
    file = role_dir(environment_role(application)) / "files" / "projects.yml"
    data = read_yaml(file) if file.is_file() else None
    if not isinstance(data, dict) or not data:
        raise OpsBenchError(f"{_rel(file)} lists no projects: a DevOps scenario works on one of them")
    return {str(k): v if isinstance(v, dict) else {} for k, v in data.items()}


def _choose_project(application: str, project: str | None, notes: list[str]) -> tuple[str, dict[str, Any]]:
    projects = _projects(application)
    if project is None:
        project = next(iter(projects))
        notes.append(f"no --project: the scenario works on {project} (one of: {', '.join(projects)})")
    if project not in projects:
        file = _rel(role_dir(environment_role(application)) / "files" / "projects.yml")
        raise OpsBenchError(f"--project {project}: no such workspace project in {file} "
                            f"(one of: {', '.join(projects)})")
    return project, projects[project]


def _fault_edits(scenario_class: str, project: str, info: dict[str, Any]) -> str:
    files = ", ".join(map(str, info.get("build_files") or [])) or "a file of the project"
    where = f"relative to roles/{DEVOPS_ENV_ROLE}/files/projects/{project}/"
    old = ("old", "TODO: its exact text in the pristine project (found once)", "")
    build = [("path", "TODO", f"a build file ({files}), {where}"), old,
             ("new", "TODO: the broken text (the injected cause)", "")]
    bug = [("path", "TODO", f"the source file with the bug, {where}"), old, ("new", "TODO: the buggy text", "")]
    edits = {"build-config": [build], "pipeline": [build, bug]}.get(scenario_class, [bug])
    return _edits_yaml(edits, 8)


def _devops_fault_items(faults: list[str], scenario_class: str, project: str, info: dict[str, Any],
                        projects: list[str], processes: list[str]) -> list[dict[str, Any]]:
    """One spec entry per fault role; ``project`` and ``edits`` (and a monitoring fault's process ``name``)
    get values that fit the scenario, every other option the role's placeholder or default."""
    items: list[dict[str, Any]] = []
    base = DEVOPS_CLASSES[scenario_class].fault_name
    for n, role in enumerate(faults, 1):
        groups = _fault_args(role)
        lines = []
        values = {a.name: a.value for a in [*groups["required"], *groups["optional"]]}
        for kind in ("required", "optional"):
            for arg in groups[kind]:
                hint = _todo(arg.hint) if kind == "required" else arg.hint
                if arg.name == "project":
                    lines.append(_Line("project", f"one of: {', '.join(projects)}", text=_flow(project)))
                elif arg.name == "edits":
                    lines.append(_Line("edits", _todo("the edits that inject the fault: {path, old, new} "
                                                      "(exact text), {path, content} or {path, delete: true}"),
                                       block=_fault_edits(scenario_class, project, info)))
                elif arg.name == "name" and scenario_class == "monitoring" and processes:
                    values["name"] = processes[0]
                    lines.append(_Line("name", "TODO: the misbehaving program, the ground truth's root cause "
                                               f"(a process of the topology: {', '.join(processes)})",
                                       text=_flow(processes[0])))
                else:
                    lines.append(_Line(arg.name, hint, text=_flow(arg.value)))
        items.append({"name": base if n == 1 else f"{base}-{n}", "role": role, "args": lines,
                      "unset": groups["unset"], "values": values})
    return items


def _new_devops_scenario(scenario_id: str, faults: list[str], application: str, scenario_class: str,
                         project: str | None, baseline_from: str | None, propagation_length: int,
                         resolution_steps: int | None, technologies: list[str] | None) -> Scaffolded:
    if scenario_class not in DEVOPS_CLASSES:
        raise OpsBenchError(f"--class {scenario_class}: not a DevOps class (one of: {', '.join(DEVOPS_CLASSES)})")
    shape = DEVOPS_CLASSES[scenario_class]
    monitoring = scenario_class == "monitoring"
    notes: list[str] = []
    project, info = _choose_project(application, project, [] if monitoring else notes)
    projects = list(_projects(application))
    entities, _ = _topology(application)
    entity_ids = [str(e.get("id")) for e in entities]
    processes = [str(e.get("id")) for e in entities if e.get("kind") == "process"]
    fault_items = _devops_fault_items(faults, scenario_class, project, info, projects, processes)
    tests = ", ".join(map(str, [g for g in info.get("protected") or [] if g != "Makefile"])) or "the project's tests"
    process_role = "fault_workspace_process"
    anomaly_opt = (entry_options(process_role, "inject").get(f"{process_role}_anomaly")
                   if role_dir(process_role).is_dir() else None)
    anomalies = ", ".join(map(str, (anomaly_opt or {}).get("choices") or [])) or "the anomaly"

    # The misbehaving process (monitoring) is what the fault's `name` says; its anomaly the fault type.
    values = fault_items[0]["values"]
    process = str(values.get("name", processes[0] if processes else "TODO-entity"))
    anomaly = str(values.get("anomaly", "TODO"))

    language = str(info.get("language") or "TODO-technology")
    techs = list(dict.fromkeys(technologies or (["linux", "procps"] if monitoring else [language])))
    steps = resolution_steps or shape.steps
    value = complexity_value(propagation_length, steps, len(techs))
    complexity = {"level": complexity_level(value), "propagationLength": propagation_length,
                  "resolutionSteps": steps, "technologies": techs, "value": value}

    if baseline_from is not None:
        source_file, source = baseline_source(application, baseline_from)
        baseline = (source.get("checks") or {}).get("baseline") or []
        baseline_comment, source_name = "", _rel(source_file)
    elif monitoring and processes:
        baseline = [{"name": "no-services", "role": "check_workspace",
                     "args": {"project": project, "command": f"! pgrep -x '{'|'.join(processes)}'"}, "timeout": 20}]
        baseline_comment, source_name = "None of the background services runs yet.", ""
    else:
        baseline = [{"name": "at-baseline", "role": "check_workspace",
                     "args": {"project": project, "command": AT_BASELINE}, "timeout": 20}]
        baseline_comment, source_name = f"{project} is exactly its baseline commit.", ""

    if scenario_class == "build-config":
        manifestation = [{"name": "build-fails", "role": "check_workspace",
                          "args": {"project": project, "command": "make -s check", "expect": "fail"},
                          "timeout": 300}]
        manifestation_comment = ["The gate CI runs fails on the untouched incident."]
    elif monitoring:
        manifestation = [{"name": "anomaly-shows", "role": "check_workspace",
                          "args": {"project": project, "command": f"TODO: a shell test that holds once {process} "
                                                                     f"misbehaves"},
                          "timeout": 90}]
        manifestation_comment = [f"TODO: measure the anomaly from outside, e.g. through /proc/$(pgrep -xo {process})/",
                                 "(scenario_specs/devops-monitor-* show one per anomaly)."]
    else:
        manifestation = [{"name": "bug-in-source", "role": "check_workspace",
                          "args": {"project": project, "command": "TODO: a shell test that holds once the fault is "
                                                                 "in, e.g. grep -qF -- '<injected text>' <path>"},
                          "timeout": 30}]
        manifestation_comment = ["TODO: show that the fault is in (the existing tests may well still pass)."]

    tasks = [{"id": tid, "kind": kind,
              "goal": textwrap.wrap(_GOALS[tid].format(project=project, tests=tests, anomalies=anomalies),
                                    _GOAL_WIDTH)} for tid, kind in shape.tasks]

    if monitoring:
        output = {"schema": "opsbench/diagnosis/v1", "incident": True,
                  "entities": [{"id": process, "root_cause": True, "layer": "process", "fault_type": anomaly}],
                  "explanation": "TODO: what the agent measures that gives the process away"}
        reference = {"name": "answer", "role": "solve_output", "block": _block_yaml(output, 8)}
        evaluator = "evaluate_diagnosis"
    else:
        if scenario_class == "test-generation":
            edits = [[("path", "TODO", f"a new test file ({tests})"),
                      ("content", "TODO: a test that fails on the buggy code and passes on the pristine one", "")]]
            comment = "TODO: the test an agent would write"
        else:
            fix = [("path", "TODO", "often the fault's edit reversed"),
                   ("old", "TODO: the broken text", ""), ("new", "TODO: the fixed text", "")]
            edits = [fix, fix] if scenario_class == "pipeline" else [fix]
            comment = "TODO: the fix an agent would make ({path, old, new}, {path, content} or {path, delete: true})"
        reference = {"name": {"build-config": "fixed-build", "test-generation": "reference-test"}
                     .get(scenario_class, "reference-fix"), "role": "solve_workspace_edit",
                     "block": _edits_yaml(edits, 8), "comment": comment}
        evaluator = "evaluate_workspace"

    hidden = _edits_yaml([[("path", "TODO", f"a new test file ({tests})"),
                           ("content", "TODO: tests that fail on the bug and pass once the issue is resolved", "")]],
                         8)
    bug = _edits_yaml([[("path", "TODO", "the fault's edits"), ("old", "TODO: the pristine text", ""),
                        ("new", "TODO: the buggy text", "")]], 8)
    stages = [{"task": tid, "kind": kind,
               "hidden_tests": hidden if tid in ("resolve-issue", "fix-issue") else "",
               "bug": bug if kind == "write-tests" else ""} for tid, kind in shape.tasks]
    build_entity = f"{project}-build" if f"{project}-build" in entity_ids else project
    gt_entities = []
    if scenario_class in ("build-config", "pipeline"):
        gt_entities.append({"id": build_entity, "layer": "configuration", "faultType": "",
                            "comment": "the project's build configuration"})
    if scenario_class in ("issue-resolving", "test-generation", "pipeline"):
        gt_entities.append({"id": project, "layer": "application", "faultType": "wrong_computation",
                            "comment": "the project's code"})

    spec_text = _render(
        "scenario/devops_scenario.yaml.j2", id=scenario_id, class_=scenario_class, project=project,
        subject="the workspace's background services" if monitoring else project,
        complexity=complexity, tags=["devops", shape.tag, "process" if monitoring else project],
        application=application, faults=fault_items, reference=reference, baseline=_checks_yaml(baseline),
        baseline_source=source_name, baseline_comment=baseline_comment, manifestation=_checks_yaml(manifestation),
        manifestation_comment=manifestation_comment, tasks=tasks, budget=shape.budget, evaluator=evaluator)
    topology_file = role_dir(environment_role(application)) / "files" / "topology.yml"
    gt_text = _render("scenario/devops_ground_truth.yaml.j2", id=scenario_id, class_=scenario_class,
                      topology=_rel(topology_file), monitoring=monitoring, process=process, anomaly=anomaly,
                      entities=gt_entities, stages=stages, project=project)

    target = paths.SPECS_DIR / scenario_id
    done = Scaffolded(files=_write_checked(target, {SPEC_FILENAME: spec_text, "ground_truth.yaml": gt_text},
                                           scenario_id, application, faults), notes=notes)
    spec_rel, gt_rel = _rel(target / SPEC_FILENAME), _rel(target / "ground_truth.yaml")
    if monitoring:
        fill = (f"replace every TODO in {spec_rel} (the misbehaving process and its anomaly, the manifestation "
                f"check, the goal, the reference answer) and {gt_rel}")
    else:
        extra = {"issue-resolving": ", its hidden tests", "pipeline": ", the issue's hidden tests",
                 "test-generation": ", the bug: the fault's edits"}.get(scenario_class, "")
        fill = (f"replace every TODO in {spec_rel} (the fault's edits: exact text of "
                f"roles/{DEVOPS_ENV_ROLE}/files/projects/{project}/; the reference solution's edits; the goal) and "
                f"{gt_rel} (the root cause{extra})")
    done.next_steps = [
        fill,
        f"opsbench validate {_rel(target)}",
        f"opsbench verify-scenarios {scenario_id}   (baseline -> inject -> manifest -> the untouched incident must "
        "fail its evaluation -> the reference solution must pass it -> remove -> recover)",
        "opsbench docs   (the scenario catalog lists it)",
    ]
    return done


def _write_checked(target: Path, texts: dict[str, str], scenario_id: str, application: str,
                   faults: list[str]) -> list[Path]:
    """Write the scenario's files into `target`, register the id, and check the result as `opsbench validate`
    does; when validate would reject it, undo both (nothing written, the registry as it was) and raise SpecInvalid
    with validate's problems, so `new scenario` never leaves a scenario its own check refuses."""
    from orchestrator.validate import validate_paths

    registry = _registry_text() if paths.ID_REGISTRY.is_file() else None
    written = _write_all({target / name: text for name, text in texts.items()})

    def undo() -> None:
        for file in written:
            file.unlink(missing_ok=True)
        shutil.rmtree(target, ignore_errors=True)
        if registry is not None:
            paths.ID_REGISTRY.write_text(registry)

    try:
        registered = register_id(scenario_id, application, faults)
        problems = validate_paths([target])
    except BaseException:
        undo()
        raise
    if problems:
        undo()
        named = [Problem(p.file, p.path, f"{p.message} ({option})" if (option := _option_of(p.path)) else p.message)
                 for p in problems]
        raise SpecInvalid(named, f"refused: `opsbench validate` would reject scenario {scenario_id} as these "
                                 "options make it, so nothing was written; change the options named below")
    return [*written, registered]


_OPTIONS = {"propagationLength": "--propagation-length", "resolutionSteps": "--resolution-steps",
            "technologies": "--technology", "class": "--class", ".faults": "--fault", "baseline": "--baseline-from",
            "application": "--application", "project": "--project"}
"""The `new scenario` option behind a field of the scaffold, to name it in a refusal."""


def _option_of(json_path: str) -> str | None:
    return next((option for field, option in _OPTIONS.items() if field in json_path), None)


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
