"""Generated docs, one source of truth per fact.

- ``docs/scenario-spec.md`` and ``docs/ground-truth.md`` from the JSON Schemas;
- ``docs/agent-outputs.md`` from the agent output schemas, ``docs/manifest.md`` from the manifest's;
- ``docs/faults.md`` from every ``roles/fault_*/meta/argument_specs.yml``;
- ``docs/scenarios.md`` from every scenario spec and its ground truth;
- ``docs/devops-projects.md`` from the DevOps upstream projects' catalogue and measured times.

Nothing here lists roles or scenarios: the catalogs follow what is on disk.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from orchestrator import paths
from orchestrator.devops_projects import docs as devops_projects_docs
from orchestrator.generation.effects import has_effect_model, load_effect_model
from orchestrator.schemacheck import load_schema
from orchestrator.spec import spec_files
from orchestrator.yamlfile import read_yaml

# Fault families, derived from the role name: (name prefix after `fault_`, family). A role
# belongs to the first entry whose prefix is its whole name or is followed by `_`.
FAULT_FAMILIES: tuple[tuple[str, str], ...] = (
    ("app", "application"),
    ("container", "container"),
    ("config", "configuration"),
    ("redis_password", "configuration"),
    ("db", "configuration"),
    ("redis_oom", "dependency"),
    ("postgres", "dependency"),
    ("network", "network"),
    ("http", "network"),
    ("load", "traffic"),
    ("volume", "storage"),
    ("loopweb", "loopweb"),
    ("k8s", "kubernetes"),
    ("browser", "browser"),
    ("benign", "distractor"),
)
FAMILY_INTRO = {
    "application": "Faults in the services' own code paths, switched on through feature flags or the app's settings.",
    "container": "Faults in the containers the services run in: stopped, killed, paused, starved, wrong image.",
    "configuration": "Wrong configuration of a service or of its access to a dependency.",
    "dependency": "A datastore the services depend on misbehaves.",
    "network": "Traffic between entities is dropped, delayed or answered wrongly.",
    "traffic": "The load on the shop changes.",
    "storage": "The data a service keeps on disk becomes unavailable.",
    "loopweb": "Faults of the minimal loopweb environment (nginx + one Python service, no containers).",
    "kubernetes": "Faults of the kubernetes backend (env_k8s_shop): JSON patches of Deployments, Services and "
                  "Secrets whose exact inverse is saved first (roles/k8s_control), or objects they create "
                  "(NetworkPolicy, ResourceQuota) and delete again. Validated offline only so far.",
    "browser": "Faults a user sees in the browser: the edge answers browser requests wrongly, or a frontend release "
               "changes a page's script or style (see cuj.md).",
    "distractor": "Benign changes at incident time that are not a cause (`faults[].distractor`, drawn by "
                  "`vary.distractors`: generation.md).",
    "noise": "Background anomalies that keep running while the agent works (the spec's `noise` section, roles "
             "`noise_*`): started after the faults, removed before them, never a cause (authoring.md).",
    "other": "Roles whose name matches no family prefix (see FAULT_FAMILIES in orchestrator/docgen.py).",
}


def fault_family(role: str) -> str:
    """The family of a fault role, from its name (``fault_redis_oom`` -> dependency)."""
    if role.startswith("noise_"):
        return "noise"
    name = role.removeprefix("fault_")
    for prefix, family in FAULT_FAMILIES:
        if name == prefix or name.startswith(prefix + "_"):
            return family
    return "other"

_INTRO = {
    "scenario": (
        "A scenario is a directory under `scenario_specs/` holding `scenario.yaml` (this "
        "format) and its ground truth (`ground_truth.yaml`, see [ground-truth.md](ground-truth.md)). "
        "Start the file with `# yaml-language-server: $schema=../../orchestrator/schemas/"
        "scenario.schema.json` so editors complete and check fields.\n\n"
        "Role arguments (`environment.args`, `faults[].args`, `checks.*[].args`, "
        "`evaluation.evaluators[].params`) are written **without** the role prefix "
        "(`program: web` for the role variable `fault_loopweb_stop_program`) and are checked "
        "against the role's `meta/argument_specs.yml` by `opsbench validate`.\n\n"
        "Complexity follows ITBench Eq. 6: `value = cbrt(propagationLength x resolutionSteps x "
        "len(technologies))`, rounded to 2 decimals; `level` is Easy below 2.0, Medium below "
        "2.7, Hard from 2.7 (our cut-offs; the paper gives none).\n\n"
        "Ids are immutable: every id is registered in `scenario_specs/REGISTRY.yaml` with the "
        "application and fault roles it stands for, and validation rejects an id whose meaning "
        "changed, a retired id, and duplicates."
    ),
    "manifest": (
        "The lifecycle's handover step (`roles/agent_access`) writes the manifest to "
        "`<run dir>/agent/manifest.json` and passes its path in `$OPSBENCH_MANIFEST`. It carries "
        "nothing about the fault or the ground truth; the observability stack is reached through "
        "the tool gateway named in `tools`, with the bearer token in `token_file`. See "
        "[agents.md](agents.md) for writing an agent."
    ),
    "ground_truth": (
        "Ground truth sits beside the spec (`groundTruth`, default `ground_truth.yaml`). "
        "Only evaluators read it; it never reaches the agent. Every entity id it names "
        "(entities, propagation sources and targets, alert and fault entities) must exist in "
        "the topology the environment role declares in `files/topology.yml`."
    ),
}


def _type(node: dict[str, Any]) -> str:
    if "const" in node:
        return f"`{node['const']}`"
    if "enum" in node:
        return " \\| ".join(f"`{v}`" for v in node["enum"])
    if "$ref" in node:
        return str(node["$ref"]).rsplit("/", 1)[-1]
    t = node.get("type", "any")
    if t == "array" and "items" in node:
        return f"list of {_type(node['items'])}"
    return str(t)


def _rows(node: dict[str, Any], prefix: str, required: set[str], defs: dict[str, Any]) -> list[str]:
    rows = []
    for name, sub in node.get("properties", {}).items():
        path = f"{prefix}{name}"
        ref = sub.get("$ref", "")
        target = defs.get(ref.rsplit("/", 1)[-1], {}) if ref else sub
        desc = (sub.get("description") or target.get("description") or "").replace("|", "\\|")
        extra = []
        if "default" in sub:
            extra.append(f"default `{sub['default']}`")
        if "pattern" in sub:
            extra.append(f"pattern `{sub['pattern']}`")
        cell = desc + (f" ({'; '.join(extra)})" if extra else "")
        shown = target if "enum" in target else sub
        rows.append(f"| `{path}` | {_type(shown)} | {'yes' if name in required else ''} | {cell} |")
        items = target.get("items", {}) if target.get("type") == "array" else None
        if target.get("type") == "object" and "properties" in target:
            rows += _rows(target, path + ".", set(target.get("required", [])), defs)
        elif items and "properties" in items:
            rows += _rows(items, path + "[].", set(items.get("required", [])), defs)
        for pattern, pat_node in target.get("patternProperties", {}).items():
            rows.append(f"| `{path}.<{pattern}>` | {_type(pat_node)} | | per-step limits |")
            rows += _rows(pat_node, f"{path}.<step>.", set(pat_node.get("required", [])), defs)
    return rows


OUTPUT_SCHEMAS = (
    ("diagnosis_output", "diagnose"), ("mitigation_output", "mitigate"), ("ciso_output", "assess"),
    ("finops_output", "analyze"), ("fix_output", "fix"), ("tests_output", "write-tests"), ("trajectory_record", None),
)


def render_outputs() -> str:
    """docs/agent-outputs.md: the output schema of every task kind and the trajectory record."""
    lines = [
        "# Agent outputs",
        "",
        "<!-- Generated by `opsbench docs` from orchestrator/schemas/*_output.schema.json and "
        "trajectory_record.schema.json; do not edit by hand. -->",
        "",
        "An agent writes one JSON file (`$OPSBENCH_OUTPUT`, also in the manifest's `output.path`) "
        "that answers every task of the scenario: it must match the schema of each task's kind "
        "(`output.schemas` in the manifest). A missing file is scored `no_submission`, a file that "
        "is not JSON or does not match `malformed`: failures kept apart from wrong answers. "
        "Schemas are versioned (`schema` field, `$id`); within a version fields are only added. "
        "The optional `schema` field names one version, so an output answering several task kinds "
        "leaves it out.",
        "",
    ]
    for name, kind in OUTPUT_SCHEMAS:
        schema = load_schema(name)
        lines += [f"## {schema['title']}", "",
                  (f"Task kind `{kind}`, " if kind else "") + f"`orchestrator/schemas/{name}.schema.json`. "
                  + schema.get("description", ""), "",
                  "| Field | Type | Required | Meaning |", "| --- | --- | --- | --- |",
                  *_rows(schema, "", set(schema.get("required", [])), schema.get("$defs", {})), ""]
    return "\n".join(lines)


def render(schema_name: str, title: str) -> str:
    schema = load_schema(schema_name)
    lines = [
        f"# {title}",
        "",
        f"<!-- Generated by `opsbench docs` from orchestrator/schemas/{schema_name}.schema.json;"
        " do not edit by hand. -->",
        "",
        schema.get("description", ""),
        "",
        _INTRO[schema_name],
        "",
        "| Field | Type | Required | Meaning |",
        "| --- | --- | --- | --- |",
        *_rows(schema, "", set(schema.get("required", [])), schema.get("$defs", {})),
        "",
    ]
    return "\n".join(lines)


def _cell(value: Any) -> str:
    """Text for one Markdown table cell: one line, pipes escaped."""
    return " ".join(str(value).split()).replace("|", "\\|")


def _flow(value: Any) -> str:
    """A value the way a spec author writes it in YAML (flow style, one line)."""
    text = yaml.safe_dump(value, default_flow_style=True, width=2**31, sort_keys=False).rstrip()
    return text.removesuffix("\n...").strip()


def _text(value: Any) -> str:
    """An Ansible description (a string or a list of paragraphs) as one paragraph."""
    parts = value if isinstance(value, list) else [value] if value else []
    return " ".join(" ".join(str(p).split()) for p in parts)


def _read_mapping(path: Path) -> dict[str, Any]:
    data = read_yaml(path) if path.is_file() else None
    return data if isinstance(data, dict) else {}


def _scenarios() -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(spec, ground truth) of every scenario on disk, sorted by id; tolerant of missing fields."""
    found = []
    for file in spec_files():
        spec = _read_mapping(file)
        gt_name = str(spec.get("groundTruth", "ground_truth.yaml"))
        found.append((spec, _read_mapping(file.parent / gt_name)))
    return sorted(found, key=lambda pair: str(pair[0].get("metadata", {}).get("id", "")))


