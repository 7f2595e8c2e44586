"""Distractor roles (benign changes at incident time) and noise (background anomalies while the agent works): what
validation refuses, what the steps get, and the proof that blaming a distractor costs an agent on a real ground truth.
The roles themselves are proven live by verify-scenarios (docs/authoring.md, "Distractors and noise")."""

from __future__ import annotations

import copy
import importlib.util
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from orchestrator import paths, validate
from orchestrator.argspecs import load_argument_specs
from orchestrator.argspecs import role_dir as real_role_dir
from orchestrator.catalog import find_scenario
from orchestrator.evaluation.diagnosis import score_diagnosis
from orchestrator.generation.effects import is_benign, load_benign_model
from orchestrator.generation.instances import build, distractor_targets
from orchestrator.generation.templates import load_template
from orchestrator.results import Trial, render_results, scenario_results
from orchestrator.role_topology import load_topology
from orchestrator.run_vars import step_extravars, trial_vars
from orchestrator.spec import Scenario, load_scenario
from orchestrator.validate import loaded_problems

DISTRACTOR_ROLES = ("fault_benign_deploy", "fault_benign_restart", "fault_benign_load_spike",
                    "fault_benign_config_edit")
NOISE_ROLES = ("noise_log_warnings", "noise_latency_jitter", "noise_alert_flap")
NOISY = "shop-ads-partial-failures-noisy"
WITH_DISTRACTOR = {"shop-cart-down-email-restart": "email", "shop-currency-crashloop-catalog-spike": "catalog",
                   "shop-redis-down-payment-config-edit": "payment"}


