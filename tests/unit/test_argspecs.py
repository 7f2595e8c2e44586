"""Role argument specs: the un-prefixed <-> prefixed mapping and the role conventions it relies on."""

from __future__ import annotations

import pytest
import yaml

from orchestrator import paths
from orchestrator.argspecs import check_role_args, entry_options, resolve_role_vars

ROLES = sorted(p.name for p in paths.ROLES_DIR.iterdir() if p.is_dir())


def test_resolve_fills_defaults_and_prefixes_every_option():
    resolved = resolve_role_vars("check_http", "main", {"endpoint": "gateway"})
    assert resolved == {
        "check_http_endpoint": "gateway",
        "check_http_path": "/",
        "check_http_expect_status": 200,
        "check_http_interval": 1,
    }


def test_resolve_applies_overrides():
    resolved = resolve_role_vars("check_http", "main",
                                 {"endpoint": "web", "path": "/healthz", "expect_status": -1})
    assert resolved["check_http_path"] == "/healthz"
    assert resolved["check_http_expect_status"] == -1
    assert resolved["check_http_interval"] == 1


def test_resolve_gives_every_option_even_without_args():
    # Required options without a default still appear (as None), so no stale fact survives.
    assert resolve_role_vars("check_http", "main", {})["check_http_endpoint"] is None
    assert resolve_role_vars("fault_loopweb_stop", "remove", {}) == {"fault_loopweb_stop_program": "web"}


def test_resolve_is_per_entry_point():
    assert resolve_role_vars("env_loopweb", "teardown", {}) == {}
    assert resolve_role_vars("env_loopweb", "deploy", {})["env_loopweb_start_timeout"] == 20


@pytest.mark.parametrize(
    ("role", "entry", "args"),
    [
        ("check_http", "main", {"endpoint": "gateway", "path": "/products", "expect_status": 502}),
        ("fault_loopweb_stop", "inject", {"program": "gateway"}),
        ("fault_loopweb_stop", "remove", {}),
        ("fault_loopweb_upstream", "inject", {"port_offset": 9}),
        ("env_loopweb", "deploy", {"start_timeout": 5}),
        ("evaluate_diagnosis", "main", {}),
    ],
)
def test_good_args_pass(role, entry, args):
    assert check_role_args(role, entry, args) == []


def test_bad_args_are_reported_without_the_prefix():
    assert check_role_args("fault_loopweb_stop", "inject", {"program": "db"}) == [
        "value of program must be one of: gateway, web, got: db"]
    assert check_role_args("check_http", "main", {}) == ["missing required arguments: endpoint"]


def test_unknown_role_and_entry_point():
    assert check_role_args("fault_nope", "inject", {})[0].startswith("role 'fault_nope' does not exist")
    assert check_role_args("check_http", "inject", {}) == [
        "role 'check_http' has no entry point 'inject' in meta/argument_specs.yml"]


def test_there_are_roles():
    assert {"check_http", "env_loopweb", "fault_loopweb_stop", "evaluate_diagnosis"} <= set(ROLES)


@pytest.mark.parametrize("role", ROLES)
def test_role_layout(role):
    assert (paths.ROLES_DIR / role / "meta" / "main.yml").is_file()
    assert (paths.ROLES_DIR / role / "meta" / "argument_specs.yml").is_file()
    assert (paths.ROLES_DIR / role / "tasks").is_dir()


@pytest.mark.parametrize("role", ROLES)
def test_every_option_is_role_prefixed(role):
    spec_file = paths.ROLES_DIR / role / "meta" / "argument_specs.yml"
    specs = yaml.safe_load(spec_file.read_text())["argument_specs"]
    assert specs, f"{spec_file} declares no entry points"
    for entry in specs:
        for option in entry_options(role, entry):
            assert option.startswith(f"{role}_"), f"{spec_file}: {entry}: {option}"