def _scenario_id(spec: dict[str, Any]) -> str:
    return str(spec.get("metadata", {}).get("id", "?"))


def _fault_roles() -> list[str]:
    """The fault roles, then the noise roles (listed in the same catalog: same entry points, same options)."""
    return [*sorted(p.name for p in paths.ROLES_DIR.glob("fault_*") if p.is_dir()),
            *sorted(p.name for p in paths.ROLES_DIR.glob("noise_*") if p.is_dir())]


def _option_type(opt: dict[str, Any]) -> str:
    kind = str(opt.get("type", "str"))
    return f"{kind} of {opt['elements']}" if kind == "list" and "elements" in opt else kind


def render_faults() -> str:
    """docs/faults.md: every fault role, grouped by family, with its options and scenarios."""
    used_by: dict[str, list[str]] = {}
    for spec, _gt in _scenarios():
        for fault in [*(spec.get("faults") or []), *(spec.get("noise") or [])]:
            users = used_by.setdefault(str(fault.get("role")), [])
            if _scenario_id(spec) not in users:
                users.append(_scenario_id(spec))
    families: dict[str, list[str]] = {}
    for role in _fault_roles():
        families.setdefault(fault_family(role), []).append(role)
    order = [f for f in FAMILY_INTRO if f in families]

    lines = [
        "# Fault catalog",
        "",
        "<!-- Generated by `opsbench docs` from roles/fault_*/meta/argument_specs.yml; do not edit by hand. -->",
        "",
        "Every fault role, grouped by family (derived from the role name, see `FAULT_FAMILIES` in "
        "`orchestrator/docgen.py`). Options are named as a scenario spec passes them in "
        "`faults[].args`, without the role prefix. How to write a fault: [authoring.md](authoring.md).",
        "",
        f"**{sum(len(roles) for family, roles in families.items() if family != 'noise')} fault roles**"
        + (f" and {len(families['noise'])} noise roles" if "noise" in families else "") + ": "
        + ", ".join(f"{family} {len(families[family])}" for family in order) + ".",
        "",
        "| Family | Role | What it does | Scenarios |",
        "| --- | --- | --- | --- |",
    ]
    for family in order:
        for role in families[family]:
            inject = _entry(role, "inject")
            scns = ", ".join(f"[{s}](scenarios.md#{s})" for s in used_by.get(role, [])) or "none yet"
            lines.append(f"| {family} | [`{role}`](#{role}) | {_cell(inject.get('short_description', ''))} "
                         f"| {scns} |")
    for family in order:
        lines += ["", f"## {family}", "", FAMILY_INTRO[family]]
        for role in families[family]:
            lines += _fault_section(role, used_by.get(role, []))
    return "\n".join(lines) + "\n"


