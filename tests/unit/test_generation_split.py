"""A held-out split drawn apart from a public one (`--exclude`): no instance of it is an incident of the public one."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from orchestrator.catalog import find_scenario
from orchestrator.cli import main
from orchestrator.draw import excluded_incidents, generate_into
from orchestrator.errors import OpsBenchError
from orchestrator.generation.instances import generate, incident_digest
from orchestrator.generation.templates import load_template
from orchestrator.harness.corpus_build import BuildRequest, build
from orchestrator.progress import Progress

NO_PROGRESS = Progress()

TEMPLATES = ("shop-cart-down", "shop-checkout-payment-abort")


def tree(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_no_instance_of_the_private_split_is_an_incident_of_the_public_one(tmp_path: Path) -> None:
    public = generate_into(TEMPLATES, "public-seed", 20, tmp_path / "public")
    incidents = excluded_incidents([tmp_path / "public"])
    assert len(incidents) == public["count"] == 20
    private = generate_into(TEMPLATES, "private-seed", 20, tmp_path / "private", incidents)
    assert private["count"] == 20
    assert excluded_incidents([tmp_path / "private"]).isdisjoint(incidents)
    assert any(d["reason"] == "an incident of an excluded split" for d in private["dropped"])
    # without the exclusion the same private seed draws some of the public incidents (the test means something)
    free = generate([load_template(find_scenario(t)) for t in TEMPLATES], "private-seed", 20)
    assert any(incident_digest(i.spec) in incidents for i in free.instances)


def test_a_built_corpus_folder_excludes_as_well(tmp_path: Path) -> None:
    generate_into(TEMPLATES, "public-seed", 6, tmp_path / "corpus" / "scenarios")
    assert excluded_incidents([tmp_path / "corpus"]) == excluded_incidents([tmp_path / "corpus" / "scenarios"])
    assert len(excluded_incidents([tmp_path / "corpus"])) == 6


def test_a_template_the_exclusion_empties_gives_its_share_to_the_others(tmp_path: Path) -> None:
    cart = load_template(find_scenario("shop-cart-down"))
    everything = frozenset(incident_digest(i.spec) for i in generate([cart], "s", len(cart.variations)).instances)
    both = [cart, load_template(find_scenario("shop-checkout-payment-abort"))]
    drawn = generate(both, "s", 10, everything)
    assert len(drawn.instances) == 10
    assert {i.template for i in drawn.instances} == {"shop-checkout-payment-abort"}


def test_a_published_split_kept_as_digests_excludes_as_its_folder_does(tmp_path: Path) -> None:
    generate_into(TEMPLATES, "public-seed", 8, tmp_path / "public")
    printed = CliRunner().invoke(main, ["corpus", "incidents", str(tmp_path / "public")])
    assert printed.exit_code == 0, printed.output
    lines = printed.output.splitlines()
    assert len(lines) == 8 and lines == sorted(lines)
    (tmp_path / "published.txt").write_text("# a split published before its templates changed\n" + printed.output)
    assert excluded_incidents([tmp_path / "published.txt"]) == excluded_incidents([tmp_path / "public"])
    private = generate_into(TEMPLATES, "public-seed", 8, tmp_path / "private",
                            excluded_incidents([tmp_path / "published.txt"]))
    assert private["count"] == 8
    assert excluded_incidents([tmp_path / "private"]).isdisjoint(set(lines))


def test_a_digest_file_with_a_bad_line_is_refused_naming_the_line(tmp_path: Path) -> None:
    bad = tmp_path / "published.txt"
    bad.write_text("# header\n" + "a" * 64 + "\nshop-cart-down\n")
    with pytest.raises(OpsBenchError, match=r"published.txt:3: 'shop-cart-down' is not an incident digest"):
        excluded_incidents([bad])
    (tmp_path / "empty.txt").write_text("# only a comment\n")
    with pytest.raises(OpsBenchError, match="no incident digest"):
        excluded_incidents([tmp_path / "empty.txt"])


def test_the_committed_published_splits_keep_their_incidents_out_of_a_heldout_draw(tmp_path: Path) -> None:
    published = sorted(Path("orchestrator/generation/published").glob("*.txt"))
    assert published, "the dev split published on 2026-11-28 is listed"
    old = excluded_incidents(published)
    assert len(old) >= 270
    drawn = generate_into(("shop-ads-cpu-starved", "shop-email-wrong-image"), "any-private-seed", 30,
                          tmp_path / "heldout", old | excluded_incidents([Path("scenario_specs")]))
    assert drawn["count"] == 30
    assert excluded_incidents([tmp_path / "heldout"]).isdisjoint(old)


def test_without_an_exclusion_the_draw_is_unchanged(tmp_path: Path) -> None:
    generate_into(TEMPLATES, "seed-a", 12, tmp_path / "a")
    generate_into(TEMPLATES, "seed-a", 12, tmp_path / "b", frozenset())
    assert tree(tmp_path / "a") == tree(tmp_path / "b")


def test_an_exclusion_folder_without_instances_is_refused(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(OpsBenchError, match="no generated instance there"):
        excluded_incidents([tmp_path / "empty"])
    result = CliRunner().invoke(main, ["generate", "--all-templates", "--seed", "x", "--count", "3", "--out",
                                       str(tmp_path / "out"), "--exclude", str(tmp_path / "empty")])
    assert result.exit_code != 0 and "no generated instance there" in result.output
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_a_build_resumes_only_with_the_same_exclusion(tmp_path: Path) -> None:
    out = tmp_path / "corpus"
    req = BuildRequest(templates=TEMPLATES, seed="s", count=4, exclude=frozenset({"a"}))
    assert req.key() == BuildRequest(templates=TEMPLATES, seed="s", count=4, exclude=frozenset({"a"})).key()
    out.mkdir()
    (out / "build.json").write_text(json.dumps({"request": req.key(), "instances": []}))
    # refused before anything is drawn or recorded: another exclusion, none, or one that is no longer the same
    for other in (frozenset({"b"}), frozenset()):
        with pytest.raises(OpsBenchError, match="other arguments"):
            build(BuildRequest(templates=TEMPLATES, seed="s", count=4, exclude=other), out, NO_PROGRESS)
    with pytest.raises(OpsBenchError, match="--exclude"):
        build(BuildRequest(scenarios=("shop-cart-down",), exclude=frozenset({"a"})), tmp_path / "fixed",
              NO_PROGRESS)
    assert not (tmp_path / "fixed").exists()
