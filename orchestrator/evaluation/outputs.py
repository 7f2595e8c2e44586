"""Agent outputs: which schema each task kind uses, and reading one without ever raising.

A missing file is ``no_submission``, a file that is not JSON or does not match its schema is
``malformed``; both are failures that the statistics keep apart from wrong answers.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema

from orchestrator.schemacheck import load_schema

# Task kind (scenario spec `tasks[].kind`) -> output schema (orchestrator/schemas/<name>.schema.json).
# fix and write-tests (DevOps) are validated here (their evaluator is evaluate_workspace).
SCHEMAS = {"diagnose": "diagnosis_output", "mitigate": "mitigation_output",
           "assess": "ciso_output", "analyze": "finops_output",
           "fix": "fix_output", "write-tests": "tests_output"}


@dataclass(frozen=True)
class Loaded:
    """An output read for scoring: ``status`` is scored | no_submission | malformed."""

    status: str
    output: dict[str, Any] | None = None
    reason: str = ""


@cache
def _validator(schema_name: str) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(load_schema(schema_name))


def _message(error: jsonschema.ValidationError) -> str:
    """The validator's message; a pattern's regex says little, so the field's description follows it."""
    described = error.schema.get("description") if isinstance(error.schema, dict) else None
    if error.validator == "pattern" and described:
        return f"{error.message} ({described})"
    return error.message


def schema_errors(output: Any, kind: str) -> list[str]:
    """Every way ``output`` fails the schema of task ``kind``, as 'path: message', first path first."""
    errors = sorted(_validator(SCHEMAS[kind]).iter_errors(output), key=lambda e: list(map(str, e.absolute_path)))
    return [f"{'/'.join(map(str, e.absolute_path)) or '$'}: {_message(e)}" for e in errors]


def shared_output_conflicts(kinds: list[str]) -> list[str]:
    """Why one output file cannot answer tasks of all ``kinds`` (empty when it can).

    One file answers every task and must match each kind's schema; a schema that refuses unknown fields
    (``additionalProperties: false``, e.g. fix) must then name every field another kind requires."""
    conflicts = []
    distinct = list(dict.fromkeys(k for k in kinds if k in SCHEMAS))
    for closed in distinct:
        schema = load_schema(SCHEMAS[closed])
        if schema.get("additionalProperties", True) is not False:
            continue
        for other in distinct:
            missing = [f for f in load_schema(SCHEMAS[other]).get("required", [])
                       if f not in schema.get("properties", {})]
            if other != closed and missing:
                conflicts.append(f"a {closed} task and a {other} task cannot share one output file: the "
                                 f"{SCHEMAS[closed]} schema refuses {', '.join(map(repr, missing))}, which the "
                                 f"{SCHEMAS[other]} schema requires")
    return conflicts


def load_output(path: Path | None, kind: str) -> Loaded:
    """Read and validate the agent's output file for a task of ``kind`` (see SCHEMAS)."""
    if path is None or not path.is_file():
        return Loaded("no_submission", reason="the agent wrote no output file")
    try:
        output = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        return Loaded("malformed", reason=f"output is not JSON: {exc}")
    except OSError as exc:
        return Loaded("no_submission", reason=f"output file unreadable: {exc.strerror}")
    errors = schema_errors(output, kind)
    if errors:
        return Loaded("malformed", reason=f"output does not match the {SCHEMAS[kind]} schema at {errors[0]}")
    return Loaded("scored", output)
