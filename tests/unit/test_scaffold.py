"""`opsbench new fault|scenario`: scaffolds that follow the conventions, in a private project copy.

Every test works in a sandbox under tmp_path (roles linked, specs copied, paths patched), so
nothing is ever written to the repository.
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from orchestrator import paths
from orchestrator.argspecs import check_role_args, load_argument_specs
from orchestrator.cli import main
from orchestrator.complexity import complexity_level, complexity_value
from orchestrator.docgen import render_faults, render_scenarios
from orchestrator.errors import OpsBenchError
from orchestrator.scaffold import fault_test_path, new_fault, new_scenario, register_id
from orchestrator.validate import validate_paths

SPECS = ("shop-healthy-baseline", "loopweb-web-down")
REGISTRY_HEADER = "# Every scenario id ever issued (test copy).\n# Never delete or reuse an entry.\n"


@pytest.fixture
def sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project root with the real roles (symlinked), two real specs and their registry."""
    root = tmp_path / "project"
    roles = root / "roles"
    roles.mkdir(parents=True)
    for role in paths.ROLES_DIR.iterdir():
        if role.is_dir():
            (roles / role.name).symlink_to(role, target_is_directory=True)
    specs = root / "scenario_specs"
    for sid in SPECS:
        shutil.copytree(paths.SPECS_DIR / sid, specs / sid)
    real = yaml.safe_load(paths.ID_REGISTRY.read_text())["ids"]
    registry = specs / "REGISTRY.yaml"
    registry.write_text(REGISTRY_HEADER + yaml.safe_dump({"ids": {sid: real[sid] for sid in SPECS}}))
    (root / "tests" / "e2e").mkdir(parents=True)
    monkeypatch.setattr(paths, "PROJECT_ROOT", root)
    monkeypatch.setattr(paths, "ROLES_DIR", roles)
    monkeypatch.setattr(paths, "SPECS_DIR", specs)
    monkeypatch.setattr(paths, "ID_REGISTRY", registry)
    return root


def _yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


# --- opsbench new fault ------------------------------------------------------------------------


def test_new_fault_follows_the_role_conventions(sandbox: Path) -> None:
    done = new_fault("disk_full")
    role = sandbox / "roles" / "fault_disk_full"
    expected = {"defaults/main.yml", "meta/main.yml", "meta/argument_specs.yml",
                "tasks/main.yml", "tasks/inject.yml", "tasks/remove.yml"}
    assert {str(p.relative_to(role)) for p in role.rglob("*") if p.is_file()} == expected
    assert set(done.files) >= {role / f for f in expected}

    specs = load_argument_specs("fault_disk_full")
    assert set(specs) == {"inject", "remove", "main"}
    assert specs["inject"]["options"] == specs["remove"]["options"] == specs["main"]["options"]
    assert "&args" in (role / "meta" / "argument_specs.yml").read_text()  # one definition, shared
    assert set(specs["inject"]["options"]) == {"fault_disk_full_target"}
    assert check_role_args("fault_disk_full", "inject", {"target": "cart-1"}) == []
    assert check_role_args("fault_disk_full", "inject", {}) == ["missing required arguments: target"]

    meta = _yaml(role / "meta" / "main.yml")
    assert meta["dependencies"] == []
    assert {"author", "description", "license", "min_ansible_version", "platforms"} <= set(meta["galaxy_info"])

    inject = _yaml(role / "tasks" / "inject.yml")
    saves = [t for t in inject if "ansible.builtin.copy" in t]
    assert len(saves) == 1 and saves[0]["ansible.builtin.copy"]["force"] is False
    assert "{{ opsbench_item_name }}.json" in saves[0]["ansible.builtin.copy"]["dest"]
    assert "'injected': true" in inject[-1]["ansible.builtin.set_stats"]["data"]["opsbench"]["faults"]
    # The unwritten fault fails loudly instead of pretending to inject.
    assert any("ansible.builtin.fail" in t for t in inject)
    remove = _yaml(role / "tasks" / "remove.yml")
    assert remove[0]["ansible.builtin.stat"]["path"].endswith("{{ opsbench_item_name }}.json")
    assert remove[1]["when"] == "fault_disk_full_saved.stat.exists"
    assert "'removed'" in remove[-1]["ansible.builtin.set_stats"]["data"]["opsbench"]["faults"]
    assert _yaml(role / "tasks" / "main.yml")[0]["ansible.builtin.include_tasks"] == "inject.yml"


