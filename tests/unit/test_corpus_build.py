"""`opsbench corpus build` and `corpus card` with the live parts faked: the recorder writes a stand-in snapshot (or
fails as a recording does) and the replayer reports a verdict. What is tested is the build's own logic: which
instances are kept, what the index and the owner's record say, resuming, refusing, the leak check and the card.
The live build itself is exercised in `make test-full` and docs/generation.md quotes it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from orchestrator.cli import main
from orchestrator.corpus import layout
from orchestrator.corpus.card import card, render
from orchestrator.harness import corpus_build
from orchestrator.harness.corpus_build import BuildRequest, build
from orchestrator.harness.record import Recording
from orchestrator.harness.replay import ReplayRecord
from orchestrator.progress import Progress

pytestmark = pytest.mark.usefixtures("home")

TEMPLATES = ("shop-cart-down", "shop-currency-crashloop")


class Fakes:
    """Stand-ins for the recorder and the replayer, with knobs for what goes wrong."""

    def __init__(self) -> None:
        self.recorded: list[str] = []
        self.fail: set[int] = set()  # indexes (in recording order) whose manifestation fails
        self.leftover: set[int] = set()
        self.leak = ""  # a string the stand-in snapshot's log carries
        self.passes = True
        self.undeployed: set[int] = set()  # indexes whose environment does not deploy

    def record(self, scenarios: list[Any], out: Path, repeats: int, progress: Progress, on_recording: Any,
               cap_s: float, parallel: int = 1) -> list[Recording]:
        made = []
        for scn in scenarios:
            n = len(self.recorded)
            self.recorded.append(scn.id)
            if n in self.undeployed:
                rec = Recording(scn.id, 1, "not-injected", "deploy timeout: ")
            elif n in self.fail:
                rec = Recording(scn.id, 1, "invalid", "fault did not manifest: ServiceDown never fired")
            else:
                sid = f"{scn.id}-20261127T000000Z-{n:06x}"
                folder = out / sid
                (folder / "telemetry" / "logs").mkdir(parents=True)
                (folder / "snapshot.json").write_text(json.dumps({"snapshot_id": sid, "scenario": {"id": scn.id}}))
                (folder / "manifest.json").write_text(json.dumps({"tasks": scn.data["tasks"]}))
                log = folder / "telemetry" / "logs" / "cart-1.jsonl"
                log.write_text(f'{{"msg": "connection refused {self.leak}"}}\n')
                rec = Recording(scn.id, 1, "recorded", "", sid, str(folder), 1000 + n, 3, ["logs"], [0.0, 60.0],
                                f"run-{n}", "host",
                                {"lifecycle": 40.0, "snapshot": 5.0, "cleanup": 12.0, "total": 57.0},
                                recovered=True, leftovers=["cart-1 paused"] if n in self.leftover else [])
                if n in self.leftover:
                    rec.reason = "recorded, but the removal left: cart-1 paused"
            made.append(rec)
            on_recording(rec)
        return made

    def replay(self, paths: list[Path], agent: str | None, trials: int, parallel: int, progress: Progress,
               purpose: str, on_record: Any) -> list[ReplayRecord]:
        out = []
        for path in paths:
            for t in range(1, trials + 1):
                rec = ReplayRecord(path.name, path.name.split("-2026")[0], "heuristic", t, "", "completed",
                                   self.passes, 3.0)
                on_record(rec)
                out.append(rec)
        return out


@pytest.fixture
def fakes(monkeypatch: pytest.MonkeyPatch) -> Fakes:
    f = Fakes()
    monkeypatch.setattr(corpus_build, "record", f.record)
    monkeypatch.setattr(corpus_build, "replay", f.replay)
    return f


def request(**kw: Any) -> BuildRequest:
    return BuildRequest(**{"templates": TEMPLATES, "seed": "a-published-seed", "count": 6, "replays": 2, **kw})


def test_a_build_keeps_what_was_proven_and_says_nothing_of_templates(tmp_path: Path, fakes: Fakes) -> None:
    fakes.fail = {1}
    fakes.leftover = {4}
    out = tmp_path / "corpus"
    rec = build(request(), out, Progress())
    statuses = [i["status"] for i in rec["instances"]]
    assert statuses.count("verified") == 4 and statuses.count("dropped") == 2
    index = layout.read_index(out)
    kept = {i["id"] for i in rec["instances"] if i["status"] == "verified"}
    assert {r["id"] for r in index["instances"]} == kept
    # A dropped instance leaves the corpus whole: no spec, no snapshot.
    assert sorted(p.name for p in (out / layout.SCENARIOS).iterdir()) == sorted(kept)
    assert len(list((out / layout.SNAPSHOTS).iterdir())) == 4
    text = (out / layout.CORPUS_INDEX).read_text()
    for word in [*TEMPLATES, "fault_container", "a-published-seed", "crash", "stop"]:
        assert word not in text
    # The owner's record has the yields per template and the reasons.
    yields = rec["yields"]
    assert sum(y["drawn"] for y in yields.values()) == 6
    assert sum(y["verified"] for y in yields.values()) == 4
    assert any("never fired" in r for y in yields.values() for r in y["reasons"])
    assert any("removal left" in r for y in yields.values() for r in y["reasons"])
    assert "a-published-seed" not in (out / layout.BUILD_RECORD).read_text()
    assert rec["leak_check"]["leaks"] == [] and rec["leak_check"]["files"] >= 12
    assert index["checksum"] == layout.checksum(out)


def test_a_leaked_word_is_found_and_not_echoed(tmp_path: Path, fakes: Fakes) -> None:
    fakes.leak = "a-published-seed"
    rec = build(request(count=2), tmp_path / "c", Progress())
    leaks = rec["leak_check"]["leaks"]
    assert len(leaks) == 2 and all(leak["file"].endswith("cart-1.jsonl") for leak in leaks)
    assert "a-published-seed" not in json.dumps(rec)


def test_a_build_cut_short_resumes_without_recording_twice(tmp_path: Path, fakes: Fakes) -> None:
    out = tmp_path / "c"
    first = build(request(count=4), out, Progress())
    assert len(fakes.recorded) == 4
    again = build(request(count=4), out, Progress())
    assert len(fakes.recorded) == 4  # every instance was decided: nothing recorded again
    assert [i["id"] for i in again["instances"]] == [i["id"] for i in first["instances"]]
    # An interrupted instance is pending and recorded on resume.
    data = json.loads((out / layout.BUILD_RECORD).read_text())
    data["instances"][0]["status"] = "pending"
    (out / layout.BUILD_RECORD).write_text(json.dumps(data))
    build(request(count=4), out, Progress())
    assert fakes.recorded[4:] == [data["instances"][0]["id"]]


def test_dropped_instances_are_recorded_again_only_when_asked(tmp_path: Path, fakes: Fakes) -> None:
    fakes.fail = {1}
    out = tmp_path / "c"
    first = build(request(count=3), out, Progress())
    dropped = [i["id"] for i in first["instances"] if i["status"] == "dropped"]
    assert len(dropped) == 1
    build(request(count=3), out, Progress())
    assert len(fakes.recorded) == 3  # a plain resume keeps the drop
    again = build(request(count=3, retry_dropped=True), out, Progress())
    assert fakes.recorded[3:] == dropped  # only the dropped one, and it now verifies
    inst = next(i for i in again["instances"] if i["id"] == dropped[0])
    assert inst["status"] == "verified" and "never fired" in inst["earlier_drops"][0]["reason"]
    assert sum(y["retried"] for y in again["yields"].values()) == 1
    assert sum(y["verified"] for y in again["yields"].values()) == 3
    assert (out / layout.SCENARIOS / dropped[0] / "scenario.yaml").is_file()
    assert "| Retried |" in render([card(out)])


def test_an_environment_that_did_not_deploy_drops_nothing(tmp_path: Path, fakes: Fakes) -> None:
    fakes.undeployed = {0}
    out = tmp_path / "c"
    first = build(request(count=2), out, Progress())
    assert [i["status"] for i in first["instances"]] == ["pending", "verified"]
    assert first["instances"][0]["reason"].startswith("deploy timeout")
    again = build(request(count=2), out, Progress())
    assert fakes.recorded[2:] == [first["instances"][0]["id"]]
    assert [i["status"] for i in again["instances"]] == ["verified", "verified"]


def test_one_build_at_a_time_on_a_folder_and_stray_snapshots_leave(tmp_path: Path, fakes: Fakes) -> None:
    import fcntl

    from orchestrator.errors import OpsBenchError

    out = tmp_path / "c"
    build(request(count=2), out, Progress())
    with (out / corpus_build.LOCK).open("a+") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)  # as a running build holds it
        with pytest.raises(OpsBenchError, match="another `opsbench corpus build` is running"):
            build(request(count=2), out, Progress())
    stray = out / layout.SNAPSHOTS / "inc-000000000000-20261127T000000Z-abcdef"
    (stray / "telemetry").mkdir(parents=True)
    again = build(request(count=2), out, Progress())
    assert not stray.exists() and len(fakes.recorded) == 2
    assert len(list((out / layout.SNAPSHOTS).iterdir())) == 2
    assert layout.read_index(out)["checksum"] == layout.checksum(out) and again["leak_check"]["leaks"] == []


def test_a_generated_corpus_grows_and_sheds_what_is_no_longer_drawn(tmp_path: Path, fakes: Fakes) -> None:
    out = tmp_path / "c"
    first = build(request(count=4), out, Progress())
    assert len(fakes.recorded) == 4
    grown = build(request(count=6), out, Progress())
    assert len(fakes.recorded) == 6  # a larger count records only the new draws
    assert {i["id"] for i in first["instances"]} <= {i["id"] for i in grown["instances"]}
    # A template left out: its instances leave the corpus (spec and snapshot) and are listed as superseded.
    kept = tuple(TEMPLATES[:1])
    shed = build(request(templates=kept, count=6), out, Progress())
    gone = {g["id"] for g in shed["superseded"]}
    assert gone and gone == {i["id"] for i in grown["instances"] if i["template"] == TEMPLATES[1]}
    assert all(g["status"] == "verified" and "no longer drawn" in g["reason"] for g in shed["superseded"])
    assert not gone & {p.name for p in (out / layout.SCENARIOS).iterdir()}
    assert not any(p.name.startswith(tuple(gone)) for p in (out / layout.SNAPSHOTS).iterdir())
    assert {r["id"] for r in layout.read_index(out)["instances"]} == {i["id"] for i in shed["instances"]}
    assert layout.read_index(out)["checksum"] == layout.checksum(out)
    # An instance whose spec changed since its recording is recorded again.
    data = json.loads((out / layout.BUILD_RECORD).read_text())
    data["instances"][0]["spec_sha256"] = "0" * 64
    (out / layout.BUILD_RECORD).write_text(json.dumps(data))
    n = len(fakes.recorded)
    build(request(templates=kept, count=6), out, Progress())
    assert fakes.recorded[n:] == [data["instances"][0]["id"]]


@pytest.mark.parametrize(("kw", "words"), [
    ({"seed": "another-seed"}, "other arguments"),
    ({"count": 3}, "other arguments"),
    ({"templates": (), "scenarios": ("shop-cart-down",), "seed": None}, "other arguments"),
])
def test_resuming_with_other_arguments_is_refused(tmp_path: Path, fakes: Fakes, kw: dict[str, Any],
                                                  words: str) -> None:
    from orchestrator.errors import OpsBenchError

    out = tmp_path / "c"
    build(request(count=4), out, Progress())
    with pytest.raises(OpsBenchError, match=words):
        build(request(**{"count": 4, **kw}), out, Progress())


def test_a_folder_that_is_not_a_corpus_is_refused(tmp_path: Path, fakes: Fakes) -> None:
    from orchestrator.errors import OpsBenchError

    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "notes.txt").write_text("mine")
    with pytest.raises(OpsBenchError, match="not an empty folder"):
        build(request(), tmp_path / "c", Progress())
    assert sorted(p.name for p in (tmp_path / "c").iterdir()) == ["notes.txt"]


def test_the_card_counts_and_compares(tmp_path: Path, fakes: Fakes) -> None:
    fakes.fail = {0}
    build(request(), tmp_path / "dev", Progress())
    fakes.passes = False
    build(request(seed="held-out-seed-1"), tmp_path / "test", Progress())
    dev, test = card(tmp_path / "dev"), card(tmp_path / "test")
    assert dev["instances"] == 5 and test["instances"] == 6
    assert dev["checksum_ok"] and sum(dev["by_level"].values()) == 5
    assert dev["baseline_pass_at_1"]["all"] == 1.0 and test["baseline_pass_at_1"]["all"] == 0.0
    assert sum(dev["by_mechanism"].values()) == 5 and dev["verification"]["dropped"] == 1
    text = render([dev, test])
    assert "| dev | 5 |" in text and "| test | 6 |" in text and "1 dropped" in text
    # A corpus handed over without the owner's record still has a card, without what only the owner knows.
    (tmp_path / "test" / layout.BUILD_RECORD).unlink()
    bare = card(tmp_path / "test")
    assert "by_mechanism" not in bare and bare["baseline_pass_at_1"]["all"] is None
    # A changed file shows in the checksum.
    next((tmp_path / "dev" / layout.SNAPSHOTS).rglob("*.jsonl")).write_text("{}\n")
    assert not card(tmp_path / "dev")["checksum_ok"]


def test_the_card_splits_pass_at_1_by_distractor(tmp_path: Path, fakes: Fakes) -> None:
    """The baseline's pass@1 with a distractor among an instance's faults and without, read from the specs: here
    the replays of the instances with one are made to fail, so the split must be 0 and 1."""
    out = tmp_path / "c"
    build(request(count=12), out, Progress())
    record = json.loads((out / layout.BUILD_RECORD).read_text())
    specs = {i["id"]: yaml.safe_load((out / layout.SCENARIOS / i["id"] / layout.SPEC_FILE).read_text())
             for i in record["instances"] if i["status"] == "verified"}
    with_one = {iid for iid, spec in specs.items() if any(f.get("distractor") for f in spec["faults"])}
    assert with_one and with_one != set(specs), "the draw has instances with and without a distractor"
    for inst in record["instances"]:
        if inst["id"] in with_one:
            inst["replays"]["passed"] = [False] * len(inst["replays"]["passed"])
    (out / layout.BUILD_RECORD).write_text(json.dumps(record))
    split = card(out)["baseline_pass_at_1_by_distractor"]
    assert split == {"with": 0.0, "without": 1.0, "instances_with": len(with_one),
                     "instances_without": len(specs) - len(with_one)}
    assert f"| c | 0.00 ({len(with_one)}) | 1.00 ({len(specs) - len(with_one)}) |" in render([card(out)])
    # No instance with a distractor: no split (and no table).
    for iid in with_one:
        (out / layout.SCENARIOS / iid / layout.SPEC_FILE).unlink()
    assert card(out)["baseline_pass_at_1_by_distractor"] is None


def test_the_cli_builds_cards_and_refuses(tmp_path: Path, fakes: Fakes) -> None:
    seed = tmp_path / "seed"
    seed.write_text("private-seed-of-the-owner\n")
    runner = CliRunner()
    res = runner.invoke(main, ["corpus", "build", "--templates", " ".join(TEMPLATES), "--seed-file", str(seed),
                               "--count", "3", "--out", str(tmp_path / "c"), "--json", "--quiet"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["ok"] is True and "private-seed-of-the-owner" not in res.output
    res = runner.invoke(main, ["corpus", "card", str(tmp_path / "c")])
    assert res.exit_code == 0 and "# Corpus card: c" in res.output
    assert (tmp_path / "c" / layout.CARD_MD).read_text() == res.output
    res = runner.invoke(main, ["corpus", "card", str(tmp_path), "--json"])
    assert res.exit_code == 2 and "not a built corpus" in json.loads(res.output)["error"]
    res = runner.invoke(main, ["corpus", "build", "--scenarios", "shop-cart-down", "--seed", "x",
                               "--out", str(tmp_path / "d")])
    assert res.exit_code == 2 and "--seed" in res.output


def test_a_fixed_corpus_freezes_catalog_scenarios(tmp_path: Path, fakes: Fakes) -> None:
    rec = build(BuildRequest(scenarios=("shop-cart-down", "shop-redis-down"), replays=1), tmp_path / "f", Progress())
    assert [i["status"] for i in rec["instances"]] == ["verified", "verified"]
    assert (tmp_path / "f" / layout.SCENARIOS / "shop-cart-down" / "ground_truth.yaml").is_file()
    assert layout.read_index(tmp_path / "f")["generated"] is False


def test_a_snapshot_of_a_corpus_replays_its_own_instance_spec(tmp_path: Path, fakes: Fakes) -> None:
    build(request(count=2), tmp_path / "c", Progress())
    snap = next((tmp_path / "c" / layout.SNAPSHOTS).iterdir())
    iid = snap.name.split("-2026")[0]
    assert layout.instance_spec(snap, iid) == (tmp_path / "c" / layout.SCENARIOS / iid / "scenario.yaml").resolve()
    assert layout.instance_spec(tmp_path, iid) is None


def test_bench_generate_reports_throughput_per_level(fakes: Fakes) -> None:
    from orchestrator.harness import bench_generate

    fakes.fail = {2}
    report = bench_generate.bench_generate(("shop-cart-down", "shop-currency-crashloop"), 3, [1, 2], Progress(),
                                           lambda s: None)
    assert report["draw"]["count"] > 0 and report["draw"]["per_hour"] > 0
    k1, k2 = report["levels"]["1"], report["levels"]["2"]
    assert (k1["instances"], k1["verified"], k1["dropped"]) == (3, 2, 1)
    assert k2["verified"] == 3 and k2["median_trial_seconds"] is None  # the stand-in recordings time no trial
    assert k1["per_hour"] > 0 and k1["deploy_seconds"] == 0.0
    text = bench_generate.render(report)
    assert text.splitlines()[0].startswith("drawing: ") and len(text.splitlines()) == 5


def test_instances_are_recorded_one_template_at_a_time_in_turn() -> None:
    from orchestrator.harness.corpus_build import interleaved

    rows = [{"id": f"{t}{n}", "template": t} for t in "abc" for n in range(3 if t != "b" else 1)]
    assert [r["id"] for r in interleaved(rows)] == ["a0", "b0", "c0", "a1", "c1", "a2", "c2"]


def test_a_fixed_corpus_reuses_verified_recordings(tmp_path: Path, fakes: Fakes) -> None:
    from orchestrator.snapshots.archive import import_archive

    recorded = tmp_path / "recorded"
    recorded.mkdir()
    sample = next(Path("tests/data/snapshots").glob("shop-cart-down-*.tar.gz"))
    info = import_archive(sample, recorded)
    (recorded / "not-a-snapshot").mkdir()
    req = BuildRequest(scenarios=("shop-cart-down", "shop-redis-down"), replays=1, reuse=recorded)
    rec = build(req, tmp_path / "f", Progress())
    assert fakes.recorded == ["shop-redis-down"]  # only the one without a recording is recorded
    cart = next(i for i in rec["instances"] if i["id"] == "shop-cart-down")
    assert cart["status"] == "verified" and cart["recording"]["reused"] == str(info.path)
    assert (tmp_path / "f" / cart["snapshot"] / "snapshot.json").is_file()
    from orchestrator.errors import OpsBenchError

    with pytest.raises(OpsBenchError, match="with --scenarios"):
        build(request(reuse=recorded), tmp_path / "g", Progress())


def test_a_corpus_snapshot_verifies_and_replays_against_its_instance_spec(tmp_path: Path) -> None:
    """A generated instance is in no catalog: verifying its snapshot for a replay reads the spec the corpus holds
    beside it (and refuses it once that spec moved to another version)."""
    import yaml
    from snapshot_fixtures import make_snapshot

    from orchestrator.draw import generate_into
    from orchestrator.errors import OpsBenchError
    from orchestrator.harness.replay import open_snapshots

    root = tmp_path / "c"
    made = generate_into(("shop-cart-down",), "seed-x", 1, root / layout.SCENARIOS)
    iid = made["instances"][0]["id"]
    layout.write_json(root / layout.CORPUS_INDEX, {"format_version": 1, "instances": []})
    snap = root / layout.SNAPSHOTS / f"{iid}-20261127T000000Z-000000"
    make_snapshot(snap, scenario=iid)
    with open_snapshots([snap]) as targets:
        assert targets[0].scenario.id == iid and targets[0].scenario.path.parent == root / layout.SCENARIOS / iid
    spec = root / layout.SCENARIOS / iid / "scenario.yaml"
    data = yaml.safe_load(spec.read_text())
    data["metadata"]["version"] = 2
    spec.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(OpsBenchError, match="now at version 2"), open_snapshots([snap]):
        pass


def test_a_template_whose_instances_cannot_be_frozen_is_refused(tmp_path: Path, fakes: Fakes) -> None:
    from orchestrator.errors import OpsBenchError

    with pytest.raises(OpsBenchError, match=r"shop-cart-down-mitigate cannot make a frozen corpus: .*mitigate"):
        build(request(templates=("shop-cart-down", "shop-cart-down-mitigate")), tmp_path / "c", Progress())
    assert fakes.recorded == []
