"""JSON Schema checks of YAML documents (specs, ground truth), each problem located by JSON path.

Kept apart from ``validate`` (the semantic checks) so that loading a spec can check its schema without importing
the validator, which itself reads specs.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema

from orchestrator import paths
from orchestrator.errors import Problem


@cache
def load_schema(name: str) -> dict[str, Any]:
    schema: dict[str, Any] = json.loads((paths.SCHEMAS_DIR / f"{name}.schema.json").read_text())
    return schema


def json_path(parts: Iterable[Any]) -> str:
    out = "$"
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


JSON_SCALARS = (str, int, float, bool, type(None))
MAX_DATA_PROBLEMS = 20


def json_data_problems(file: Path, data: Any) -> list[Problem]:
    """YAML values JSON has no type for: a non-string key, a timestamp, binary, a set, a recursive alias.

    The schema, the semantic checks and run.json all assume JSON data: jsonschema raises on an int key under
    ``patternProperties``, and a date in free-form role args would pass Ansible's checks and break run.json.
    Shared nodes (aliases) are checked once, so an alias bomb costs one visit per distinct node.
    """
    problems: list[Problem] = []
    seen: set[int] = set()

    def walk(node: Any, parts: tuple[Any, ...], stack: frozenset[int]) -> None:
        if len(problems) >= MAX_DATA_PROBLEMS:
            return
        if isinstance(node, JSON_SCALARS):
            return
        where = json_path(parts)
        if not isinstance(node, dict | list):
            problems.append(Problem(str(file), where, f"a YAML {type(node).__name__} is not a JSON value; "
                                                      "quote it to make it a string"))
            return
        if id(node) in stack:
            problems.append(Problem(str(file), where, "recursive YAML alias: a value may not contain itself"))
            return
        if id(node) in seen:
            return
        seen.add(id(node))
        inner = stack | {id(node)}
        if isinstance(node, list):
            for i, item in enumerate(node):
                walk(item, (*parts, i), inner)
            return
        for key, value in node.items():
            if not isinstance(key, str):
                problems.append(Problem(str(file), where, f"key {key!r} is a YAML {type(key).__name__}, "
                                                          "not a string; quote it"))
                continue
            walk(value, (*parts, key), inner)

    walk(data, (), frozenset())
    return problems


@cache
def _schema_validator(schema_name: str) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(load_schema(schema_name))


def schema_problems(file: Path, data: Any, schema_name: str) -> list[Problem]:
    """JSON Schema problems, each located by JSON path; values that are not JSON data are reported first,
    alone, since the schema cannot judge them (and jsonschema may raise on them)."""
    problems = json_data_problems(file, data)
    if problems:
        return problems
    validator = _schema_validator(schema_name)
    for err in sorted(validator.iter_errors(data), key=lambda e: list(map(str, e.absolute_path))):
        problems.append(Problem(str(file), json_path(err.absolute_path), err.message))
    return problems
