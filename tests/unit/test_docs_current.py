"""Generated docs must match what they are generated from: the schemas, the fault roles, the specs."""

import pytest

from orchestrator import paths
from orchestrator.docgen import (
    GENERATED,
    OUTPUT_SCHEMAS,
    fault_family,
    render,
    render_faults,
    render_outputs,
    render_scenarios,
    write_docs,
)
from orchestrator.schemacheck import load_schema
from orchestrator.spec import spec_files
from orchestrator.yamlfile import read_yaml


def test_generated_docs_are_current() -> None:
    assert write_docs(check=True) == [], "run `make docs` (or `opsbench docs`) and commit the result"


def test_every_schema_field_is_documented() -> None:
    text = render("scenario", "x")
    for name in load_schema("scenario")["properties"]:
        assert f"| `{name}` |" in text
    for nested in ("metadata.complexity.value", "faults[].role", "checks.baseline[].timeout",
                   "budget.wallClockSeconds", "evaluation.evaluators[].params"):
        assert f"| `{nested}` |" in text, nested
    assert set(GENERATED) == {"docs/scenario-spec.md", "docs/ground-truth.md", "docs/faults.md", "docs/scenarios.md",
                              "docs/agent-outputs.md", "docs/manifest.md", "docs/devops-projects.md"}


def test_every_output_schema_field_is_documented() -> None:
    text = render_outputs()
    for name, _kind in OUTPUT_SCHEMAS:
        schema = load_schema(name)
        assert f"## {schema['title']}" in text
        for field in schema["properties"]:
            assert f"| `{field}` |" in text, (name, field)
    assert "| `actions[].target` | string | yes |" in text


def test_fault_catalog_lists_every_fault_role_and_option() -> None:
    text = render_faults()
    roles = sorted(p.name for p in paths.ROLES_DIR.glob("fault_*") if p.is_dir())
    assert roles, "no fault roles found"
    for role in roles:
        assert f"\n### {role}\n" in text, role
        assert f"| {fault_family(role)} | [`{role}`](#{role}) |" in text, role
    # Options appear as spec authors write them: without the role prefix.
    assert "| `program` | str | `web` | `gateway`, `web` |  | The supervised program to stop. |" in text
    assert "fault_loopweb_stop_program" not in text


def test_scenario_catalog_lists_every_scenario() -> None:
    text = render_scenarios()
    for file in spec_files():
        sid = read_yaml(file)["metadata"]["id"]
        assert f"| [{sid}](#{sid}) |" in text and f"\n### {sid}\n" in text, sid
    assert "| [loopweb-web-down](#loopweb-web-down) | Web service stopped and kept down | Easy 1.59 |" in text
    assert "| `web` |" in text  # root cause from the ground truth
    assert "| no incident |" in text  # the healthy control


@pytest.mark.parametrize(
    ("role", "family"),
    [
        ("fault_app_memory_leak", "application"),
        ("fault_container_oom", "container"),
        ("fault_config_env", "configuration"),
        ("fault_redis_password", "configuration"),
        ("fault_db_revoked", "configuration"),
        ("fault_redis_oom", "dependency"),
        ("fault_postgres_conn_exhaustion", "dependency"),
        ("fault_network_latency", "network"),
        ("fault_http_abort", "network"),
        ("fault_load_flood", "traffic"),
        ("fault_volume_full", "storage"),
        ("fault_loopweb_stop", "loopweb"),
        ("fault_application_x", "other"),  # a prefix counts only as a whole word
        ("fault_redis_slow", "other"),
        ("fault_something_new", "other"),
    ],
)
def test_fault_family_from_role_name(role: str, family: str) -> None:
    assert fault_family(role) == family
