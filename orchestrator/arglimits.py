"""Bounds the environment puts on a fault role's arguments, checked at validate time (issue 34's "a mechanism whose
arguments exceed the environment fails at validate time with a located error").

Ansible's argument specs know types and closed sets, not ranges or the topology, so a role states the rest in
``roles/<role>/meta/limits.yml``::

    limits:
      - arg: rps                      # a number: min, max, abs_min (|value| at least)
        min: 0.1
        max: 1000
        why: "..."                    # every limit says why; the message quotes it
      - arg: instance                 # an entity of the topology: kind, service, replicas_at_least, not_of,
        replicas_at_least: 2          # uncached_calls (its service calls a service per request, not only
                                      # through a cache: a call edge not marked `unreadable: cached`)
      - arg: path_re                  # regex: true -- a Python regular expression that compiles
        regex: true
      - calls: {source: source, target: name}   # the topology has a call from one argument's service to the other's
      - arg: hold_s                   # less_than: another argument's name -- a number below that argument's value
        less_than: period_s
      - arg: resolver                 # pattern: a regular expression the whole (string) value must match
        pattern: '[0-9.]+'

A value left out of the spec is the role's default (from its argument spec). The replicas of a service are the
scenario's ``environment.args.replicas`` when it sets them, else the instances the topology declares. Problems
name the scenario file and ``$.faults[i].args.<arg>``; a malformed limits file is reported against that file.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from orchestrator.argspecs import entry_options, role_dir
from orchestrator.errors import Problem
from orchestrator.yamlfile import read_yaml

LIMITS_FILE = Path("meta") / "limits.yml"
NUMBER_KEYS = ("min", "max", "abs_min")
ENTITY_KEYS = ("kind", "service", "replicas_at_least", "not_of", "uncached_calls")
KNOWN_KEYS = {"arg", "why", "calls", "regex", "less_than", "pattern", *NUMBER_KEYS, *ENTITY_KEYS}


def limits_file(role: str) -> Path:
    return role_dir(role) / LIMITS_FILE


def load_limits(role: str) -> tuple[list[dict[str, Any]], list[Problem]]:
    """The role's limits (empty when it has no file) and the problems of the file itself."""
    path = limits_file(role)
    if not path.is_file():
        return [], []
    data = read_yaml(path)
    items = data.get("limits") if isinstance(data, dict) else None
    if not isinstance(items, list):
        return [], [Problem(str(path), "$.limits", "a list of limits is required")]
    out: list[dict[str, Any]] = []
    problems: list[Problem] = []
    for i, item in enumerate(items):
        where = f"$.limits[{i}]"
        if not isinstance(item, dict):
            problems.append(Problem(str(path), where, "a limit is a mapping"))
            continue
        unknown = sorted(set(item) - KNOWN_KEYS)
        if unknown:
            problems.append(Problem(str(path), where, f"unknown key(s) {', '.join(unknown)} (known: "
                                    f"{', '.join(sorted(KNOWN_KEYS))})"))
        elif ("arg" in item) == ("calls" in item):
            problems.append(Problem(str(path), where, "give either arg (one argument) or calls (two)"))
        elif "calls" in item and not (isinstance(item["calls"], dict) and set(item["calls"]) == {"source", "target"}):
            problems.append(Problem(str(path), f"{where}.calls", "a mapping with source and target (argument names)"))
        elif any(k in item and (isinstance(item[k], bool) or not isinstance(item[k], int | float))
                 for k in (*NUMBER_KEYS, "replicas_at_least")):
            problems.append(Problem(str(path), where, "min, max, abs_min and replicas_at_least are numbers"))
        elif "less_than" in item and not isinstance(item["less_than"], str):
            problems.append(Problem(str(path), f"{where}.less_than", "the name of another argument"))
        elif "pattern" in item and not _compiles(item["pattern"]):
            problems.append(Problem(str(path), f"{where}.pattern", "a regular expression that compiles"))
        elif not isinstance(item.get("why"), str) or not item["why"].strip():
            problems.append(Problem(str(path), f"{where}.why", "say why the environment sets this limit"))
        else:
            out.append(item)
    return out, problems


def _value(role: str, args: Mapping[str, Any], name: str) -> Any:
    if name in args:
        return args[name]
    return entry_options(role, "inject").get(f"{role}_{name}", {}).get("default")


def _service_of(topo: Mapping[str, Any], entity: str) -> str:
    for edge in topo.get("edges", []):
        if edge.get("type") == "owns" and edge.get("target") == entity:
            kinds = {e["id"]: e.get("kind") for e in topo.get("entities", [])}
            if kinds.get(entity) == "instance":
                return str(edge["source"])
    return entity


