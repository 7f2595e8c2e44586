"""The private (held-out) split of generated DevOps tasks (`orchestrator.devops_projects.split`, `opsbench devops
generate --seed-file --exclude`), on a fake generator that writes what the real one writes, seed included."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from orchestrator.cli import main
from orchestrator.devops_projects import generate as gen_module
from orchestrator.devops_projects.fetch import StepFailed
from orchestrator.devops_projects.split import (
    check_private_seed,
    generate_private,
    public_ids,
    redact,
    seed_digest,
)
from orchestrator.devops_projects.tasks import Draw, Instance, Report

SEED = "k3Jq9vT0pL2xW8nYfA4s"


def write_folder(root: Path, iid: str, provenance: dict[str, Any]) -> None:
    (root / iid).mkdir(parents=True)
    (root / iid / "scenario.yaml").write_text(f"metadata:\n  id: {iid}\n")
    (root / iid / "generated.json").write_text(json.dumps({"id": iid, "provenance": provenance}))


def instance(iid: str, family: str, provenance: dict[str, Any]) -> Instance:
    return Instance(id=iid, family=family, project="go-semver", language="go", title="t", goal="g", fault_edits=[],
                    stage={}, reference_edits=[], provenance=provenance)


class FakeGenerate:
    """Writes one folder per instance it is given (with the seed in its provenance, as the real one does), a
    yields.json holding the seed, and says the seed in its progress."""

    def __init__(self, instances: list[Instance]) -> None:
        self.instances = instances
        self.seen: dict[str, Any] = {}

    def __call__(self, project_ids: list[str], families: list[str], seed: str, count: int, out: Path,
                 **kwargs: Any) -> list[Report]:
        self.seen = {"projects": project_ids, "families": families, "seed": seed, "count": count, **kwargs}
        kwargs["say"](f"go-semver: drawing build (seed {seed})")
        report = Report("go-semver", "build", seed)
        for inst in self.instances:
            inst.provenance["seed"] = seed
            write_folder(out, inst.id, inst.provenance)
            report.draws.append(Draw("build", "go-semver", inst.id, kept=True, instance=inst.id))
            report.instances.append(inst)
        out.mkdir(parents=True, exist_ok=True)
        (out / "yields.json").write_text(json.dumps({"go-semver/build": report.summary()}))
        return [report]


@pytest.fixture
def public(tmp_path: Path) -> Path:
    dev = tmp_path / "dev"
    write_folder(dev, "devops-gen-build-go-semver-aaaa0001", {"seed": "opsbench-dev-1"})
    write_folder(dev, "devops-gen-issue-go-semver-aaaa0002", {"seed": "opsbench-dev-1"})
    (dev / "yields.json").write_text("{}")
    return dev


def test_the_private_split_leaves_out_the_public_instances_and_every_trace_of_the_seed(
        tmp_path: Path, public: Path) -> None:
    out = tmp_path / "test-split"
    fake = FakeGenerate([
        instance("devops-gen-build-go-semver-aaaa0001", "build", {"cause": "toolchain-target"}),   # public too
        instance("devops-gen-build-go-semver-bbbb0001", "build", {"cause": "unresolvable-pin"}),
        instance("devops-gen-pipeline-go-semver-bbbb0002", "pipeline",
                 {"stages": ["devops-gen-build-go-semver-bbbb0001", "devops-gen-issue-go-semver-aaaa0002"]}),
        instance("devops-gen-pipeline-go-semver-bbbb0003", "pipeline",
                 {"stages": ["devops-gen-build-go-semver-bbbb0001", "devops-gen-issue-go-semver-bbbb0004"]}),
    ])
    said: list[str] = []
    result = generate_private(fake, ["go-semver"], ["build", "pipeline"], SEED, 3, out, exclude=[public],
                              say=said.append, where="host")
    assert fake.seen["seed"] == SEED and fake.seen["where"] == "host"  # the generator itself draws with the seed
    # ... and is told the public ids, to skip them before any proof (what it keeps anyway is removed below)
    assert fake.seen["skip"] == {"devops-gen-build-go-semver-aaaa0001", "devops-gen-issue-go-semver-aaaa0002"}
    kept = sorted(d.name for d in out.iterdir() if d.is_dir())
    assert kept == ["devops-gen-build-go-semver-bbbb0001", "devops-gen-pipeline-go-semver-bbbb0003"]
    assert result["excluded"] == {
        "devops-gen-build-go-semver-aaaa0001": "in the public split",
        "devops-gen-pipeline-go-semver-bbbb0002": "chains devops-gen-issue-go-semver-aaaa0002, in the public split"}
    summary = result["yields"][0]
    assert summary["kept"] == 4 and summary["kept_private"] == 2 and summary["seed"] == seed_digest(SEED)
    assert summary["instances"] == kept
    assert said == [f"go-semver: drawing build (seed {seed_digest(SEED)})"]
    for path in out.rglob("*"):
        if path.is_file():
            assert SEED not in path.read_text(), path
    assert json.loads((out / kept[0] / "generated.json").read_text())["provenance"]["seed"] == seed_digest(SEED)
    split = json.loads((out / "split.json").read_text())
    assert split["seed"] == seed_digest(SEED) and split["public_ids"] == 2
    assert SEED not in json.dumps(result)


def test_a_private_seed_is_long_and_not_the_published_one() -> None:
    check_private_seed(SEED, "seed.txt")
    with pytest.raises(StepFailed, match=r"seed.txt: the seed is the public dev split's"):
        check_private_seed("opsbench-dev-1", "seed.txt")
    with pytest.raises(StepFailed, match=r"seed.txt: a private seed needs at least 12 characters, the first line "
                                         r"has 5"):
        check_private_seed("abcde", "seed.txt")


def test_an_exclude_folder_without_instances_is_named(tmp_path: Path, public: Path) -> None:
    assert public_ids([public]) == {"devops-gen-build-go-semver-aaaa0001", "devops-gen-issue-go-semver-aaaa0002"}
    (tmp_path / "typo").mkdir()
    with pytest.raises(StepFailed, match=r"typo: no generated instance in it"):
        public_ids([tmp_path / "typo"])


def test_redact_reaches_nested_strings_only() -> None:
    value = {"a": [f"x{SEED}y", 3, None], "b": {"c": SEED}}
    assert redact(value, SEED) == {"a": [f"x{seed_digest(SEED)}y", 3, None], "b": {"c": seed_digest(SEED)}}
    assert seed_digest(SEED) != seed_digest(SEED + "x") and seed_digest(SEED).startswith("sha256:")


def test_the_command_reads_the_seed_file_and_never_prints_the_seed(tmp_path: Path, public: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeGenerate([instance("devops-gen-build-go-semver-cccc0001", "build", {"cause": "broken-file"})])
    monkeypatch.setattr(gen_module, "generate", fake)
    seed_file = tmp_path / "seed"
    seed_file.write_text(SEED + "\nignored\n")
    out = tmp_path / "split"
    result = CliRunner().invoke(main, ["devops", "generate", "--seed-file", str(seed_file), "--exclude", str(public),
                                       "--project", "go-semver", "--family", "build", "--count", "1", "--out",
                                       str(out), "--json"])
    assert result.exit_code == 0, result.output
    assert SEED not in result.output
    assert fake.seen["seed"] == SEED and fake.seen["projects"] == ["go-semver"]
    assert json.loads(result.stdout)["seed"] == seed_digest(SEED)
    assert (out / "devops-gen-build-go-semver-cccc0001").is_dir()


@pytest.mark.parametrize(("args", "message"), [
    (["--seed", "s", "--exclude", "DEV"], "--exclude goes with --seed-file"),
    (["--seed-file", "SEED", "--record"], "--record keeps the public split's yields"),
    (["--seed", "s", "--seed-file", "SEED"], "give exactly one of --seed and --seed-file"),
    ([], "give exactly one of --seed and --seed-file"),
    (["--seed-file", "EMPTY"], "is empty: write the seed on its first line"),
    (["--seed-file", "SHORT"], "a private seed needs at least 12 characters"),
])
def test_bad_split_options_are_refused(tmp_path: Path, public: Path, monkeypatch: pytest.MonkeyPatch,
                                       args: list[str], message: str) -> None:
    monkeypatch.setattr(gen_module, "generate", FakeGenerate([]))
    files = {"SEED": SEED, "EMPTY": "\n", "SHORT": "short"}
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    real = [str(tmp_path / a) if a in files else str(public) if a == "DEV" else a for a in args]
    result = CliRunner().invoke(main, ["devops", "generate", *real, "--out", str(tmp_path / "o")])
    assert result.exit_code != 0
    assert message in " ".join(result.output.split())