def test_new_fault_writes_an_honest_skipped_e2e_test(sandbox: Path) -> None:
    new_fault("disk_full")
    stub = fault_test_path("fault_disk_full")
    assert stub == sandbox / "tests" / "e2e" / "faults" / "test_fault_disk_full.py"
    assert (stub.parent / "__init__.py").is_file()
    text = stub.read_text()
    tree = ast.parse(text)
    tests = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")]
    assert len(tests) == 1
    assert 'pytest.mark.skip(reason="scaffold: write the scenario that exercises this fault, then remove this mark")' \
        in text
    assert '"verify-scenarios", SCENARIO, "--repeats", "1", "--json"' in text
    assert "assert proc.returncode == 0" in text


def test_new_fault_accepts_the_prefix_and_podman_adds_the_dependency(sandbox: Path) -> None:
    new_fault("fault_cart_pause", podman=True)
    role = sandbox / "roles" / "fault_cart_pause"
    assert _yaml(role / "meta" / "main.yml")["dependencies"] == ["podman_control"]
    assert "opsbench_container" in (role / "tasks" / "inject.yml").read_text()
    restore = _yaml(role / "tasks" / "remove.yml")[1]["block"][1]
    assert restore["opsbench_container"]["state"] == "restored"


@pytest.mark.parametrize("name", ["Disk", "1disk", "fault_", "", "disk-full", "fault_Disk", "disk full", "fault_x-y"])
def test_new_fault_rejects_bad_names(sandbox: Path, name: str) -> None:
    with pytest.raises(OpsBenchError, match=r"must match \^\[a-z\]\[a-z0-9_\]\*\$"):
        new_fault(name)
    assert not list((sandbox / "tests" / "e2e").rglob("*.py"))


def test_new_fault_refuses_to_overwrite(sandbox: Path) -> None:
    before = sorted(p.name for p in (sandbox / "roles").iterdir())
    with pytest.raises(OpsBenchError, match="already exists"):
        new_fault("loopweb_stop")
    assert sorted(p.name for p in (sandbox / "roles").iterdir()) == before

    stub = fault_test_path("fault_fresh")
    stub.parent.mkdir(parents=True)
    stub.write_text("# somebody's test\n")
    with pytest.raises(OpsBenchError, match="already exists"):
        new_fault("fresh")
    assert not (sandbox / "roles" / "fault_fresh").exists()
    assert stub.read_text() == "# somebody's test\n"


# --- opsbench new scenario ---------------------------------------------------------------------


def test_new_scenario_validates_cleanly_and_is_registered(sandbox: Path) -> None:
    new_fault("disk_full")
    registry_before = paths.ID_REGISTRY.read_text()
    done = new_scenario("shop-disk-full", ["fault_disk_full"])
    target = sandbox / "scenario_specs" / "shop-disk-full"
    assert done.files == [target / "scenario.yaml", target / "ground_truth.yaml", paths.ID_REGISTRY]
    assert validate_paths([target]) == []

    spec_text = (target / "scenario.yaml").read_text()
    assert spec_text.startswith("# yaml-language-server: $schema=../../orchestrator/schemas/scenario.schema.json\n")
    assert (target / "ground_truth.yaml").read_text().startswith(
        "# yaml-language-server: $schema=../../orchestrator/schemas/ground_truth.schema.json\n")
    spec = _yaml(target / "scenario.yaml")
    meta = spec["metadata"]
    assert meta["name"].startswith("TODO") and meta["description"].startswith("TODO")
    assert spec["tasks"][0]["goal"].startswith("TODO")

    # Baseline: exactly the application's healthy control's checks (single source).
    control = _yaml(sandbox / "scenario_specs" / "shop-healthy-baseline" / "scenario.yaml")
    assert spec["checks"]["baseline"] == control["checks"]["baseline"]
    assert spec["checks"]["manifestation"] == [{"name": "alerts-firing", "role": "check_alerts", "timeout": 120,
                                                "args": {"firing": [{"alertname": "TODO-AlertName"}]}}]
    assert spec["faults"] == [{"name": "disk-full", "role": "fault_disk_full", "args": {"target": "TODO"}}]

    cx = meta["complexity"]
    value = complexity_value(cx["propagationLength"], cx["resolutionSteps"], len(cx["technologies"]))
    assert cx["value"] == value and cx["level"] == complexity_level(value)

    # The registry keeps its comments and earlier entries: the entry was appended as text.
    after = paths.ID_REGISTRY.read_text()
    assert after.startswith(registry_before)
    assert _yaml(paths.ID_REGISTRY)["ids"]["shop-disk-full"] == {"application": "shop", "faults": ["fault_disk_full"]}


