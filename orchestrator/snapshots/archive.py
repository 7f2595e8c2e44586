"""One file per snapshot, to share: a tar archive (gzip by default) holding the snapshot directory under its id.

Import never trusts the archive: only regular files and directories below one top-level directory are accepted
(no absolute paths, no `..`, no links, no devices), it extracts into a temporary directory beside the destination,
verifies the result (`format.verify`) and only then renames it into place, so a truncated, corrupt or tampered
archive gives one `SnapshotError` naming the archive and leaves nothing behind. The compressed stream is read
whole before anything else (`check_stream`): damage past the tar end marker (a cut end, the gzip trailer) counts.
"""

from __future__ import annotations

import gzip
import lzma
import os
import shutil
import tarfile
import tempfile
import zlib
from pathlib import Path, PurePosixPath
from typing import Any, Literal, cast

from .format import INDEX, SnapshotError, SnapshotInfo, read_index, verify

Compression = Literal["xz", "gz"]
DEFAULT_COMPRESSION: Compression = "gz"
"""gzip level 6. Measured on a shop-cart-down snapshot of 9.3 MB (2 busy cores): gzip-6 0.94 MB in 0.9 s,
xz-1 0.84 MB in 1.5 s, xz-6 0.61 MB in 9.8 s; import and verify take 0.4-0.7 s for each. Every choice is far
below the 5 MB target, so the fastest to write and most widely readable wins; xz stays available by suffix."""
SUFFIXES: dict[str, Compression] = {".tar.xz": "xz", ".txz": "xz", ".tar.gz": "gz", ".tgz": "gz"}


def _compression_of(archive: Path) -> Compression | None:
    name = archive.name.lower()
    return next((c for suffix, c in SUFFIXES.items() if name.endswith(suffix)), None)


def export(snapshot_dir: Path, archive: Path, compression: Compression | None = None, *, preset: int = 6,
           check_scenario: bool = True) -> Path:
    """Verify `snapshot_dir`, then write it to `archive` (compression from the suffix, else `compression`, else
    gzip) with its files in sorted order and neutral owners, written to a temporary file and renamed at the end."""
    info = verify(snapshot_dir, check_scenario=check_scenario)
    archive = Path(archive)
    kind = _compression_of(archive) or compression or DEFAULT_COMPRESSION
    top = PurePosixPath(info.snapshot_id)

    def neutral(member: tarfile.TarInfo) -> tarfile.TarInfo:
        member.uid = member.gid = 0
        member.uname = member.gname = ""
        return member

    archive.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{archive.name}.", dir=archive.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        with _writer(tmp, kind, preset) as tar:
            for rel in [INDEX, *sorted(info.files)]:
                tar.add(info.path / rel, arcname=str(top / rel), recursive=False, filter=neutral)
        umask = os.umask(0)
        os.umask(umask)
        tmp.chmod(0o666 & ~umask)  # an archive to share: the usual mode, not mkstemp's private 0600
        os.replace(tmp, archive)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return archive


def _writer(path: Path, kind: Compression, level: int) -> tarfile.TarFile:
    if kind == "xz":
        return tarfile.open(path, "w:xz", preset=cast(Any, level))
    return tarfile.open(path, "w:gz", compresslevel=level)


def _safe_name(archive: Path, member: tarfile.TarInfo) -> PurePosixPath:
    name = PurePosixPath(member.name)
    if name.is_absolute() or ".." in name.parts or not name.parts:
        raise SnapshotError(archive, member.name, "an absolute path or `..` in the archive: refused")
    if not (member.isfile() or member.isdir()):
        raise SnapshotError(archive, member.name, "a link or special file in the archive: refused")
    return name


