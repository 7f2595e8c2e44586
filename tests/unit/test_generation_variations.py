"""What templates draw beyond a target and arguments: distractors (a benign deploy off the derived chain, listed as an
entity that is not a root cause), start offsets (the handover waits) and load levels (the environment's arguments).
Each bad section is one error naming the template, the field and the problem; a template without them draws exactly
what it drew before they existed."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from orchestrator import lifecycle, paths, trials
from orchestrator.catalog import find_scenario
from orchestrator.draw import generate_into
from orchestrator.errors import SpecInvalid
from orchestrator.evaluation.diagnosis import score_diagnosis
from orchestrator.generation.effects import is_benign, load_benign_model, load_effect_model
from orchestrator.generation.instances import build, generate, incident_key
from orchestrator.generation.templates import Template, load_template
from orchestrator.harness.verify import group_by_environment
from orchestrator.run_vars import step_extravars, trial_vars
from orchestrator.spec import Scenario
from orchestrator.validate import DEFAULT_STEP_TIMEOUTS, validate_scenario_file

ROLE = "fault_benign_deploy"
NEW = ("distractors", "offset", "load")


def _variant(template: str, vary: dict[str, Any], tmp_path: Path, drop: tuple[str, ...] = ()) -> Scenario:
    scn = find_scenario(template)
    data = copy.deepcopy(scn.data)
    data["vary"] = {**{k: v for k, v in data["vary"].items() if k not in drop}, **vary}
    return Scenario(path=tmp_path / template / "scenario.yaml", data=data)


def _template(template: str, tmp_path: Path, **vary: Any) -> Template:
    return load_template(_variant(template, vary, tmp_path))


def _error(scn: Scenario) -> tuple[str, str, str]:
    with pytest.raises(SpecInvalid) as err:
        load_template(scn)
    assert len(err.value.problems) == 1, err.value.problems
    p = err.value.problems[0]
    return p.file, p.path, p.message


# -- the role and its model ----------------------------------------------------------------
def test_the_benign_deploy_is_a_distractor_role_and_never_a_root_cause() -> None:
    assert is_benign(ROLE) and not is_benign("fault_container_stop") and not is_benign("fault_no_such_role")
    model = load_benign_model(ROLE)
    assert model.target_arg == "target" and model.target_kinds == ("service",)
    with pytest.raises(SpecInvalid, match="benign"):
        load_effect_model(ROLE)
    with pytest.raises(SpecInvalid, match="not benign"):
        load_benign_model("fault_container_stop")


def test_the_role_journals_a_plain_deploy_and_limits_its_target_to_the_shops_services() -> None:
    role = paths.ROLES_DIR / ROLE
    spec = yaml.safe_load((role / "meta" / "argument_specs.yml").read_text())
    choices = set(spec["argument_specs"]["inject"]["options"][f"{ROLE}_target"]["choices"])
    assert choices == {"frontend", "catalog", "cart", "checkout", "payment", "shipping", "email", "currency",
                       "recommendation", "ads"}
    inject = yaml.safe_load((role / "tasks" / "inject.yml").read_text())
    change = next(t["opsbench_change"] for t in inject if "opsbench_change" in t)
    assert change["kind"] == "deploy" and change["summary"] == "deploy of {{ fault_benign_deploy_target }}: " \
        "configuration updated"
    # What an agent reads of it says what changed, never that it is harmless.
    rendered = re.sub(r"\{\{[^}]*\}\}", "x", json.dumps(change))  # variables render as the service, the version
    defaults = yaml.safe_load((role / "defaults" / "main.yml").read_text())
    words = " ".join([rendered, *map(str, defaults.values())]).lower()  # the container's setting and value
    assert not any(w in words for w in ("benign", "distractor", "harmless", "ignore", "fault"))


# -- distractors ---------------------------------------------------------------------------
def test_a_distractor_is_drawn_off_the_chain_and_listed_as_no_root_cause() -> None:
    t = load_template(find_scenario("shop-cart-down"))
    plain = {v.target: v for v in t.variations if not v.distractors and v.offset == 0}
    with_one = [v for v in t.variations if v.distractors and v.offset == 0]
    assert plain and with_one and all(len(v.distractors) == 1 for v in with_one)
    for v in with_one:
        inst = build(t, v, "inc-000000000000")
        base = build(t, plain[v.target], "inc-000000000000")
        (target,) = v.distractors
        first = inst.spec["faults"][0]
        assert first == {"name": "f1", "role": ROLE, "args": {"target": target}, "distractor": True}
        assert [f["name"] for f in inst.spec["faults"]] == ["f1", "f2"]
        gt, was = inst.ground_truth, base.ground_truth
        # The incident is unchanged: the same alerts, chain, faults, root cause and manifestation gate.
        for key in ("alerts", "propagations", "faults", "mitigations", "evidence"):
            assert gt[key] == was[key], key
        assert inst.spec["checks"] == base.spec["checks"]
        assert gt["entities"][:-1] == was["entities"]
        assert gt["entities"][-1]["id"] == target and gt["entities"][-1]["rootCause"] is False
        named = {e["id"] for e in was["entities"]} | {t.topology.service_of(e["id"]) for e in was["entities"]}
        assert target not in named and target != v.target


def test_distractors_grow_the_variation_space_and_leave_other_draws_as_they_were(tmp_path: Path) -> None:
    full = load_template(find_scenario("shop-cart-down"))
    bare = load_template(_variant("shop-cart-down", {}, tmp_path, drop=NEW))
    assert len(full.variations) > 3 * len(bare.variations)
    # A draw without any of the new parts is the draw the bare template makes: same key, id and files.
    keys = {v.key(): v for v in full.variations}
    for v in bare.variations:
        assert v.key() in {k.removesuffix("|offset=0") for k in keys}
        mine = next(w for w in full.variations if w.target == v.target and not w.distractors and w.offset == 0)
        inst, was = build(full, mine, "inc-x"), build(bare, v, "inc-x")
        assert (inst.spec, inst.ground_truth) == (was.spec, was.ground_truth)


def test_counts_of_two_draw_pairs_and_a_count_without_zero_always_draws(tmp_path: Path) -> None:
    t = _template("shop-cart-down", tmp_path, distractors={"role": ROLE, "count": [2]}, offset={"choices": [0]})
    assert t.variations and all(len(v.distractors) == 2 and len(set(v.distractors)) == 2 for v in t.variations)
    inst = build(t, t.variations[0], "inc-x")
    assert [f.get("distractor", False) for f in inst.spec["faults"]] == [True, True, False]
    assert sum(1 for e in inst.ground_truth["entities"] if e.get("rootCause") is False) == 2


def test_without_exclude_chain_only_the_root_cause_is_excluded(tmp_path: Path) -> None:
    t = _template("shop-cart-down", tmp_path, distractors={"role": ROLE, "count": [1], "exclude_chain": False})
    cart = {v.distractors[0] for v in t.variations if v.target == "cart"}
    assert "frontend" in cart and "checkout" in cart and "cart" not in cart


def test_nothing_an_agent_reads_tells_the_distractor_from_the_cause(tmp_path: Path) -> None:
    result = generate_into(("shop-cart-down", "shop-currency-crashloop", "shop-checkout-payment-abort"), "dx", 30,
                           tmp_path)
    seen = 0
    for inst in result["instances"]:
        spec = yaml.safe_load((tmp_path / inst["id"] / "scenario.yaml").read_text())
        seen += any(f.get("distractor") for f in spec["faults"])
        readable = " ".join([spec["metadata"]["name"], spec["metadata"]["description"],
                             *(t["goal"] for t in spec["tasks"]), *(f["name"] for f in spec["faults"])]).lower()
        assert not any(w in readable for w in ("benign", "distractor", "deploy", "innocent")), readable
        assert [f["name"] for f in spec["faults"]] == [f"f{i}" for i in range(1, len(spec["faults"]) + 1)]
    assert seen >= 10, "the draws should carry distractors most of the time"


def test_blaming_the_distractor_costs_the_agent(tmp_path: Path) -> None:
    t = load_template(find_scenario("shop-cart-down"))
    v = next(v for v in t.variations if v.target == "cart" and v.distractors == ("payment",))
    gt = build(t, v, "inc-x").ground_truth
    right = {"entities": [{"id": "cart-1", "root_cause": True}]}
    blamed = {"entities": [{"id": "cart-1", "root_cause": True}, {"id": "payment service", "root_cause": True}]}
    fooled = {"entities": [{"id": "payment", "root_cause": True}]}
    scores = {}
    for name, output in (("right", right), ("blamed", blamed), ("fooled", fooled)):
        (tmp_path / f"{name}.json").write_text(json.dumps(output))
        scores[name] = score_diagnosis(tmp_path / f"{name}.json", gt)
    assert scores["right"]["fl_pass"] == 1.0 and scores["right"]["fl_precision"] == 1.0
    assert scores["blamed"]["fl_pass"] == 0.0 and scores["blamed"]["fl_precision"] == 0.5
    assert scores["fooled"]["fl_pass"] == 0.0 and scores["fooled"]["fl_recall"] == 0.0


def _write_instance(t: Template, tmp_path: Path, edit: Any = None) -> Path:
    v = next(v for v in t.variations if v.target == "cart" and v.distractors == ("payment",) and v.offset == 0)
    inst = build(t, v, "inc-0123456789ab")
    if edit:
        edit(inst.spec, inst.ground_truth)
    folder = tmp_path / inst.id
    folder.mkdir()
    (folder / "scenario.yaml").write_text(yaml.safe_dump(inst.spec, sort_keys=False))
    (folder / "ground_truth.yaml").write_text(yaml.safe_dump(inst.ground_truth, sort_keys=False))
    return folder / "scenario.yaml"


def _retarget(target: str) -> Any:
    def edit(spec: dict[str, Any], _gt: dict[str, Any]) -> None:
        spec["faults"][0]["args"]["target"] = target
    return edit


def _unlist(spec: dict[str, Any], gt: dict[str, Any]) -> None:
    gt["entities"] = [e for e in gt["entities"] if e["id"] != "payment"]


def _unmark(spec: dict[str, Any], _gt: dict[str, Any]) -> None:
    del spec["faults"][0]["distractor"]


def _mark_cause(spec: dict[str, Any], _gt: dict[str, Any]) -> None:
    spec["faults"][1]["distractor"] = True


@pytest.mark.parametrize(("edit", "field", "words"), [
    (None, None, None),
    (_retarget("cart"), "$.faults[0].args.target", "a distractor that is also a root cause"),
    (_unlist, "$.faults[0].args.target", "is not among the entities"),
    (_unmark, "$.faults[0].distractor", "mark the fault `distractor: true`"),
    (_mark_cause, "$.faults[1].distractor", "is not a distractor's role"),
])
def test_a_distractor_is_checked_against_the_ground_truth(tmp_path: Path, edit: Any, field: str | None,
                                                          words: str | None) -> None:
    t = load_template(find_scenario("shop-cart-down"))
    problems = validate_scenario_file(_write_instance(t, tmp_path, edit))
    if field is None or words is None:
        assert problems == []
        return
    assert len(problems) == 1, problems
    assert problems[0].path == field and words in problems[0].message
    assert problems[0].file.endswith("inc-0123456789ab/scenario.yaml")


def test_a_template_never_draws_a_root_cause_its_own_distractor_acts_on(tmp_path: Path) -> None:
    scn = find_scenario("shop-cart-down")
    data = copy.deepcopy(scn.data)
    data["faults"] = [{"name": "deploy", "role": ROLE, "args": {"target": "payment"}, "distractor": True},
                      *data["faults"]]
    data["vary"] = {"target": data["vary"]["target"], "distractors": {"role": ROLE, "count": [1]}}
    t = load_template(Scenario(path=tmp_path / "x" / "scenario.yaml", data=data))
    assert "payment" not in {v.target for v in t.variations}
    assert "payment" not in {d for v in t.variations for d in v.distractors}
    inst = build(t, t.variations[0], "inc-x")
    innocent = [e["id"] for e in inst.ground_truth["entities"] if e.get("rootCause") is False]
    assert innocent == [*t.variations[0].distractors, "payment"]


@pytest.mark.parametrize(("vary", "field", "words"), [
    ({"distractors": {"role": "fault_container_stop"}}, "$.vary.distractors.role", "must say `benign: true`"),
    ({"distractors": {"role": ROLE, "count": [1], "exclude": ["frontend", "catalog", "cart", "checkout", "payment",
                                                              "shipping", "email", "currency", "recommendation",
                                                              "ads"]}},
     "$.vary.distractors", "no draw has a service outside its chain"),
    ({"offset": {"range": [120, 0]}}, "$.vary.offset.range", "inverted range"),
    ({"offset": {"range": [0, 300], "step": 100}}, "$.vary.offset.range", "[300] outside a start offset"),
    ({"offset": {"choices": [-5, 30]}}, "$.vary.offset.choices", "[-5] outside"),
    ({"offset": {"choices": [30], "range": [0, 60]}}, "$.vary.offset", "either range or choices"),
    ({"load": {"choices": [3, 20]}}, "$.vary.load.choices", "[20] outside a load (env_shop loadgen_rps)"),
    ({"load": {"choices": [2.5]}}, "$.vary.load.choices", "whole numbers from 2 to 8"),
    ({"load": {"range": [8, 2]}}, "$.vary.load.range", "inverted range"),
])
def test_a_bad_section_is_one_error_naming_template_and_field(tmp_path: Path, vary: dict[str, Any], field: str,
                                                              words: str) -> None:
    file, path, message = _error(_variant("shop-cart-down", vary, tmp_path, drop=NEW))
    assert "shop-cart-down" in file and path == field and words in message, (path, message)


def test_a_load_needs_an_environment_that_has_one(tmp_path: Path) -> None:
    scn = find_scenario("shop-cart-down")
    data = copy.deepcopy(scn.data)
    data["environment"] = {"backend": "local", "application": "loopweb"}
    data["vary"] = {"target": data["vary"]["target"], "load": {"choices": [3]}}
    with pytest.raises(SpecInvalid) as err:
        load_template(Scenario(path=tmp_path / "x" / "scenario.yaml", data=data))
    assert any(p.path == "$.vary.load" and "has no load to vary" in p.message for p in err.value.problems)


def test_the_schema_refuses_a_malformed_section() -> None:
    from orchestrator.schemacheck import schema_problems

    scn = find_scenario("shop-cart-down")
    for bad in ({"distractors": {"role": ROLE, "count": [5]}}, {"distractors": {"count": [1]}},
                {"offset": {"choices": ["soon"]}}, {"load": {"every": 3}}):
        data = {**scn.data, "vary": {**scn.data["vary"], **bad}}
        assert schema_problems(scn.path, data, "scenario"), bad
    assert schema_problems(scn.path, {**scn.data, "timing": {"startOffsetSeconds": 241}}, "scenario")
    assert schema_problems(scn.path, {**scn.data, "faults": [{**scn.data["faults"][0], "distractor": "yes"}]},
                           "scenario")


# -- start offsets -------------------------------------------------------------------------
def test_an_offset_is_written_as_timing_and_zero_writes_nothing(tmp_path: Path) -> None:
    t = _template("shop-catalog-frozen", tmp_path, offset={"choices": [0, 45]})
    by = {v.offset: build(t, v, "inc-x").spec for v in t.variations if v.target == "catalog"}
    assert "timing" not in by[0] and by[45]["timing"] == {"startOffsetSeconds": 45}
    assert incident_key(by[0]) != incident_key(by[45])  # two incidents, not one dropped as a repeat
    out = generate([t], "offsets", len(t.variations))
    assert len(out.instances) + len([d for d in out.dropped if "same incident" not in d["reason"]]) \
        == len(t.variations)


def _state(scn: Scenario, role: str = "env_shop") -> dict[str, Any]:
    return {"common": {"opsbench_run_id": "r"}, "tool_profile": "full",
            "vars": {"environment": {"name": "environment", "role": role, "vars": {}}, "manifest": {},
                     **trial_vars(scn)}}


def test_a_live_handover_waits_the_offset_and_a_replay_does_not(tmp_path: Path) -> None:
    scn = find_scenario("shop-cart-down")
    plain = step_extravars(_state(scn), "handover")
    assert "opsbench_start_offset" not in plain
    late = Scenario(path=scn.path, data={**scn.data, "timing": {"startOffsetSeconds": 90}})
    assert trial_vars(late)["start_offset"] == 90
    assert step_extravars(_state(late), "handover")["opsbench_start_offset"] == 90
    assert "opsbench_start_offset" not in step_extravars(_state(late, trials.SNAPSHOT_ROLE), "handover")
    assert "opsbench_start_offset" not in step_extravars(_state(late), "manifestation")
    play = yaml.safe_load((paths.PROJECT_ROOT / "playbooks" / "handover.yml").read_text())
    first = play[0]["tasks"][0]
    assert first["ansible.builtin.pause"] == {"seconds": "{{ opsbench_start_offset | int }}"}
    assert first["when"] == "opsbench_start_offset | default(0) | int > 0"


def test_an_offset_the_handover_timeouts_would_cut_is_refused(tmp_path: Path) -> None:
    assert DEFAULT_STEP_TIMEOUTS == lifecycle.DEFAULT_TIMEOUTS
    t = load_template(find_scenario("shop-cart-down"))
    v = next(v for v in t.variations if v.target == "cart" and not v.distractors and v.offset == 120)

    def tight(spec: dict[str, Any], _gt: dict[str, Any]) -> None:
        spec["timeouts"] = {"handover": {"idle": 100}}

    inst = build(t, v, "inc-0123456789ab")
    tight(inst.spec, inst.ground_truth)
    folder = tmp_path / inst.id
    folder.mkdir()
    (folder / "scenario.yaml").write_text(yaml.safe_dump(inst.spec))
    (folder / "ground_truth.yaml").write_text(yaml.safe_dump(inst.ground_truth))
    problems = validate_scenario_file(folder / "scenario.yaml")
    assert [(p.path, "idle 100 s" in p.message) for p in problems] == [("$.timing.startOffsetSeconds", True)]


# -- load levels ---------------------------------------------------------------------------
def test_a_load_goes_into_the_environment_and_splits_deployments(tmp_path: Path) -> None:
    t = load_template(find_scenario("shop-redis-down"))
    redis = [v for v in t.variations if v.target == "redis" and not v.distractors]
    loads = [v.load or 0 for v in redis]
    assert sorted(loads) == [3, 5]
    specs = {load: build(t, v, f"inc-{load:012d}").spec for load, v in zip(loads, redis, strict=True)}
    assert "args" not in specs[3]["environment"]  # the role's default: shares the plain deployment
    assert specs[5]["environment"]["args"] == {"loadgen_rps": 5}
    plain = find_scenario("shop-cart-down")
    scns = [Scenario(path=tmp_path / str(k) / "scenario.yaml", data=s) for k, s in specs.items()]
    groups = group_by_environment([plain, *scns])
    assert [[s.id for s in g] for g in groups] == [["shop-cart-down", "inc-000000000003"], ["inc-000000000005"]]


def test_the_dev_templates_draw_the_new_sections_deterministically(tmp_path: Path) -> None:
    names = ("shop-cart-down", "shop-currency-crashloop", "shop-checkout-payment-abort", "shop-redis-down",
             "shop-catalog-frozen")
    first = generate_into(names, "dev", 25, tmp_path / "a")
    again = generate_into(names, "dev", 25, tmp_path / "b")
    assert [i["draw"] for i in first["instances"]] == [i["draw"] for i in again["instances"]]
    files = sorted((tmp_path / "a").rglob("*.yaml"))
    assert [f.read_bytes() for f in files] == [(tmp_path / "b" / f.relative_to(tmp_path / "a")).read_bytes()
                                               for f in files]
    draws = " ".join(i["draw"] for i in first["instances"])
    assert "distractor=" in draws and "offset=60" in draws and "load=5" in draws