def _copy(scenario: str, tmp_path: Path, edit: Any) -> Scenario:
    """A copy of `scenario` (spec and ground truth) under tmp_path with its spec data edited."""
    src = find_scenario(scenario).path.parent
    dst = tmp_path / src.name
    shutil.copytree(src, dst)
    data = yaml.safe_load((dst / "scenario.yaml").read_text())
    edit(data)
    (dst / "scenario.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    return load_scenario(dst / "scenario.yaml")


# -- the roles -------------------------------------------------------------------------------
@pytest.mark.parametrize("role", DISTRACTOR_ROLES)
def test_each_distractor_role_is_benign_with_inject_remove_and_a_service_target(role: str) -> None:
    assert is_benign(role)
    model = load_benign_model(role)
    assert model.target_arg == "target" and model.target_kinds == ("service",)
    specs = load_argument_specs(role)
    assert {"inject", "remove"} <= set(specs)
    assert all(o.startswith(f"{role}_") for o in specs["inject"]["options"])  # role-prefixed variables
    for entry in ("inject", "remove"):
        assert (paths.ROLES_DIR / role / "tasks" / f"{entry}.yml").is_file()


@pytest.mark.parametrize("role", NOISE_ROLES)
def test_each_noise_role_has_inject_remove_and_prefixed_options(role: str) -> None:
    specs = load_argument_specs(role)
    assert {"inject", "remove"} <= set(specs)
    assert all(o.startswith(f"{role}_") for o in specs["inject"]["options"])
    for entry in ("inject", "remove"):
        assert (paths.ROLES_DIR / role / "tasks" / f"{entry}.yml").is_file()


def test_every_distractor_role_has_a_scenario_with_a_real_fault() -> None:
    seen: set[str] = set()
    for scenario, target in WITH_DISTRACTOR.items():
        scn = find_scenario(scenario)
        assert loaded_problems(scn) == []
        faults = scn.faults
        assert distractor_targets(faults) == [target]
        assert any(not f.get("distractor") for f in faults), "a distractor scenario needs a real fault too"
        gt = yaml.safe_load(scn.ground_truth_path.read_text())
        listed = {e["id"]: e.get("rootCause", False) for e in gt["entities"]}
        assert listed[target] is False and any(listed.values())
        seen |= {f["role"] for f in faults if f.get("distractor")}
    assert seen == set(DISTRACTOR_ROLES) - {"fault_benign_deploy"}


@pytest.mark.parametrize("role", DISTRACTOR_ROLES[1:])
def test_templates_draw_the_new_distractors_off_the_chain(role: str) -> None:
    scn = find_scenario("shop-cart-down")
    data = copy.deepcopy(scn.data)
    data["vary"]["distractors"] = {"role": role, "count": [1]}
    t = load_template(Scenario(path=scn.path, data=data))
    assert t.variations and all(len(v.distractors) == 1 for v in t.variations)
    v = next(v for v in t.variations if v.target == "cart")
    inst = build(t, v, "inc-0123456789ab")
    first = inst.spec["faults"][0]
    assert first["role"] == role and first["distractor"] is True
    (target,) = v.distractors
    assert target not in {"cart", "frontend", "gateway"}
    assert {"id": target, "rootCause": False}.items() <= next(
        e for e in inst.ground_truth["entities"] if e["id"] == target).items()


# -- validation ------------------------------------------------------------------------------
def test_the_new_scenarios_validate() -> None:
    for scenario in (*WITH_DISTRACTOR, NOISY):
        assert loaded_problems(find_scenario(scenario)) == [], scenario


def test_a_distractor_that_is_also_the_root_cause_is_refused_where_written(tmp_path: Path) -> None:
    def edit(data: dict[str, Any]) -> None:
        data["faults"][0]["args"]["target"] = "cart"

    scn = _copy("shop-cart-down-email-restart", tmp_path, edit)
    problems = [p for p in loaded_problems(scn) if p.path == "$.faults[0].args.target"]
    assert problems and "a distractor that is also a root cause" in problems[0].message
    assert problems[0].file == str(scn.path)


def test_noise_on_a_root_cause_is_refused_where_written(tmp_path: Path) -> None:
    def edit(data: dict[str, Any]) -> None:
        data["noise"][1]["args"]["target"] = "ads-1"  # an instance of the root-cause service

    scn = _copy(NOISY, tmp_path, edit)
    (p,) = loaded_problems(scn)
    assert (p.file, p.path) == (str(scn.path), "$.noise[1].args.target")
    assert "noise on a root cause: 'ads-1'" in p.message


def test_a_noise_role_without_a_remove_task_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    role = tmp_path / "roles" / "noise_no_remove"
    shutil.copytree(paths.ROLES_DIR / "noise_log_warnings", role)
    (role / "tasks" / "remove.yml").unlink()
    monkeypatch.setattr(validate, "role_dir", lambda r: role if r == "noise_no_remove" else real_role_dir(r))

    def edit(data: dict[str, Any]) -> None:
        data["noise"][0]["role"] = "noise_no_remove"

    scn = _copy(NOISY, tmp_path, edit)
    (p,) = loaded_problems(scn)
    assert (p.file, p.path) == (str(scn.path), "$.noise[0].role")
    assert "has no remove task (tasks/remove.yml)" in p.message


def test_noise_names_arguments_and_roles_are_checked(tmp_path: Path) -> None:
    def edit(data: dict[str, Any]) -> None:
        data["noise"][0]["name"] = data["faults"][0]["name"]  # names the saved state: unique across both
        data["noise"][1]["args"]["delay_ms"] = "slow"
        data["noise"][2]["role"] = "noise_no_such_role"

    scn = _copy(NOISY, tmp_path, edit)
    found = {(p.path, p.message.split(":")[0]) for p in loaded_problems(scn)}
    assert ("$.noise", "duplicate name 'ads-errors'") in found
    assert any(path == "$.noise[1].args" for path, _ in found)
    assert any(path == "$.noise[2].role" and "does not exist" in msg for path, msg in found)


def test_the_schema_refuses_a_fault_role_as_noise(tmp_path: Path) -> None:
    def edit(data: dict[str, Any]) -> None:
        data["noise"][0]["role"] = "fault_container_stop"

    with pytest.raises(Exception, match=r"noise"):
        _copy(NOISY, tmp_path, edit)


# -- the steps ---------------------------------------------------------------------------------
def test_inject_and_remove_get_the_noise_with_prefixed_arguments(tmp_path: Path) -> None:
    scn = find_scenario(NOISY)
    v = trial_vars(scn)
    assert [n["name"] for n in v["noise"]] == ["catalog-scanner", "currency-jitter", "checkout-flap"]
    flap = v["noise"][2]["vars"]
    assert flap["noise_alert_flap_source"] == "checkout" and flap["noise_alert_flap_delay_ms"] == 1500
    state = {"common": {}, "vars": v}
    for step in ("inject", "remove"):
        assert step_extravars(state, step)["opsbench_noise"] == v["noise"]
    assert "opsbench_noise" not in step_extravars(state, "manifestation")
    old = {"common": {}, "vars": {k: x for k, x in v.items() if k != "noise"}}  # a run.json from before noise
    assert step_extravars(old, "remove")["opsbench_noise"] == []
    assert trial_vars(find_scenario("shop-cart-down"))["noise"] == []


def test_the_remove_playbook_stops_noise_before_the_faults_and_defaults_to_none() -> None:
    inject = yaml.safe_load((paths.PLAYBOOKS_DIR / "inject.yml").read_text())[0]["tasks"]
    remove = yaml.safe_load((paths.PLAYBOOKS_DIR / "remove.yml").read_text())[0]["tasks"]
    assert [t["loop"] for t in inject] == ["{{ opsbench_faults }}", "{{ opsbench_noise | default([]) }}"]
    assert [t["loop"] for t in remove] == ["{{ opsbench_noise | default([]) | reverse }}",
                                           "{{ opsbench_faults | reverse }}"]


# -- scoring: blaming a distractor costs the agent -------------------------------------------
def _module() -> Any:
    path = paths.ROLES_DIR / "evaluate_diagnosis" / "library" / "opsbench_score_diagnosis.py"
    spec = importlib.util.spec_from_file_location("opsbench_score_diagnosis", path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("scenario", sorted(WITH_DISTRACTOR))
def test_a_scripted_agent_that_blames_the_distractor_scores_lower(scenario: str, tmp_path: Path) -> None:
    scn = find_scenario(scenario)
    gt = yaml.safe_load(scn.ground_truth_path.read_text())
    topology = load_topology("shop")
    # The evaluator reads the distractors from the spec beside the ground truth, as the evaluate step does.
    distractors = _module().spec_distractors(scn.ground_truth_path.parent / "scenario.yaml")
    decoy = WITH_DISTRACTOR[scenario]
    assert distractors == [decoy]
    root = next(e["id"] for e in gt["entities"] if e.get("rootCause"))
    chain = [{"source": p["source"], "target": p["target"]} for p in gt["propagations"]]
    symptoms = [{"id": e["id"], "root_cause": False} for e in gt["entities"]
                if not e.get("rootCause") and e["id"] != decoy]
    answers = {
        # The true cause and its propagation, as the ground truth has them.
        "right": {"incident": True, "entities": [{"id": root, "root_cause": True}, *symptoms], "propagations": chain},
        # Fooled: the same symptoms, but the distractor named as the cause and the chain started from it.
        "fooled": {"incident": True, "entities": [{"id": decoy, "root_cause": True}, *symptoms],
                   "propagations": [{"source": decoy, "target": chain[0]["target"]}, *chain[1:]]},
        # Hedging: the true cause and the distractor both blamed.
        "hedged": {"incident": True, "entities": [{"id": root, "root_cause": True}, {"id": decoy, "root_cause": True},
                                                  *symptoms], "propagations": chain},
    }
    scores = {}
    for name, output in answers.items():
        (tmp_path / f"{name}.json").write_text(json.dumps(output))
        scores[name] = score_diagnosis(tmp_path / f"{name}.json", gt, topology, distractors=distractors)
    right, fooled, hedged = scores["right"], scores["fooled"], scores["hedged"]
    assert right["fl_pass"] == 1.0 and right["ntam_fl"] == pytest.approx(1.0) and right["false_positives"] == 0
    assert right["blamed_distractors"] == [] and right["distractor_blamed"] == 0.0
    assert fooled["fl_pass"] == 0.0 and fooled["fl_precision"] == 0.0 and fooled["false_positives"] == 1
    assert fooled["ntam_fl"] < right["ntam_fl"] and fooled["ntam_fpc"] < right["ntam_fpc"]
    assert fooled["blamed_distractors"] == [decoy] and fooled["distractor_blamed"] == 1.0
    assert hedged["fl_pass"] == 0.0 and hedged["fl_precision"] == 0.5 and hedged["false_positives"] == 1
    assert hedged["ntam_fl"] < right["ntam_fl"] and hedged["distractor_blamed"] == 1.0


def test_without_distractors_the_blame_field_is_undefined(tmp_path: Path) -> None:
    scn = find_scenario("shop-cart-down")
    gt = yaml.safe_load(scn.ground_truth_path.read_text())
    assert _module().spec_distractors(scn.path) == []
    (tmp_path / "o.json").write_text(json.dumps({"entities": [{"id": "frontend", "root_cause": True}]}))
    result = score_diagnosis(tmp_path / "o.json", gt)
    assert result["distractor_blamed"] is None and result["blamed_distractors"] == []
    assert result["false_positives"] == 1


def test_results_report_distractor_blame_per_scenario() -> None:
    def trial(i: int, scenario: str, outcome: str, blamed: float | None) -> Trial:
        return Trial(run_id=f"r{i}", scenario=scenario, agent="a", agent_name="a", model=None, created=float(i),
                     run_status="completed", outcome=outcome, ntam_fl=1.0 if outcome == "correct" else 0.2,
                     ntam_fpc=0.5, meta={"complexity": "Easy"},
                     extra={"distractor_blamed": blamed, "false_positives": 0.0 if blamed is None else blamed})
    trials = [trial(1, "s-decoy", "wrong", 1.0), trial(2, "s-decoy", "correct", 0.0), trial(3, "s-plain", "correct",
                                                                                             None)]
    rows = {r["scenario"]: r for r in scenario_results(trials)}
    assert rows["s-decoy"]["distractor_blamed"] == 0.5 and rows["s-plain"]["distractor_blamed"] is None
    text = render_results(list(rows.values()))
    assert "BLAMED DISTRACTOR (%)" in text.splitlines()[0]
    decoy_line = next(line for line in text.splitlines() if "s-decoy" in line)
    plain_line = next(line for line in text.splitlines() if "s-plain" in line)
    assert decoy_line.rstrip().endswith("50") and plain_line.rstrip().endswith("—")