def test_new_scenario_fills_args_ground_truth_and_complexity_from_the_roles(sandbox: Path) -> None:
    new_scenario("loopweb-stop-again", ["loopweb_stop", "fault_loopweb_stop"], application="loopweb",
                 baseline_from="loopweb-web-down", propagation_length=2, technologies=["python", "nginx"])
    target = sandbox / "scenario_specs" / "loopweb-stop-again"
    assert validate_paths([target]) == []
    spec = _yaml(target / "scenario.yaml")
    # Options come from the argument spec (defaults), names are unique.
    assert [(f["name"], f["args"]) for f in spec["faults"]] == [
        ("loopweb-stop", {"program": "web"}), ("loopweb-stop-2", {"program": "web"})]
    baseline = _yaml(sandbox / "scenario_specs" / "loopweb-web-down" / "scenario.yaml")["checks"]["baseline"]
    assert spec["checks"]["baseline"] == baseline
    cx = spec["metadata"]["complexity"]
    assert (cx["propagationLength"], cx["resolutionSteps"], cx["technologies"]) == (2, 2, ["python", "nginx"])
    assert cx["value"] == complexity_value(2, 2, 2)
    assert spec["metadata"]["class"] == "loopweb"
    gt = _yaml(target / "ground_truth.yaml")
    assert [e["id"] for e in gt["entities"] if e["rootCause"]] == ["web"]  # the entity an argument names
    assert _yaml(paths.ID_REGISTRY)["ids"]["loopweb-stop-again"]["faults"] == ["fault_loopweb_stop"]


@pytest.mark.parametrize(
    ("sid", "faults", "kwargs", "message"),
    [
        ("shop-healthy-baseline", ["fault_loopweb_stop"], {}, "already registered"),
        ("Bad_Id", ["fault_loopweb_stop"], {}, "bad scenario id"),
        ("ab", ["fault_loopweb_stop"], {}, "bad scenario id"),
        ("shop-nothing", [], {}, "at least one --fault"),
        ("shop-nope", ["fault_nope"], {}, "no such role"),
        ("shop-nope", ["check_http"], {}, "no such role"),
        ("shop-nope", ["fault_Bad"], {}, "bad fault name"),
        ("shop-nope", ["fault_loopweb_stop"], {"application": "mainframe"}, "no environment role env_mainframe"),
        ("loopweb-x", ["fault_loopweb_stop"], {"application": "loopweb"}, "no healthy-control scenario"),
        ("loopweb-x", ["fault_loopweb_stop"], {"application": "loopweb", "baseline_from": "nope"}, "no such scenario"),
    ],
)
def test_new_scenario_refusals_write_nothing(sandbox: Path, sid: str, faults: list[str], kwargs: dict[str, Any],
                                             message: str) -> None:
    registry = paths.ID_REGISTRY.read_text()
    listing = sorted(p.name for p in (sandbox / "scenario_specs").iterdir())
    with pytest.raises(OpsBenchError, match=message):
        new_scenario(sid, faults, **kwargs)
    assert paths.ID_REGISTRY.read_text() == registry
    assert sorted(p.name for p in (sandbox / "scenario_specs").iterdir()) == listing


def test_new_scenario_refuses_retired_and_unregistered_existing_ids(sandbox: Path) -> None:
    with paths.ID_REGISTRY.open("a") as reg:
        reg.write("  shop-old:\n    application: shop\n    faults: []\n    retired: true\n")
    with pytest.raises(OpsBenchError, match="retired"):
        new_scenario("shop-old", ["fault_loopweb_stop"])
    (sandbox / "scenario_specs" / "shop-draft").mkdir()
    with pytest.raises(OpsBenchError, match="already exists"):
        new_scenario("shop-draft", ["fault_loopweb_stop"])


def test_register_id_leaves_a_registry_it_cannot_append_to_unchanged(sandbox: Path) -> None:
    odd = "ids:\n  shop-healthy-baseline: {application: shop, faults: []}\nretired_note: keep me last\n"
    paths.ID_REGISTRY.write_text(odd)
    with pytest.raises(OpsBenchError, match="add the entry by hand"):
        register_id("shop-new", "shop", ["fault_loopweb_stop"])
    assert paths.ID_REGISTRY.read_text() == odd


# --- the CLI and the catalogs ------------------------------------------------------------------