def _entry(role: str, entry_point: str) -> dict[str, Any]:
    specs = _read_mapping(paths.ROLES_DIR / role / "meta" / "argument_specs.yml").get("argument_specs")
    entry = specs.get(entry_point) if isinstance(specs, dict) else None
    return entry if isinstance(entry, dict) else {}


def _fault_section(role: str, scenarios: list[str]) -> list[str]:
    inject, remove = _entry(role, "inject"), _entry(role, "remove")
    lines = ["", f"### {role}", ""]
    if not inject:
        return [*lines, "No `inject` entry point in `meta/argument_specs.yml`."]
    lines.append(_text(inject.get("short_description")) or "(no short description)")
    if inject.get("description"):
        lines += ["", _text(inject["description"])]
    if remove:
        lines += ["", "**Removal:** " + " ".join(
            t for t in (_text(remove.get("short_description")), _text(remove.get("description"))) if t)]
    deps = _read_mapping(paths.ROLES_DIR / role / "meta" / "main.yml").get("dependencies") or []
    names = [d if isinstance(d, str) else str(d.get("role", d.get("name", ""))) for d in deps]
    if names:
        lines += ["", "**Depends on:** " + ", ".join(f"`{n}`" for n in names)]
    shown = ", ".join(f"[{s}](scenarios.md#{s})" for s in scenarios) or "none yet"
    lines += ["", f"**Scenarios:** {shown}", ""]
    options = inject.get("options") or {}
    if not options:
        return [*lines, "No options."]
    lines += ["| Option | Type | Default | Choices | Required | Description |",
              "| --- | --- | --- | --- | --- | --- |"]
    for name, opt in options.items():
        opt = opt if isinstance(opt, dict) else {}
        short = name.removeprefix(f"{role}_")
        default = f"`{_cell(_flow(opt['default']))}`" if opt.get("default") is not None else ""
        choices = ", ".join(f"`{_cell(c)}`" for c in opt.get("choices") or [])
        lines.append(f"| `{short}` | {_option_type(opt)} | {default} | {choices} "
                     f"| {'yes' if opt.get('required') else ''} | {_cell(_text(opt.get('description')))} |")
    return lines


