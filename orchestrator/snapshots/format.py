"""A snapshot's on-disk layout and its `snapshot.json`: written once at record time, verified before every use.

A snapshot is a directory recorded at handover of one live run (see docs/snapshots.md):

    <snapshot>/
      snapshot.json                 this module's index: ids, versions, frozen now, window, families, checksums
      manifest.json                 the manifest the agent got, without token, URLs or endpoints
      alerts.json                   Alertmanager's active alerts at handover, in get_alerts' item shape
      topology.json                 {"declared": visible topology, "measured": service calls of the window}
      services.json                 {"list_services": answer, "describe_service": {service: answer}}
      metrics/tsdb/<block>/...      a Prometheus TSDB snapshot (admin API), machinery series deleted
      telemetry/logs/*.jsonl        log records of the window, machinery left out (TelemetryStore layout)
      telemetry/traces/*.jsonl      spans of the window, machinery left out
      changes.json                  the change journal's entries of the window (deploys, releases, flag switches)
      browser/                      the browser capture served at handover (orchestrator.cuj's layout: cuj.json,
                                    per journey its report, screenshots, console, network, DOM, storage, spans)
      billing/<table>.parquet       the billing table a FinOps data environment served (all its rows, zstd)

Every file is listed in `snapshot.json` with its sha256 and size; `verify` refuses a snapshot whose files differ
from the list in any way (changed, missing, or an unlisted extra file: nothing unverified is ever served).

Compatibility rule: a snapshot is readable when its `format_version` is one this OpsBench reads
(`READABLE_FORMATS`) and it was recorded by an OpsBench of the same release series (same major version; while the
major version is 0, the same minor version too) that is not newer than this one. A newer recorder may have changed
how evidence is stripped or redacted, which an older replayer cannot know; a different series may have changed the
tools' answers, which would make replays incomparable with the live trial they stand for.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orchestrator
from orchestrator import paths
from orchestrator.errors import OpsBenchError

FORMAT_VERSION = 1
READABLE_FORMATS = frozenset({1})
INDEX = "snapshot.json"
MANIFEST = "manifest.json"
ALERTS = "alerts.json"
TOPOLOGY = "topology.json"
SERVICES = "services.json"
TSDB_DIR = "metrics/tsdb"
TELEMETRY_DIR = "telemetry"
CHANGES = "changes.json"
BROWSER_DIR = "browser"
BILLING_DIR = "billing"
"""The billing table the FinOps data environment served, as `billing/<table>.parquet` (zstd), exactly its rows."""
FAMILIES = ("alerts", "metrics", "logs", "traces", "topology", "services", "changes", "browser", "billing")
"""Evidence families a snapshot can hold. `services` is the recorded answers of list_services/describe_service."""

_HASH_CHUNK = 1 << 20
_VERSION = re.compile(r"^(\d+)\.(\d+)\.(\d+)")


class SnapshotError(OpsBenchError):
    """A snapshot that cannot be used: names the snapshot, the file and the problem."""

    def __init__(self, snapshot: Path | str, file: str, problem: str) -> None:
        self.snapshot = str(snapshot)
        self.file = file
        self.problem = problem
        super().__init__(f"snapshot {self.snapshot}: {file}: {problem}")


@dataclass(frozen=True)
class SnapshotInfo:
    """The parsed `snapshot.json` of a verified snapshot."""

    path: Path
    snapshot_id: str
    scenario_id: str
    spec_version: int
    opsbench_version: str
    frozen_now: float
    window_start: float
    families: tuple[str, ...]
    files: dict[str, dict[str, Any]]
    data: dict[str, Any]

    @property
    def tsdb_dir(self) -> Path:
        return self.path / TSDB_DIR

    @property
    def telemetry_dir(self) -> Path:
        return self.path / TELEMETRY_DIR


def new_snapshot_id(scenario_id: str, frozen_now: float) -> str:
    """`<scenario>-<UTC time of the frozen now>-<6 hex>`: sortable, readable, unique across repeats."""
    stamp = datetime.fromtimestamp(frozen_now, UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{scenario_id}-{stamp}-{uuid.uuid4().hex[:6]}"


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(_HASH_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _walk(root: Path) -> Iterable[Path]:
    """Every non-directory entry under `root` except the index, sorted; symlinks are returned, not followed."""
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames.sort()
        for name in sorted(filenames):
            path = Path(dirpath) / name
            if path.relative_to(root).as_posix() != INDEX:
                yield path
        for name in dirnames:
            if (Path(dirpath) / name).is_symlink():
                yield Path(dirpath) / name


def list_files(root: Path) -> dict[str, dict[str, Any]]:
    """sha256 and size of every file under `root` (relative POSIX paths), refusing links and special files."""
    files: dict[str, dict[str, Any]] = {}
    for path in _walk(root):
        rel = path.relative_to(root).as_posix()
        if path.is_symlink() or not path.is_file():
            raise SnapshotError(root, rel, "is a link or special file; a snapshot holds regular files only")
        files[rel] = {"sha256": sha256_file(path), "size": path.stat().st_size}
    return files


def write_index(
    root: Path,
    *,
    scenario_id: str,
    spec_version: int,
    frozen_now: float,
    window_start: float,
    families: Iterable[str],
    snapshot_id: str | None = None,
    extra: Mapping[str, Any] | None = None,
) -> SnapshotInfo:
    """Hash every file under `root` and write `root/snapshot.json` (last, so a snapshot with an index is whole)."""
    root = Path(root)
    unknown = sorted(set(families) - set(FAMILIES))
    if unknown:
        raise ValueError(f"unknown evidence families {unknown}; known: {', '.join(FAMILIES)}")
    if window_start > frozen_now:
        raise ValueError("the evidence window must start before the frozen now")
    data: dict[str, Any] = {
        "format_version": FORMAT_VERSION,
        "snapshot_id": snapshot_id or new_snapshot_id(scenario_id, frozen_now),
        "scenario": {"id": scenario_id, "version": int(spec_version)},
        "opsbench_version": orchestrator.__version__,
        "recorded_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "frozen_now": float(frozen_now),
        "window": {"start": float(window_start), "end": float(frozen_now)},
        "families": sorted(set(families), key=FAMILIES.index),
        **(dict(extra) if extra else {}),
        "files": list_files(root),
    }
    tmp = root / f".{INDEX}.tmp"
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, root / INDEX)
    return _info(root, data)


def _info(root: Path, data: dict[str, Any]) -> SnapshotInfo:
    return SnapshotInfo(
        path=root,
        snapshot_id=str(data["snapshot_id"]),
        scenario_id=str(data["scenario"]["id"]),
        spec_version=int(data["scenario"]["version"]),
        opsbench_version=str(data["opsbench_version"]),
        frozen_now=float(data["frozen_now"]),
        window_start=float(data["window"]["start"]),
        families=tuple(data["families"]),
        files=dict(data["files"]),
        data=data,
    )


def _parse_version(text: str) -> tuple[int, int, int] | None:
    match = _VERSION.match(text)
    return (int(match[1]), int(match[2]), int(match[3])) if match else None


def _series(version: tuple[int, int, int]) -> tuple[int, ...]:
    """The release series: the major version, and the minor one too while the major version is 0."""
    return version[:2] if version[0] == 0 else version[:1]


def compatible_recorder(recorded: str, current: str | None = None) -> str | None:
    """None when a snapshot recorded by OpsBench `recorded` may be replayed by `current` (default: this one);
    else why not (the rule is in the module docstring)."""
    current = current or orchestrator.__version__
    rec, cur = _parse_version(recorded), _parse_version(current)
    if rec is None:
        return f"recorded by OpsBench {recorded!r}, not a version number"
    assert cur is not None, current
    if _series(rec) != _series(cur):
        return (f"recorded by OpsBench {recorded}, another release series than this OpsBench {current}: "
                "record it again with this version")
    if rec > cur:
        return f"recorded by OpsBench {recorded}, newer than this OpsBench {current}: upgrade to replay it"
    return None


def _field(root: Path, data: Mapping[str, Any], key: str, kind: type | tuple[type, ...]) -> Any:
    value = data.get(key)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise SnapshotError(root, INDEX, f"field {key!r} is missing or not a {getattr(kind, '__name__', kind)}")
    return value


def read_index(root: Path) -> dict[str, Any]:
    """`snapshot.json` parsed and its schema checked (no file checks)."""
    root = Path(root)
    if not root.is_dir():
        raise SnapshotError(root, ".", "no such snapshot directory")
    try:
        data = json.loads((root / INDEX).read_text())
    except FileNotFoundError:
        raise SnapshotError(root, INDEX, "missing: not a snapshot, or its recording did not finish") from None
    except (OSError, ValueError) as exc:  # UnicodeDecodeError is a ValueError
        raise SnapshotError(root, INDEX, f"unreadable: {exc}") from None
    except RecursionError:
        raise SnapshotError(root, INDEX, "unreadable: nested too deeply (thousands of levels)") from None
    if not isinstance(data, dict):
        raise SnapshotError(root, INDEX, "not a JSON object")
    version = data.get("format_version")
    if version not in READABLE_FORMATS:
        raise SnapshotError(root, INDEX, f"unknown format version {version!r}; this OpsBench reads "
                            f"{', '.join(map(str, sorted(READABLE_FORMATS)))}")
    _field(root, data, "snapshot_id", str)
    _field(root, data, "opsbench_version", str)
    _field(root, data, "frozen_now", (int, float))
    scenario = _field(root, data, "scenario", dict)
    if not isinstance(scenario.get("id"), str) or not isinstance(scenario.get("version"), int):
        raise SnapshotError(root, INDEX, "field 'scenario' needs a string 'id' and an integer 'version'")
    window = _field(root, data, "window", dict)
    if not all(isinstance(window.get(k), (int, float)) for k in ("start", "end")):
        raise SnapshotError(root, INDEX, "field 'window' needs numeric 'start' and 'end'")
    families = _field(root, data, "families", list)
    if any(f not in FAMILIES for f in families):
        raise SnapshotError(root, INDEX, f"field 'families' holds unknown families; known: {', '.join(FAMILIES)}")
    files = _field(root, data, "files", dict)
    for rel, entry in files.items():
        if (not isinstance(entry, dict) or not isinstance(entry.get("sha256"), str)
                or not isinstance(entry.get("size"), int)):
            raise SnapshotError(root, INDEX, f"files[{rel!r}] needs a 'sha256' string and an integer 'size'")
        if rel.startswith("/") or ".." in Path(rel).parts:
            raise SnapshotError(root, INDEX, f"files[{rel!r}] points outside the snapshot")
    return data


def _check_scenario(root: Path, scenario_id: str, version: int, specs_dir: Path | None = None) -> None:
    """The snapshot's scenario exists at the recorded version: in the catalog, or in `specs_dir` (a built
    corpus's `scenarios/`, whose generated instances the catalog does not hold)."""
    from orchestrator.spec import SPEC_FILENAME, load_scenario
    from orchestrator.yamlfile import read_yaml

    spec_file = (specs_dir or paths.SPECS_DIR) / scenario_id / SPEC_FILENAME
    registry = read_yaml(paths.ID_REGISTRY) if paths.ID_REGISTRY.is_file() and specs_dir is None else {}
    entry = (registry.get("ids") or {}).get(scenario_id) if isinstance(registry, dict) else None
    if not spec_file.is_file() or (isinstance(entry, dict) and entry.get("retired")):
        raise SnapshotError(root, INDEX, f"scenario {scenario_id!r} no longer exists in this OpsBench "
                            "(no spec, or retired): its ground truth cannot score a replay")
    current = load_scenario(spec_file).version
    if current != version:
        raise SnapshotError(root, INDEX, f"recorded from version {version} of scenario {scenario_id!r}, which is "
                            f"now at version {current}: record it again")