def test_cli_new_fault_and_scenario(sandbox: Path) -> None:
    runner = CliRunner()
    bad = runner.invoke(main, ["new", "fault", "Bad-Name"])
    assert bad.exit_code == 2 and "bad fault name 'Bad-Name'" in bad.output
    made = runner.invoke(main, ["new", "fault", "cart_pause", "--podman"])
    assert made.exit_code == 0, made.output
    assert "wrote roles/fault_cart_pause/meta/argument_specs.yml" in made.output
    again = runner.invoke(main, ["new", "fault", "fault_cart_pause"])
    assert again.exit_code == 2 and "already exists" in again.output
    scn = runner.invoke(main, ["new", "scenario", "shop-cart-paused", "--fault", "fault_cart_pause"])
    assert scn.exit_code == 0, scn.output
    assert "opsbench validate: 0 problem(s)" in scn.output


def test_catalogs_pick_up_new_roles_and_scenarios(sandbox: Path) -> None:
    new_fault("network_cut")
    new_scenario("shop-network-cut", ["fault_network_cut"])
    faults = render_faults()
    assert "### fault_network_cut" in faults
    assert faults.index("## network") < faults.index("### fault_network_cut")
    assert "| `target` | str |  |  | yes |" in faults
    assert "[shop-network-cut](scenarios.md#shop-network-cut)" in faults
    scenarios = render_scenarios()
    assert "### shop-network-cut" in scenarios
    assert "| [shop-network-cut](#shop-network-cut) |" in scenarios
    assert "`TODO-AlertName`" in scenarios


# --- opsbench new scenario: DevOps (application workspace) --------------------------------------

DEVOPS = {  # class -> fault role, project, task kinds, evaluator, reference role
    "build-config": ("workspace_edit", "stockkeeper", ["fix"], "evaluate_workspace", "solve_workspace_edit"),
    "issue-resolving": ("workspace_edit", "invoicer", ["fix"], "evaluate_workspace", "solve_workspace_edit"),
    "test-generation": ("workspace_edit", "ratelimit", ["write-tests"], "evaluate_workspace", "solve_workspace_edit"),
    "pipeline": ("workspace_edit", "stockkeeper", ["fix", "fix"], "evaluate_workspace", "solve_workspace_edit"),
    "monitoring": ("workspace_process", "invoicer", ["diagnose"], "evaluate_diagnosis", "solve_output"),
}


