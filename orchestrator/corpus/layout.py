"""A built corpus on disk: the layout `opsbench corpus build` writes and every reader of a corpus shares.

```
<corpus>/
  corpus.json            the index (CORPUS_INDEX): instances, their snapshots, levels, sizes, the checksum
  snapshots/<id>/...     one snapshot per instance: what an agent is given (`campaign --snapshots <corpus>`)
  scenarios/<id>/        each instance's spec and ground truth: what the scorer reads, never an agent
  build.json             the owner's record (BUILD_RECORD): template, draw and verification of each instance
  card.md, card.json     the dataset card (`opsbench corpus card`)
```

Neither the index nor a snapshot names a template, a seed or a mechanism: those are the owner's, in build.json,
and a corpus handed to someone else to run agents on can leave build.json out (the card says what it summarised).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from orchestrator.errors import OpsBenchError
from orchestrator.jsonfile import read_json

FORMAT_VERSION = 1
CORPUS_INDEX = "corpus.json"
BUILD_RECORD = "build.json"
SNAPSHOTS = "snapshots"
SCENARIOS = "scenarios"
CARD_MD = "card.md"
CARD_JSON = "card.json"
SPEC_FILE = "scenario.yaml"


def corpus_root(path: Path) -> Path | None:
    """The built corpus `path` is or lies in (the corpus itself, its snapshots folder, or a snapshot in it): a
    folder with an index, or with a build record and instance specs (a build still under way replays too)."""
    for candidate in (path, path.parent, path.parent.parent):
        if (candidate / CORPUS_INDEX).is_file() or ((candidate / BUILD_RECORD).is_file()
                                                     and (candidate / SCENARIOS).is_dir()):
            return candidate
    return None


def specs_dir(snapshot_path: Path) -> Path | None:
    """The instance specs' folder of the built corpus that holds `snapshot_path`, or None outside one."""
    root = corpus_root(snapshot_path.resolve())
    return root / SCENARIOS if root is not None else None


def instance_spec(snapshot_path: Path, scenario_id: str) -> Path | None:
    """The spec of `scenario_id` in the corpus that holds `snapshot_path`, or None outside a built corpus."""
    root = corpus_root(snapshot_path.resolve())
    if root is None:
        return None
    spec = root / SCENARIOS / scenario_id / SPEC_FILE
    return spec if spec.is_file() else None


def read_index(root: Path) -> dict[str, Any]:
    """The corpus index of `root`, checked for the fields readers use; OpsBenchError naming the file otherwise."""
    file = root / CORPUS_INDEX
    if not file.is_file():
        raise OpsBenchError(f"{root}: not a built corpus (no {CORPUS_INDEX}); build one with `opsbench corpus build`")
    data = read_json(file)
    if not isinstance(data, dict):
        raise OpsBenchError(f"{file}: not a JSON object: not a corpus index OpsBench wrote")
    if data.get("format_version") != FORMAT_VERSION:
        raise OpsBenchError(f"{file}: format_version {data.get('format_version')!r} is not one this OpsBench reads "
                            f"({FORMAT_VERSION})")
    if not isinstance(data.get("instances"), list):
        raise OpsBenchError(f"{file}: instances: missing or not a list")
    return data


def read_build(root: Path) -> dict[str, Any] | None:
    """The owner's build record of `root`, or None when the corpus was handed over without it."""
    file = root / BUILD_RECORD
    if not file.is_file():
        return None
    data = read_json(file)
    if not isinstance(data, dict) or not isinstance(data.get("instances"), list):
        raise OpsBenchError(f"{file}: not a build record OpsBench wrote (a JSON object with instances)")
    return data


def checksum(root: Path) -> str:
    """sha256 over every file of the corpus's snapshots and scenarios (relative path and content, sorted): two
    corpora with the same checksum hand agents the same evidence and score them against the same truth."""
    digest = hashlib.sha256()
    for folder in (SNAPSHOTS, SCENARIOS):
        base = root / folder
        for file in sorted(p for p in base.rglob("*") if p.is_file() and not p.is_symlink()) if base.is_dir() \
                else []:
            digest.update(file.relative_to(root).as_posix().encode() + b"\0")
            digest.update(hashlib.sha256(file.read_bytes()).digest())
    return digest.hexdigest()


def write_json(file: Path, data: dict[str, Any]) -> None:
    """Written whole to a temporary file, then renamed: a reader never sees half an index."""
    tmp = file.with_name(f".{file.name}.tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    tmp.replace(file)
