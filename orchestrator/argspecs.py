"""Role argument specs (``meta/argument_specs.yml``): read them, check and resolve arguments.

Scenario specs give role arguments without the role prefix (``program: web``); roles follow
the Ansible convention of role-prefixed variables (``fault_loopweb_stop_program``). This
module does the mapping. Checking is Ansible's own ``ArgumentSpecValidator``, the code that
validates a role's arguments when it runs, so offline validation and run time agree.
"""

from __future__ import annotations

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
    if not spec_file.is_file():
        return {}
    data = read_yaml(spec_file) or {}
    specs = data.get("argument_specs", {})
    return specs if isinstance(specs, dict) else {}


def entry_options(role: str, entry_point: str) -> dict[str, Any]:
    options = load_argument_specs(role).get(entry_point, {}).get("options") or {}
    return options if isinstance(options, dict) else {}


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

    result = ArgumentSpecValidator(entry_options(role, entry_point)).validate(_prefixed(role, args))
    problems = []
    for err in result.errors:
        # Report names the way the spec author wrote them, without the role prefix.
        text = re.sub(rf"\b{role}_", "", str(err))
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