def import_archive(archive: Path, dest_parent: Path, *, check_scenario: bool = True,
                   specs_dir: Path | None = None) -> SnapshotInfo:
    """Extract `archive` into `dest_parent/<snapshot id>` and verify it; returns the verified snapshot.
    Refuses to overwrite an existing snapshot directory."""
    archive, dest_parent = Path(archive), Path(dest_parent)
    if not archive.is_file():
        raise SnapshotError(archive, ".", "no such archive")
    try:
        dest_parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SnapshotError(archive, ".", f"cannot extract into {dest_parent}: {exc.strerror}") from None
    check_stream(archive)
    staging = Path(tempfile.mkdtemp(prefix=".import-", dir=dest_parent))
    try:
        top = _extract(archive, staging)
        target = dest_parent / top
        if target.exists():
            raise SnapshotError(archive, top, f"{target} already exists: remove it or import elsewhere")
        try:
            verify(staging / top, check_scenario=check_scenario, specs_dir=specs_dir)
        except SnapshotError as exc:  # name the archive the user gave, not the staging folder
            raise SnapshotError(archive, f"{top}/{exc.file}" if exc.file != "." else top, exc.problem) from None
        os.rename(staging / top, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return verify(target, check_scenario=False)


_MAGIC = {b"\x1f\x8b": "gz", b"\xfd7zXZ\x00": "xz"}
_CHUNK = 1 << 20


def check_stream(archive: Path) -> None:
    """Read the whole compressed stream once, so damage anywhere is refused before anything is extracted: a cut
    end, a flipped byte in the gzip trailer (CRC-32 and length) or the xz index and checks, trailing garbage.
    Reading tar members alone stops at the tar end marker and never reaches the trailer."""
    try:
        with archive.open("rb") as raw:
            head = raw.read(6)
    except OSError as exc:
        raise SnapshotError(archive, ".", f"cannot read the archive: {exc.strerror}") from None
    kind = next((k for magic, k in _MAGIC.items() if head.startswith(magic)), None)
    if kind is None:
        raise SnapshotError(archive, ".", "truncated or corrupt archive: not gzip or xz compressed (a snapshot "
                            "archive is a .tar.gz or .tar.xz written by `opsbench snapshot export`)")
    try:
        with (gzip.open(archive, "rb") if kind == "gz" else lzma.open(archive, "rb")) as stream:
            while stream.read(_CHUNK):
                pass
    except (EOFError, OSError, lzma.LZMAError, zlib.error) as exc:
        raise SnapshotError(archive, ".", f"truncated or corrupt archive ({kind}: {exc or type(exc).__name__}): "
                            "export or download it again") from None


def read_archive_index(archive: Path) -> dict[str, Any]:
    """The archive's `<id>/snapshot.json`, parsed and schema-checked (`format.read_index`) without extracting the
    rest: what `snapshot list` shows for an archive. The stream is checked whole first; checksums are not."""
    check_stream(archive)
    with tempfile.TemporaryDirectory(prefix="opsbench-index-") as tmp:
        try:
            with tarfile.open(archive, "r:*") as tar:
                member = next((m for m in tar if m.isfile() and len(PurePosixPath(m.name).parts) == 2
                               and PurePosixPath(m.name).name == INDEX), None)
                source = tar.extractfile(member) if member is not None else None
                if member is None or source is None:
                    raise SnapshotError(archive, INDEX, "missing from the archive: not a snapshot archive")
                top = _safe_name(archive, member).parts[0]
                (Path(tmp) / top).mkdir()
                with source, (Path(tmp) / top / INDEX).open("xb") as out:
                    shutil.copyfileobj(source, out)
        except SnapshotError:
            raise
        except (tarfile.TarError, EOFError, lzma.LZMAError, zlib.error, OSError) as exc:
            raise SnapshotError(archive, ".", f"truncated or corrupt archive ({type(exc).__name__}: {exc})") \
                from None
        try:
            return read_index(Path(tmp) / top)
        except SnapshotError as exc:
            raise SnapshotError(archive, f"{top}/{exc.file}", exc.problem) from None


def _extract(archive: Path, staging: Path) -> str:
    """Extract every member into `staging` after checking it; returns the one top-level directory's name."""
    tops: set[str] = set()
    try:
        with tarfile.open(archive, "r:*") as tar:
            for member in tar:
                name = _safe_name(archive, member)
                tops.add(name.parts[0])
                if len(tops) > 1:
                    raise SnapshotError(archive, member.name, "more than one top-level directory: not a snapshot "
                                        "archive")
                target = staging.joinpath(*name.parts)
                if member.isdir():
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                source = tar.extractfile(member)
                assert source is not None
                with source, target.open("xb") as out:
                    shutil.copyfileobj(source, out)
    except SnapshotError:
        raise
    except (tarfile.TarError, EOFError, lzma.LZMAError, zlib.error, OSError) as exc:
        raise SnapshotError(archive, ".", f"truncated or corrupt archive ({type(exc).__name__}: {exc})") from None
    if not tops:
        raise SnapshotError(archive, ".", "an empty archive")
    (top,) = tops
    if not (staging / top / INDEX).is_file():
        raise SnapshotError(archive, f"{top}/{INDEX}", "missing from the archive: not a snapshot archive")
    return top