def _expected_alerts(spec: dict[str, Any]) -> list[str]:
    alerts = []
    for check in (spec.get("checks") or {}).get("manifestation") or []:
        if check.get("role") != "check_alerts":
            continue
        for labels in (check.get("args") or {}).get("firing") or []:
            labels = dict(labels) if isinstance(labels, dict) else {}
            name = str(labels.pop("alertname", "*"))
            extra = ",".join(f"{k}={v}" for k, v in labels.items())
            alerts.append(f"{name}{{{extra}}}" if extra else name)
    return alerts


def _hidden(spec: dict[str, Any]) -> list[str]:
    obs = (spec.get("environment") or {}).get("observability") or {}
    return [family for family in ("metrics", "traces", "logs") if obs.get(family) is False]


def _counts(specs: list[dict[str, Any]]) -> list[str]:
    """The scenario counts, per domain and per environment (domain, backend, application) with its classes: the
    one statement of how many scenarios there are (other docs link here instead of restating them)."""
    domains: dict[str, int] = {}
    envs: dict[tuple[str, str, str], dict[str, int]] = {}
    for spec in specs:
        meta = spec.get("metadata") or {}
        env = spec.get("environment") or {}
        domain = str(meta.get("domain", "?"))
        domains[domain] = domains.get(domain, 0) + 1
        classes = envs.setdefault((domain, str(env.get("backend", "?")), str(env.get("application", "?"))), {})
        classes[str(meta.get("class", ""))] = classes.get(str(meta.get("class", "")), 0) + 1
    per_domain = ", ".join(f"{d} {n}" for d, n in sorted(domains.items()))
    lines = [f"**{len(specs)} scenarios**: {per_domain}.", "",
             "| Domain | Backend | Application | Scenarios | By class |", "| --- | --- | --- | --- | --- |"]
    for (domain, backend, application), classes in sorted(envs.items()):
        by_class = ", ".join(f"`{c}` {n}" for c, n in sorted(classes.items()))
        lines.append(f"| {domain} | `{backend}` | `{application}` | {sum(classes.values())} | {by_class} |")
    return lines


