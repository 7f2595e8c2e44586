"""Role argument specs (``meta/argument_specs.yml``): read them, check and resolve arguments.

Scenario specs give role arguments without the role prefix (``program: web``); roles follow
the Ansible convention of role-prefixed variables (``fault_loopweb_stop_program``). This
module does the mapping. Checking is Ansible's own ``ArgumentSpecValidator``, the code that
validates a role's arguments when it runs, so offline validation and run time agree.
"""

from __future__ import annotations

import copy
import functools
import re
from pathlib import Path
from typing import Any

from orchestrator import paths
from orchestrator.yamlfile import read_yaml  # names file and line on malformed YAML


def role_dir(role: str) -> Path:
    return paths.ROLES_DIR / role


def load_argument_specs(role: str) -> dict[str, Any]:
    """The role's entry points and their specs; empty if the role has no argument_specs.yml."""
    spec_file = role_dir(role) / "meta" / "argument_specs.yml"
    try:
        stamp = spec_file.stat()
    except OSError:
        return {}
    return copy.deepcopy(_parsed_specs(str(spec_file), stamp.st_mtime_ns, stamp.st_size))


@functools.lru_cache(maxsize=512)
def _parsed_specs(spec_file: str, mtime_ns: int, size: int) -> dict[str, Any]:
    """One parse per version of the file: validating a spec reads a dozen roles' specs, and a generated corpus
    validates hundreds of specs over the same roles (the file's mtime and size key the cache)."""
    data = read_yaml(Path(spec_file))
    specs = data.get("argument_specs", {}) if isinstance(data, dict) else {}
    return specs if isinstance(specs, dict) else {}


def entry_options(role: str, entry_point: str) -> dict[str, Any]:
    """The entry point's options, keeping only well-formed ones (name -> mapping): a malformed role file
    must not make the checks of a spec that uses it raise."""
    entry = load_argument_specs(role).get(entry_point)
    options = entry.get("options") if isinstance(entry, dict) else None
    if not isinstance(options, dict):
        return {}
    return {name: opt for name, opt in options.items() if isinstance(name, str) and isinstance(opt, dict)}


SCALAR_TYPES = {"str", "path", "raw", "int", "float", "bool", "bytes", "bits", "jsonarg", "json"}
STRING_TYPES = {"str", "path"}


def value_kind(value: Any) -> str:
    """How a YAML value reads in a message: null, a list, a mapping, or its type."""
    if value is None:
        return "null"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return f"a {type(value).__name__}"


def _strict_problems(role: str, options: dict[str, Any], args: dict[str, Any]) -> dict[str, str]:
    """What Ansible's validator lets through but the role cannot use, by argument name. The role gets the value
    as written (extra vars), not Ansible's conversion of it: so no null (the role would get None, not its
    default), no list or mapping where a string is wanted (converted to its Python repr), no scalar where a
    list or mapping is wanted (a string split at commas or parsed as k=v), for the argument and for the items
    of a list of strings."""
    found: dict[str, str] = {}
    for name, value in args.items():
        opt = options.get(f"{role}_{name}")
        if opt is None:
            continue  # unsupported: Ansible reports it
        wanted = opt.get("type", "str")
        if value is None:
            found[name] = f"argument '{name}' is null: give a value, or leave it out to use the role's default"
        elif wanted in STRING_TYPES and isinstance(value, list | dict):
            found[name] = f"argument '{name}' must be a {wanted}, not {value_kind(value)}"
        elif wanted == "list" and not isinstance(value, list):  # Ansible splits a string at commas
            found[name] = f"argument '{name}' must be a list, not {value_kind(value)}"
        elif wanted == "dict" and not isinstance(value, dict):  # Ansible parses a string as k=v pairs
            found[name] = f"argument '{name}' must be a mapping, not {value_kind(value)}"
        elif wanted == "list" and opt.get("elements") in STRING_TYPES and isinstance(value, list):
            bad = [i for i, item in enumerate(value) if item is None or isinstance(item, list | dict)]
            if bad:
                found[name] = (f"argument '{name}' item {bad[0]} must be a {opt['elements']}, "
                               f"not {value_kind(value[bad[0]])}")
    return found


def _prefixed(role: str, args: dict[str, Any]) -> dict[str, Any]:
    return {f"{role}_{k}": v for k, v in args.items()}


def check_role_args(role: str, entry_point: str, args: dict[str, Any]) -> list[str]:
    """Problems with ``args`` (unprefixed names) for ``role``'s ``entry_point``; empty when fine."""
    from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

    if not role_dir(role).is_dir():
        return [f"role '{role}' does not exist under {paths.ROLES_DIR}"]
    if entry_point not in load_argument_specs(role):
        return [f"role '{role}' has no entry point '{entry_point}' in meta/argument_specs.yml"]
    from ansible.module_utils.errors import UnsupportedError

    options = entry_options(role, entry_point)
    strict = _strict_problems(role, options, args)
    result = ArgumentSpecValidator(options).validate(_prefixed(role, args))
    problems = list(strict.values())
    for err in result.errors:
        # Report names the way the spec author wrote them, without the role prefix.
        text = re.sub(rf"\b{role}_", "", str(err))
        if any(f"'{name}'" in text for name in strict):
            continue  # already reported, more plainly
        problems.append(f"unsupported argument(s): {text}" if isinstance(err, UnsupportedError) else text)
    return problems


def resolve_role_vars(role: str, entry_point: str, args: dict[str, Any]) -> dict[str, Any]:
    """Every option of the entry point, prefixed: the spec's value or the spec default.

    Passing all options (not just the given ones) matters: the playbooks set them as facts,
    and a fact left from an earlier item of the same role must not leak into the next.
    """
    resolved = {name: opt.get("default") for name, opt in entry_options(role, entry_point).items()}
    resolved.update(_prefixed(role, args))
    return resolved
