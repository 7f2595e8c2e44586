"""A corpus of snapshots: a directory of snapshot directories, and what `opsbench snapshot` does with it.

The default corpus is `<state dir>/snapshots`: `opsbench snapshot record` writes there and `import` extracts
there. Each function is the library behind one `opsbench snapshot` command; every problem with a snapshot or an
archive is one `SnapshotError` naming the snapshot, the file and the problem, and leaves nothing behind.
"""

from __future__ import annotations

import dataclasses
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator import paths

from . import archive
from . import format as fmt


def default_corpus() -> Path:
    """`<state dir>/snapshots` (created on first use)."""
    return paths.state_folder(paths.state_dir() / "snapshots")


def is_archive(path: Path) -> bool:
    """True for a file whose name ends in one of the archive suffixes (`.tar.gz`, `.tgz`, `.tar.xz`, `.txz`)."""
    name = path.name.lower()
    return any(name.endswith(suffix) for suffix in archive.SUFFIXES)


def export_snapshot(snapshot_dir: Path, out: Path | None = None) -> Path:
    """Verify `snapshot_dir` and pack it into one archive: `out`, else `./<snapshot id>.tar.gz`."""
    snapshot_dir = Path(snapshot_dir)
    if out is None:
        out = Path.cwd() / f"{fmt.read_index(snapshot_dir)['snapshot_id']}.tar.gz"
    elif not is_archive(out):
        raise fmt.SnapshotError(snapshot_dir, str(out), "the archive's name must end in "
                                f"{', '.join(archive.SUFFIXES)} (it says how it is compressed)")
    return archive.export(snapshot_dir, Path(out))


def import_snapshot(archive_file: Path, corpus: Path | None = None) -> fmt.SnapshotInfo:
    """Extract and verify `archive_file` into `corpus` (default: the state dir's) as `<corpus>/<snapshot id>`."""
    return archive.import_archive(Path(archive_file), corpus or default_corpus())


def verify_path(path: Path) -> fmt.SnapshotInfo:
    """Verify a snapshot directory, or an archive (extracted into a private temporary directory, verified, and
    deleted again): checksums, schema, format version, recorder version, the scenario still existing. The replay
    with the baseline agent that `snapshot verify` adds is `harness.replay.replay_baseline`."""
    path = Path(path)
    if path.is_dir():
        return fmt.verify(path)
    if not path.exists():
        raise fmt.SnapshotError(path, ".", "no such snapshot directory or archive")
    if not is_archive(path):
        raise fmt.SnapshotError(path, ".", "neither a snapshot directory nor an archive "
                                f"({', '.join(archive.SUFFIXES)})")
    with tempfile.TemporaryDirectory(prefix="opsbench-verify-") as tmp:
        info = archive.import_archive(path, Path(tmp))
        # The extracted copy is gone once this returns: report the archive, not the temporary directory.
        return dataclasses.replace(info, path=path)


@dataclass(frozen=True)
class CorpusEntry:
    """One directory of a corpus, as `snapshot list` shows it (read from its index, checksums not checked)."""

    path: str
    snapshot_id: str = ""
    scenario: str = ""
    frozen_now: float | None = None
    window_s: float | None = None
    families: tuple[str, ...] = ()
    files: int = 0
    bytes: int = 0
    problem: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "families": list(self.families)}


def list_corpus(corpus: Path | None = None) -> list[CorpusEntry]:
    """Every snapshot directory and archive of `corpus` (default: the state dir's), sorted by id; one that is not a
    readable snapshot is listed with its problem instead of stopping the listing. An archive's compressed stream is
    read whole (a damaged one is listed as such), its index parsed without extracting the rest. Hidden entries
    (imports or recordings under way) are left out."""
    corpus = Path(corpus) if corpus is not None else default_corpus()
    if not corpus.is_dir():
        raise fmt.SnapshotError(corpus, ".", "no such corpus directory" if not corpus.exists() else
                                "not a directory: give the folder that holds snapshot directories or archives")
    entries: list[CorpusEntry] = []
    for child in sorted(p for p in corpus.iterdir() if not p.name.startswith(".")
                        and (p.is_dir() or (p.is_file() and is_archive(p)))):
        try:
            data = fmt.read_index(child) if child.is_dir() else archive.read_archive_index(child)
        except fmt.SnapshotError as exc:
            entries.append(CorpusEntry(path=str(child), problem=f"{exc.file}: {exc.problem}"))
            continue
        files = data["files"]
        entries.append(CorpusEntry(
            path=str(child), snapshot_id=data["snapshot_id"], scenario=data["scenario"]["id"],
            frozen_now=float(data["frozen_now"]),
            window_s=round(float(data["window"]["end"]) - float(data["window"]["start"]), 1),
            families=tuple(data["families"]), files=len(files),
            bytes=sum(int(f["size"]) for f in files.values())))
    return sorted(entries, key=lambda e: (e.snapshot_id or "~", e.path))


def render_corpus(entries: list[CorpusEntry]) -> str:
    """The table `snapshot list` prints."""
    if not entries:
        return "no snapshots"
    head = ("SNAPSHOT", "SCENARIO", "WINDOW s", "MB", "FAMILIES")
    rows = [(e.snapshot_id, e.scenario, f"{e.window_s:.0f}", f"{e.bytes / 1e6:.1f}", ",".join(e.families))
            if not e.problem else (Path(e.path).name, "-", "-", "-", f"unreadable: {e.problem}") for e in entries]
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in [head, *rows])