def _replicas(topo: Mapping[str, Any], service: str, env_args: Mapping[str, Any]) -> int:
    declared = env_args.get("replicas")
    if isinstance(declared, dict) and isinstance(declared.get(service), int):
        return int(declared[service])
    kinds = {e["id"]: e.get("kind") for e in topo.get("entities", [])}
    owned = [e["target"] for e in topo.get("edges", []) if e.get("type") == "owns" and e.get("source") == service
             and kinds.get(e.get("target")) == "instance"]
    return len(owned) or (1 if service in kinds else 0)


def _compiles(pattern: Any) -> bool:
    if not isinstance(pattern, str):
        return False
    try:
        re.compile(pattern)
    except re.error:
        return False
    return True


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _number_problem(value: Any, limit: Mapping[str, Any]) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None  # a wrong type: the argument checks report it
    if "min" in limit and value < limit["min"]:
        return f"is {value}, below the environment's minimum {limit['min']}"
    if "max" in limit and value > limit["max"]:
        return f"is {value}, above the environment's maximum {limit['max']}"
    if "abs_min" in limit and abs(value) < limit["abs_min"]:
        return f"is {value}, but its size must be at least {limit['abs_min']}"
    return None


def _entity_problem(value: Any, limit: Mapping[str, Any], topo: Mapping[str, Any], role: str,
                    args: Mapping[str, Any], env_args: Mapping[str, Any]) -> str | None:
    if not isinstance(value, str):
        return None
    kinds = {e["id"]: e.get("kind") for e in topo.get("entities", [])}
    if value not in kinds:
        return f"'{value}' is not an entity of the environment's topology"
    service = _service_of(topo, value)
    if "kind" in limit and kinds[value] != limit["kind"]:
        return f"'{value}' is a {kinds[value]}, not a {limit['kind']}"
    if "service" in limit and service != limit["service"]:
        return f"'{value}' belongs to {service}, not to {limit['service']}"
    if "replicas_at_least" in limit and (n := _replicas(topo, service, env_args)) < limit["replicas_at_least"]:
        return f"{service} runs {n} instance(s) in this environment, fewer than {limit['replicas_at_least']}"
    if limit.get("uncached_calls"):
        calls = [e for e in topo.get("edges", []) if e.get("type") == "calls" and e.get("source") == service
                 and "unreadable" in e]
        if not any(e["unreadable"] != "cached" for e in calls):
            cached = ", ".join(str(e["target"]) for e in calls)
            return (f"{service} calls no service per request in this environment"
                    + (f" (only through a cache: {cached})" if cached else ""))
    if "not_of" in limit:
        other = _value(role, args, str(limit["not_of"]))
        if isinstance(other, str) and service == _service_of(topo, other):
            return f"'{value}' is an instance of {service}, which argument {limit['not_of']} names"
    return None


def limit_problems(file: str, index: int, role: str, args: Mapping[str, Any], topo: Mapping[str, Any] | None,
                   env_args: Mapping[str, Any]) -> list[Problem]:
    """Where fault ``index`` of a spec (role and arguments) exceeds what the environment allows."""
    limits, problems = load_limits(role)
    reported: set[str] = set()  # one problem per argument: the first limit it breaks
    for limit in limits:
        why = str(limit["why"]).strip()
        if "calls" in limit:
            src, dst = (_value(role, args, str(limit["calls"][k])) for k in ("source", "target"))
            if topo is None or not isinstance(src, str) or not isinstance(dst, str):
                continue
            pair = (_service_of(topo, src), _service_of(topo, dst))
            edges = {(e.get("source"), e.get("target")) for e in topo.get("edges", []) if e.get("type") == "calls"}
            if pair not in edges:
                problems.append(Problem(file, f"$.faults[{index}].args.{limit['calls']['target']}",
                                        f"{pair[0]} does not call {pair[1]} in this environment ({why})"))
            continue
        name = str(limit["arg"])
        if name in reported:
            continue
        value = _value(role, args, name)
        msg: str | None = None
        if any(k in limit for k in NUMBER_KEYS):
            msg = _number_problem(value, limit)
        if msg is None and "less_than" in limit:
            other = _value(role, args, str(limit["less_than"]))
            if _is_number(value) and _is_number(other) and value >= other:
                msg = f"is {value}, not below {limit['less_than']} ({other})"
        if msg is None and "pattern" in limit and isinstance(value, str) and not re.fullmatch(limit["pattern"], value):
            msg = f"'{value}' does not match {limit['pattern']}"
        if msg is None and limit.get("regex") and isinstance(value, str):
            try:
                re.compile(value)
            except re.error as exc:
                msg = f"is not a regular expression: {exc}"
        if msg is None and topo is not None and any(k in limit for k in ENTITY_KEYS):
            msg = _entity_problem(value, limit, topo, role, args, env_args)
        if msg is not None:
            reported.add(name)
            problems.append(Problem(file, f"$.faults[{index}].args.{name}", f"{msg} ({why})"))
    return problems
