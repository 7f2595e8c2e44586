"""The private (held-out) test split of generated DevOps tasks, drawn by the same generator as the public dev split.

The held-out workflow of the SRE corpus (docs/generation.md, `--seed-file`) applied to `opsbench devops generate`:

- the seed comes from a file's first line (`cli.generate.read_seed`) and is never printed nor written: progress
  messages, every file written under the output folder (`generated.json`'s provenance, `yields.json`) and the
  summaries carry `seed_digest(seed)` instead, and a final leak check fails when the seed is still in any file
  there;
- the split is disjoint from the public one: an instance whose id is among the public split's (the `--exclude`
  folders, e.g. the dev split's output folders), and a pipeline that chains one, is skipped by the generator
  before any screening or proof (a draw with that reason in the yields); whatever is kept is checked again after
  the draw and removed if public, each listed in ``split.json`` with the reason. Instance ids hash the project and
  what was drawn, not the seed, so the same mutation, build cause or anomaly drawn by both seeds has the same id.

Nothing else differs: the draw order, the proofs and the files are `generate.generate`'s.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from orchestrator.devops_projects.fetch import StepFailed

PUBLIC_SEEDS = ("opsbench-dev-1",)
"""The published seeds of the dev split: a private seed equal to one of them is refused."""
MIN_SEED_CHARS = 12
"""A private seed shorter than this is refused: it could be guessed, and replacing it in the files it lands in
(a short string occurs by chance in code and text) would corrupt them."""
SPLIT_FILE = "split.json"
SPEC = "scenario.yaml"


class _Inst(Protocol):
    id: str
    family: str
    provenance: dict[str, Any]


class _Report(Protocol):
    @property
    def instances(self) -> Sequence[_Inst]: ...

    def summary(self) -> dict[str, Any]: ...


def seed_digest(seed: str) -> str:
    """What stands for a private seed wherever it would be written or printed."""
    return "sha256:" + hashlib.sha256(seed.encode()).hexdigest()[:16]


def check_private_seed(seed: str, source: str) -> None:
    """A private seed must be long enough and not a published one; else StepFailed naming `source` (the file)."""
    if seed in PUBLIC_SEEDS:
        raise StepFailed("-", "seed", f"{source}: the seed is the public dev split's ({seed}); a held-out split needs "
                                      "a private one (`head -c 32 /dev/urandom | base64 > FILE`)")
    if len(seed) < MIN_SEED_CHARS:
        raise StepFailed("-", "seed", f"{source}: a private seed needs at least {MIN_SEED_CHARS} characters, the first "
                                      f"line has {len(seed)} (`head -c 32 /dev/urandom | base64 > FILE`)")


def public_ids(folders: Sequence[Path]) -> set[str]:
    """The instance ids of the public split's output folders (each holds one scenario folder per instance); a
    folder that holds none is a StepFailed naming it (a typo would otherwise exclude nothing)."""
    ids: set[str] = set()
    for folder in folders:
        found = {d.name for d in folder.iterdir() if (d / SPEC).is_file()} if folder.is_dir() else set()
        if not found:
            raise StepFailed("-", "exclude", f"{folder}: no generated instance in it (a folder of `opsbench devops "
                                             "generate --out`, one scenario folder per instance)")
        ids |= found
    return ids


def redact(value: Any, seed: str) -> Any:
    """`value` (JSON-like) with the seed replaced by its digest in every string."""
    if isinstance(value, str):
        return value.replace(seed, seed_digest(seed))
    if isinstance(value, dict):
        return {k: redact(v, seed) for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v, seed) for v in value]
    return value


def scrub(out: Path, seed: str) -> list[str]:
    """Replace the seed by its digest in every text file under `out`; the files that still hold it afterwards
    (none unless a file is not UTF-8 text)."""
    leaks = []
    for path in sorted(p for p in out.rglob("*") if p.is_file()):
        data = path.read_bytes()
        if seed.encode() not in data:
            continue
        try:
            path.write_text(data.decode("utf-8").replace(seed, seed_digest(seed)), encoding="utf-8")
        except UnicodeDecodeError:
            leaks.append(str(path.relative_to(out)))
    return leaks


def generate_private(generate: Callable[..., Sequence[_Report]], project_ids: list[str], families: list[str],
                     seed: str, count: int, out: Path, *, exclude: Sequence[Path] = (),
                     say: Callable[[str], None] = lambda _m: None, **kwargs: Any) -> dict[str, Any]:
    """Run `generate` (`generate.generate`, or a fake) with the private `seed` into `out`, then take out what the
    public split holds and every trace of the seed. Returns the summaries (redacted, each with ``excluded``: the
    instances removed as public, and ``kept_private``), the seed's digest and the excluded ids; writes the same
    into ``out/split.json``."""
    public = public_ids(exclude)
    # The generator skips the public ids before screening or proving them (each a draw with its reason); what it
    # keeps is checked again below, pipelines included, so a generator without that skip still gives a clean split.
    reports = generate(project_ids, families, seed, count, out, say=lambda m: say(redact(m, seed)),
                       skip=frozenset(public), **kwargs)
    excluded: dict[str, str] = {}
    summaries = []
    for report in reports:
        gone = []
        for inst in report.instances:
            stages = [s for s in inst.provenance.get("stages", []) if isinstance(s, str)]
            why = "in the public split" if inst.id in public else \
                next((f"chains {s}, in the public split" for s in stages if s in public), "")
            if why:
                shutil.rmtree(out / inst.id, ignore_errors=True)
                excluded[inst.id] = why
                gone.append(inst.id)
        summary = redact(report.summary(), seed)
        summary["excluded"] = gone
        summary["kept_private"] = summary.get("kept", 0) - len(gone)
        summary["instances"] = [i for i in summary.get("instances", []) if i not in gone]
        summaries.append(summary)
    record = {"seed": seed_digest(seed), "public_folders": [str(p) for p in exclude], "public_ids": len(public),
              "excluded": excluded}
    (out / SPLIT_FILE).write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    leaks = scrub(out, seed)
    if leaks:
        raise StepFailed("-", "leak check", f"the private seed is still in {', '.join(leaks)} under {out} "
                                            "(not UTF-8 text): remove them before handing the split over")
    return {**record, "yields": summaries}
