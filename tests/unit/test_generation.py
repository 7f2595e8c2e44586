"""Generated incidents (`opsbench generate`): determinism, validity, no leak of the cause, ground truth derived from
the effect models (and agreeing with the hand-written ground truth of the fixed scenarios they came from), and one
clear error per bad template, seed or count, with nothing written."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from orchestrator import paths
from orchestrator.catalog import find_scenario
from orchestrator.cli import main
from orchestrator.cli.generate import generate_into
from orchestrator.errors import OpsBenchError, SpecInvalid
from orchestrator.generation.effects import EffectModel, Topology, derive, load_effect_model, unknown_alerts
from orchestrator.generation.instances import generate
from orchestrator.generation.templates import defined_alerts, grid, load_template
from orchestrator.role_topology import load_topology
from orchestrator.spec import Scenario, spec_files

TEMPLATES = sorted(f.parent.name for f in spec_files() if "vary" in yaml.safe_load(f.read_text()))


def tree(folder: Path) -> dict[str, bytes]:
    return {str(f.relative_to(folder)): f.read_bytes() for f in sorted(folder.rglob("*")) if f.is_file()}


def test_there_are_templates() -> None:
    assert len(TEMPLATES) >= 7


def test_the_same_seed_gives_byte_identical_files(tmp_path: Path) -> None:
    first = generate_into(tuple(TEMPLATES), "seed-a", 30, tmp_path / "a")
    again = generate_into(tuple(TEMPLATES), "seed-a", 30, tmp_path / "b")
    other = generate_into(tuple(TEMPLATES), "seed-b", 30, tmp_path / "c")
    assert first["count"] == 30 and tree(tmp_path / "a") == tree(tmp_path / "b")
    assert again == {**first, "out": again["out"]}
    assert {i["id"] for i in first["instances"]} != {i["id"] for i in other["instances"]}
    assert len(tree(tmp_path / "a")) == 60  # a spec and a ground truth per instance, nothing else


def test_instances_say_nothing_of_their_cause(tmp_path: Path) -> None:
    result = generate_into(tuple(TEMPLATES), "leak-check", 40, tmp_path)
    words = set(TEMPLATES)
    for template in TEMPLATES:
        scn = find_scenario(template)
        model = load_effect_model(load_template(scn).fault["role"])
        words |= {model.role, model.fault_type, model.mechanism, *(f["name"] for f in scn.faults)}
        words |= {w for w in re.split(r"[-_ ]", template) if len(w) > 3 and w not in {"shop", "down"}}
        words |= set(re.split(r"[-_ ]", model.fault_type)) | set(model.role.split("_")[1:])
        if "distractors" in scn.data["vary"]:  # nothing says which fault is the benign one
            role = scn.data["vary"]["distractors"]["role"]
            words |= {role, "distractor", "innocent", *role.split("_")[1:]}
    words.discard("container")  # the topology's own word; agents see containers anyway
    for inst in result["instances"]:
        spec = yaml.safe_load((tmp_path / inst["id"] / "scenario.yaml").read_text())
        assert re.fullmatch(r"inc-[0-9a-f]{12}", inst["id"])
        readable = " ".join([inst["id"], spec["metadata"]["name"], spec["metadata"]["description"],
                             *(t["goal"] for t in spec["tasks"]), *(f["name"] for f in spec["faults"]),
                             *(p.name for p in (tmp_path / inst["id"]).iterdir())]).lower()
        tokens = set(re.findall(r"[a-z0-9]+", readable))
        # A phrase or an id anywhere; a single word as a whole word ("rate" is no leak in "generated").
        leaked = sorted(w for w in words
                        if (w.lower() in readable if re.search(r"[-_ ]", w) else w.lower() in tokens))
        assert not leaked, f"{inst['id']} ({inst['template']}) shows {leaked}: {readable}"


@pytest.mark.parametrize("template", TEMPLATES)
def test_the_effect_model_reproduces_the_fixed_ground_truth(template: str) -> None:
    """On the target its fixed scenario names, the model derives that scenario's root cause, fault type and layer,
    its propagation chain, and every alert of the derived set is one the fixed ground truth expects."""
    scn = find_scenario(template)
    t = load_template(scn)
    derived = derive(t.model, t.model.target_in(t.fault["args"]), t.topology, args=t.fault["args"])
    fixed = yaml.safe_load(scn.ground_truth_path.read_text())
    root = next(e for e in fixed["entities"] if e.get("rootCause"))
    mine = derived["entities"][0]
    assert (mine["id"], mine["faultType"], mine["layer"]) == (root["id"], root["faultType"], root["layer"])
    pairs = {(p["source"], p["target"]) for p in derived["propagations"]}
    assert pairs <= {(p["source"], p["target"]) for p in fixed["propagations"]}
    assert pairs, "the derived chain is empty"
    expected = {(a["name"], a["entity"]) for a in fixed["alerts"]}
    assert {(a["name"], a["entity"]) for a in derived["alerts"]} <= expected


def test_every_effect_model_names_only_defined_alerts() -> None:
    for template in TEMPLATES:
        scn = find_scenario(template)
        assert unknown_alerts(load_template(scn).model, defined_alerts(scn)) == []


def test_an_effect_model_naming_an_undefined_alert_is_refused() -> None:
    model = load_effect_model("fault_container_stop")
    bad = EffectModel(**{**model.__dict__, "target_alerts": {"default": ["ServiceVanished"]}})
    problems = unknown_alerts(bad, defined_alerts(find_scenario("shop-cart-down")))
    assert len(problems) == 1 and "ServiceVanished" in problems[0].message
    assert problems[0].file.endswith("fault_container_stop/meta/effects.yml")


def test_the_grid_is_exact() -> None:
    assert grid(0.01, 0.03, 0.01) == [0.01, 0.02, 0.03]
    assert grid(1, 5, 2) == [1, 3, 5]


def _variant(template: str, edit: dict[str, object], tmp_path: Path) -> Scenario:
    scn = find_scenario(template)
    data = copy.deepcopy(scn.data)
    data["vary"] = {**data["vary"], **edit}
    return Scenario(path=tmp_path / template / "scenario.yaml", data=data)


@pytest.mark.parametrize(("edit", "field", "words"), [
    ({"target": {"fault": "stop-cart", "kinds": ["volume"]}}, "$.vary.target", "matches no entity"),
    ({"target": {"fault": "stop-cart", "exclude": ["frontend", "catalog", "cart", "checkout", "payment", "shipping",
                                                   "email", "currency", "recommendation", "ads", "gateway", "redis",
                                                   "postgres"]}},
     "$.vary.target", "matches no entity"),
    ({"target": {"fault": "no-such-fault"}}, "$.vary.target.fault", "no fault named"),
    ({"args": [{"fault": "stop-cart", "arg": "x", "range": [5, 1]}]}, "$.vary.args[0].range", "inverted range"),
    ({"args": [{"fault": "stop-cart", "arg": "x", "range": [1, 2], "choices": [1]}]}, "$.vary.args[0]",
     "either range or choices"),
])
def test_a_bad_template_is_one_error_naming_file_and_field(tmp_path: Path, edit: dict[str, object], field: str,
                                                           words: str) -> None:
    with pytest.raises(SpecInvalid) as err:
        load_template(_variant("shop-cart-down", edit, tmp_path))
    problem = err.value.problems[0]
    assert problem.path == field and words in problem.message and "shop-cart-down" in problem.file


def test_a_count_beyond_the_variation_space_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    with pytest.raises(OpsBenchError, match=r"larger than the variation space .*shop-cuj-compound-redis-down 54"):
        generate_into(("shop-cuj-compound-redis-down",), "s", 55, tmp_path / "out")
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_the_same_incident_from_two_templates_is_kept_once(tmp_path: Path) -> None:
    t = load_template(find_scenario("shop-cart-down"))
    twin = copy.deepcopy(t.scenario.data)
    twin["metadata"]["id"] = "shop-cart-down-twin"
    twin_t = load_template(Scenario(path=tmp_path / "twin" / "scenario.yaml", data=twin))
    out = generate([t, twin_t], "twins", 2 * len(t.variations))
    assert len(out.instances) == len(t.variations) and len(out.dropped) == len(t.variations)
    assert all("the same incident as inc-" in d["reason"] for d in out.dropped)


def test_a_template_predicate_follows_the_topology() -> None:
    topo = Topology(load_topology("shop") or {})
    assert topo.entries == ["gateway"] and "loadgen" in topo.users
    assert topo.paths_to_entry("shipping") == [["shipping", "checkout", "frontend", "gateway"]]


@pytest.mark.parametrize(("args", "words"), [
    (["--seed", "a", "--seed-file", "x"], "exactly one of --seed and --seed-file"),
    (["--seed-file", "{empty}"], "is empty"),
    (["--seed-file", "{missing}"], "cannot read"),
    (["--seed-file", "{binary}"], "cannot read"),
])
def test_seed_errors(tmp_path: Path, args: list[str], words: str) -> None:
    (tmp_path / "empty").write_text("\n")
    (tmp_path / "binary").write_bytes(b"\xff\xfe\xfa")
    args = [a.format(empty=tmp_path / "empty", missing=tmp_path / "missing", binary=tmp_path / "binary")
            for a in args]
    out = CliRunner().invoke(main, ["generate", "shop-cart-down", "--count", "1", "--out", str(tmp_path / "o"),
                                    *args])
    assert out.exit_code == 2 and words in out.output, out.output
    assert not (tmp_path / "o").exists()


def test_the_cli_writes_instances_that_validate(tmp_path: Path) -> None:
    seed_file = tmp_path / "seed"
    seed_file.write_text("a private seed\n")
    out = CliRunner().invoke(main, ["generate", "shop-cart-down", "shop-currency-cpu-throttled", "--seed-file",
                                    str(seed_file), "--count", "5", "--out", str(tmp_path / "o")])
    assert out.exit_code == 0, out.output
    assert "a private seed" not in out.output and "5 instance(s) written" in out.output
    validated = CliRunner().invoke(main, ["validate", *(str(d) for d in sorted((tmp_path / "o").iterdir()))])
    assert validated.exit_code == 0, validated.output
    assert paths.SPECS_DIR not in (tmp_path / "o").parents