def render_scenarios() -> str:
    """docs/scenarios.md: the counts, then every scenario with its faults, expected alerts and root cause."""
    pairs = _scenarios()
    lines = [
        "# Scenario catalog",
        "",
        "<!-- Generated by `opsbench docs` from scenario_specs/*/scenario.yaml and ground_truth.yaml; "
        "do not edit by hand. -->",
        "",
        "Every scenario under `scenario_specs/`. *Alerts* are the label sets the manifestation "
        "checks wait for (`check_alerts` `firing`); *root cause* comes from the ground truth; "
        "*hidden* lists the evidence families the agent does not get. Fault roles: "
        "[faults.md](faults.md). Fields: [scenario-spec.md](scenario-spec.md).",
        "",
        "## Counts",
        "",
        *_counts([spec for spec, _gt in pairs]),
        "",
        "## Index",
        "",
        "| Id | Name | Complexity | Class | Faults | Alerts | Root cause | Hidden | Tags |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    sections: list[str] = []
    for spec, gt in pairs:
        meta = spec.get("metadata") or {}
        sid = _scenario_id(spec)
        cx = meta.get("complexity") or {}
        roles = list(dict.fromkeys(str(f.get("role")) for f in spec.get("faults") or []))
        faults = ", ".join(f"[`{r}`](faults.md#{r})" for r in roles) or "none"
        alerts = ", ".join(f"`{_cell(a)}`" for a in _expected_alerts(spec))
        causes = [str(e.get("id")) for e in gt.get("entities") or [] if e.get("rootCause")]
        cause = "no incident" if gt.get("incident") is False else ", ".join(f"`{c}`" for c in causes)
        lines.append(
            f"| [{sid}](#{sid}) | {_cell(meta.get('name', ''))} | {cx.get('level', '')} {cx.get('value', '')} "
            f"| {_cell(meta.get('class', ''))} | {faults} | {alerts} | {cause} | {', '.join(_hidden(spec))} "
            f"| {', '.join(_cell(t) for t in meta.get('tags') or [])} |")
        env = spec.get("environment") or {}
        sections += ["", f"### {sid}", "", f"**{_cell(meta.get('name', ''))}** "
                     f"(application `{env.get('application', '?')}`, {meta.get('domain', '?')}, "
                     f"version {meta.get('version', 1)})", "", " ".join(str(meta.get("description", "")).split())]
        injected = [f"`{f.get('name')}`: `{f.get('role')}` `{_flow(f.get('args') or {})}`"
                    for f in spec.get("faults") or []]
        if injected:
            sections += ["", "Faults, in injection order: " + "; ".join(injected) + "."]
        noise = [f"`{n.get('name')}`: [`{n.get('role')}`](faults.md#{n.get('role')}) `{_flow(n.get('args') or {})}`"
                 for n in spec.get("noise") or []]
        if noise:
            sections += ["", "Noise while the agent works: " + "; ".join(noise) + "."]
        if isinstance(vary := spec.get("vary"), dict):
            sections += ["", "A template ([generation.md](generation.md)): "
                         + _vary_text(vary, spec.get("faults") or []) + "."]
    templates = sum(1 for spec, _gt in pairs if "vary" in spec)
    lines[lines.index("## Index") - 1:lines.index("## Index") - 1] = [
        f"{templates} of them are templates (a `vary` section, [generation.md](generation.md)).", ""]
    return "\n".join([*lines, "", "## Scenarios", *sections]) + "\n"


def _vary_text(vary: dict[str, Any], faults: list[dict[str, Any]]) -> str:
    """A template's `vary` section in words: what target and which arguments are drawn."""
    target = vary.get("target") or {}
    role = next((str(f.get("role")) for f in faults if f.get("name") == target.get("fault")), "")
    fixed = load_effect_model(role).target if role and has_effect_model(role) else None
    what = [f"`{target.get('fault')}` on the one entity its role acts on (`{fixed}`)" if fixed else
            f"the target of `{target.get('fault')}` drawn from the topology"
            + (f" (kinds {', '.join(target['kinds'])})" if target.get("kinds") else "")
            + (f", never {', '.join(target['exclude'])}" if target.get("exclude") else "")]
    for arg in vary.get("args") or []:
        values = (f"{arg['range'][0]}..{arg['range'][1]} step {arg.get('step', 1)}" if "range" in arg
                  else ", ".join(map(str, arg.get("choices", []))))
        what.append(f"`{arg.get('arg')}` of `{arg.get('fault')}` from {values}")
    if isinstance(d := vary.get("distractors"), dict):
        counts = " or ".join(map(str, d.get("count", [0, 1])))
        what.append(f"{counts} distractor(s) of `{d.get('role')}` on a service "
                    + ("off the derived chain" if d.get("exclude_chain", True) else "other than the root cause"))
    for key, words in (("offset", "a start offset (s)"), ("load", "the load")):
        if isinstance(n := vary.get(key), dict):
            values = (f"{n['range'][0]}..{n['range'][1]} step {n.get('step', 1)}" if "range" in n
                      else ", ".join(map(str, n.get("choices", []))))
            what.append(f"{words} from {values}")
    return "; ".join(what)


# Every generated doc: path relative to the project root -> its renderer.
GENERATED: dict[str, Callable[[], str]] = {
    "docs/scenario-spec.md": functools.partial(render, "scenario", "Scenario spec reference"),
    "docs/ground-truth.md": functools.partial(render, "ground_truth", "Ground-truth reference"),
    "docs/agent-outputs.md": render_outputs,
    "docs/manifest.md": functools.partial(render, "manifest", "Agent manifest reference"),
    "docs/faults.md": render_faults,
    "docs/scenarios.md": render_scenarios,
    "docs/devops-projects.md": devops_projects_docs.render,
}


def write_docs(check: bool = False) -> list[str]:
    """Write (or, with check, compare) every generated doc; return the stale ones."""
    stale = []
    for rel, render_doc in GENERATED.items():
        target = paths.PROJECT_ROOT / rel
        text = render_doc()
        if not target.is_file() or target.read_text() != text:
            stale.append(rel)
            if not check:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(text)
    return stale