def _fill_todos(value: Any, key: str = "") -> Any:
    """What an author does: every TODO text replaced by a real value (a relative path for an edit's path)."""
    if isinstance(value, dict):
        return {k: _fill_todos(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill_todos(v, key) for v in value]
    if isinstance(value, str) and "TODO" in value:
        return "src/filled/File.txt" if key == "path" else f"written by the author ({key or 'text'})"
    return value


@pytest.mark.parametrize("scenario_class", list(DEVOPS))
def test_new_devops_scenario_has_the_shape_of_its_class_and_validates_filled_in(sandbox: Path,
                                                                              scenario_class: str) -> None:
    fault, project, kinds, evaluator, solver = DEVOPS[scenario_class]
    sid = f"devops-new-{scenario_class}"
    done = new_scenario(sid, [fault], application="workspace", scenario_class=scenario_class, project=project)
    target = sandbox / "scenario_specs" / sid
    assert done.files == [target / "scenario.yaml", target / "ground_truth.yaml", paths.ID_REGISTRY]
    assert validate_paths([target]) == []  # the scaffold as written
    assert any("verify-scenarios " + sid in s and "untouched incident must fail" in s
               and "reference solution must pass" in s for s in done.next_steps)

    spec, gt = _yaml(target / "scenario.yaml"), _yaml(target / "ground_truth.yaml")
    assert (spec["metadata"]["domain"], spec["metadata"]["class"]) == ("DevOps", scenario_class)
    assert spec["environment"] == {"backend": "local", "application": "workspace"}
    assert [f["role"] for f in spec["faults"]] == [f"fault_{fault}"]
    assert [t["kind"] for t in spec["tasks"]] == kinds
    assert all(t["goal"].startswith("TODO") for t in spec["tasks"])
    assert spec["evaluation"]["evaluators"] == [{"role": evaluator}]
    assert [r["role"] for r in spec["reference"]] == [solver]
    baseline = spec["checks"]["baseline"]
    assert [c["role"] for c in baseline] == ["check_workspace"] and baseline[0]["args"]["project"] == project
    manifestation = spec["checks"]["manifestation"]
    assert [c["role"] for c in manifestation] == ["check_workspace"]
    if scenario_class == "monitoring":
        args = spec["faults"][0]["args"]
        assert "pgrep" in baseline[0]["args"]["command"]
        assert spec["reference"][0]["args"]["output"]["entities"] == [
            {"id": args["name"], "root_cause": True, "layer": "process", "fault_type": args["anomaly"]}]
        assert [(e["id"], e.get("layer"), e.get("faultType")) for e in gt["entities"] if e.get("rootCause")] == [
            (args["name"], "process", args["anomaly"])]
        assert "workspace" not in gt
    else:
        assert baseline[0]["args"]["command"] == 'git diff --quiet HEAD && test -z "$(git status --porcelain)"'
        assert spec["faults"][0]["args"]["project"] == project
        assert spec["faults"][0]["args"]["edits"][0]["path"] == "TODO"
        assert spec["reference"][0]["args"]["project"] == project
        stages = gt["workspace"]["stages"]
        assert [(s["task"], s["kind"], s["project"]) for s in stages] == [
            (t["id"], t["kind"], project) for t in spec["tasks"]]
        assert [bool(s.get("hidden_tests")) for s in stages] == {
            "issue-resolving": [True], "pipeline": [False, True]}.get(scenario_class, [False])
        assert [bool(s.get("bug")) for s in stages] == [scenario_class == "test-generation"] * len(stages)
    if scenario_class == "build-config":
        assert manifestation[0]["args"] == {"project": project, "command": "make -s check", "expect": "fail"}
        assert gt["entities"] == [{"id": f"{project}-build", "rootCause": True, "layer": "configuration"}]
    assert _yaml(paths.ID_REGISTRY)["ids"][sid] == {"application": "workspace", "faults": [f"fault_{fault}"]}

    # Filled in (every TODO replaced), it is still a valid spec.
    for name in ("scenario.yaml", "ground_truth.yaml"):
        filled = yaml.safe_dump(_fill_todos(_yaml(target / name)), sort_keys=False)
        assert "TODO" not in filled
        (target / name).write_text(filled)
    assert validate_paths([target]) == []


def test_new_devops_scenario_defaults_to_build_config_on_the_first_project(sandbox: Path) -> None:
    done = new_scenario("devops-new-default", ["fault_workspace_edit"], application="workspace")
    spec = _yaml(sandbox / "scenario_specs" / "devops-new-default" / "scenario.yaml")
    assert spec["metadata"]["class"] == "build-config"
    assert spec["faults"][0]["args"]["project"] == "stockkeeper"
    assert done.notes == ["no --project: the scenario works on stockkeeper (one of: stockkeeper, ratelimit, invoicer)"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"application": "workspace", "project": "nope"},
         r"--project nope: no such workspace project in roles/env_workspace/files/projects.yml "
         r"\(one of: stockkeeper, ratelimit, invoicer\)"),
        ({"application": "workspace", "scenario_class": "chaos"},
         r"--class chaos: not a DevOps class \(one of: build-config, issue-resolving, test-generation, pipeline, "
         r"monitoring\)"),
        ({"scenario_class": "build-config"}, "--class is for DevOps scenarios"),
        ({"project": "invoicer"}, "--project is for DevOps scenarios"),
    ],
)
def test_new_devops_scenario_refusals_write_nothing(sandbox: Path, kwargs: dict[str, Any], message: str) -> None:
    registry = paths.ID_REGISTRY.read_text()
    listing = sorted(p.name for p in (sandbox / "scenario_specs").iterdir())
    with pytest.raises(OpsBenchError, match=message):
        new_scenario("devops-new-refused", ["fault_workspace_edit"], **kwargs)
    assert paths.ID_REGISTRY.read_text() == registry
    assert sorted(p.name for p in (sandbox / "scenario_specs").iterdir()) == listing


def test_cli_new_devops_scenario(sandbox: Path) -> None:
    runner = CliRunner()
    bad = runner.invoke(main, ["new", "scenario", "devops-cli-x", "--application", "workspace",
                               "--fault", "workspace_edit", "--project", "cobol"])
    assert bad.exit_code == 2 and "(one of: stockkeeper, ratelimit, invoicer)" in bad.output
    made = runner.invoke(main, ["new", "scenario", "devops-cli-issue", "--application", "workspace",
                                "--fault", "workspace_edit", "--class", "issue-resolving", "--project", "invoicer"])
    assert made.exit_code == 0, made.output
    assert "opsbench validate: 0 problem(s)" in made.output
    assert "opsbench verify-scenarios devops-cli-issue" in made.output
    assert _yaml(paths.ID_REGISTRY)["ids"]["devops-cli-issue"] == {"application": "workspace",
                                                                   "faults": ["fault_workspace_edit"]}
    assert "| [devops-cli-issue](#devops-cli-issue) |" in render_scenarios()