def verify(root: Path, *, check_scenario: bool = True, specs_dir: Path | None = None) -> SnapshotInfo:
    """Check a snapshot before use: index schema, format and recorder version, the scenario (in the catalog, or
    in `specs_dir`), then every file's size and sha256, and that no file is missing or unlisted. Raises
    `SnapshotError` at the first problem."""
    root = Path(root)
    data = read_index(root)
    why = compatible_recorder(data["opsbench_version"])
    if why:
        raise SnapshotError(root, INDEX, why)
    if check_scenario:
        _check_scenario(root, data["scenario"]["id"], data["scenario"]["version"], specs_dir)
    listed: dict[str, dict[str, Any]] = data["files"]
    present = {p.relative_to(root).as_posix(): p for p in _walk(root)}
    for rel in sorted(listed):
        path = present.get(rel)
        if path is None:
            raise SnapshotError(root, rel, "missing (listed in snapshot.json)")
        if path.is_symlink() or not path.is_file():
            raise SnapshotError(root, rel, "is a link or special file; a snapshot holds regular files only")
        size = path.stat().st_size
        if size != listed[rel]["size"]:
            raise SnapshotError(root, rel, f"size {size} bytes, recorded {listed[rel]['size']}: the file changed")
        if sha256_file(path) != listed[rel]["sha256"]:
            raise SnapshotError(root, rel, "checksum mismatch: the file changed since it was recorded")
    extra = sorted(set(present) - set(listed))
    if extra:
        raise SnapshotError(root, extra[0], "not listed in snapshot.json (an unverified file is never served)")
    return _info(root, data)
