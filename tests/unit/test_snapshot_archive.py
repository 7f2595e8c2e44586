"""Export and import of snapshot archives: round trip, and safe refusal of truncated or hostile archives."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest
from snapshot_fixtures import make_snapshot

from orchestrator.snapshots import archive
from orchestrator.snapshots import format as fmt


@pytest.mark.parametrize("suffix", [".tar.xz", ".tar.gz"])
def test_round_trip(tmp_path: Path, suffix: str) -> None:
    info = make_snapshot(tmp_path / "s")
    packed = archive.export(tmp_path / "s", tmp_path / f"out{suffix}")
    with tarfile.open(packed) as tar:
        names = tar.getnames()
        assert all(m.uid == 0 and m.uname == "" for m in tar.getmembers())
    assert names[0] == f"{info.snapshot_id}/snapshot.json"
    imported = archive.import_archive(packed, tmp_path / "corpus")
    assert imported.path == tmp_path / "corpus" / info.snapshot_id
    assert imported.files == info.files
    assert sorted(p.name for p in (tmp_path / "corpus").iterdir()) == [info.snapshot_id]


def test_export_refuses_a_damaged_snapshot(tmp_path: Path) -> None:
    make_snapshot(tmp_path / "s")
    (tmp_path / "s" / "alerts.json").write_text("[1]")
    with pytest.raises(fmt.SnapshotError):
        archive.export(tmp_path / "s", tmp_path / "out.tar.xz")
    assert list(tmp_path.glob("*.tar.xz")) == [] and list(tmp_path.glob(".out*")) == []


def test_truncated_archive_leaves_nothing(tmp_path: Path) -> None:
    make_snapshot(tmp_path / "s")
    packed = archive.export(tmp_path / "s", tmp_path / "out.tar.xz")
    data = packed.read_bytes()
    packed.write_bytes(data[: len(data) // 2])
    with pytest.raises(fmt.SnapshotError, match="truncated or corrupt") as caught:
        archive.import_archive(packed, tmp_path / "corpus")
    assert str(packed) in str(caught.value)
    assert list((tmp_path / "corpus").iterdir()) == []


def test_garbage_archive(tmp_path: Path) -> None:
    junk = tmp_path / "junk.tar.xz"
    junk.write_bytes(b"not an archive at all" * 10)
    with pytest.raises(fmt.SnapshotError, match="truncated or corrupt"):
        archive.import_archive(junk, tmp_path / "corpus")
    assert list((tmp_path / "corpus").iterdir()) == []


def _hostile(path: Path, member: tarfile.TarInfo, data: bytes = b"x") -> Path:
    with tarfile.open(path, "w:gz") as tar:
        if member.isfile():
            member.size = len(data)
            tar.addfile(member, io.BytesIO(data))
        else:
            tar.addfile(member)
    return path


@pytest.mark.parametrize(("name", "kind"), [
    ("/etc/evil", tarfile.REGTYPE),
    ("snap/../../evil", tarfile.REGTYPE),
    ("snap/link", tarfile.SYMTYPE),
    ("snap/hard", tarfile.LNKTYPE),
    ("snap/dev", tarfile.CHRTYPE),
])
def test_hostile_members_are_refused(tmp_path: Path, name: str, kind: bytes) -> None:
    member = tarfile.TarInfo(name)
    member.type = kind
    member.linkname = "/etc/passwd"
    packed = _hostile(tmp_path / "evil.tar.gz", member)
    with pytest.raises(fmt.SnapshotError, match="refused") as caught:
        archive.import_archive(packed, tmp_path / "corpus")
    assert caught.value.file == name
    assert list((tmp_path / "corpus").iterdir()) == []
    assert not (tmp_path / "evil").exists()


def test_tampered_file_inside_archive_is_refused(tmp_path: Path) -> None:
    info = make_snapshot(tmp_path / "s")
    (tmp_path / "s" / "alerts.json").write_text('[{"alertname": "ServiceD0wn"}]')
    packed = tmp_path / "t.tar.gz"
    with tarfile.open(packed, "w:gz") as tar:
        tar.add(tmp_path / "s", arcname=info.snapshot_id)
    with pytest.raises(fmt.SnapshotError, match="checksum mismatch"):
        archive.import_archive(packed, tmp_path / "corpus")
    assert list((tmp_path / "corpus").iterdir()) == []


def test_import_refuses_to_overwrite(tmp_path: Path) -> None:
    make_snapshot(tmp_path / "s")
    packed = archive.export(tmp_path / "s", tmp_path / "out.tar.xz")
    archive.import_archive(packed, tmp_path / "corpus")
    with pytest.raises(fmt.SnapshotError, match="already exists"):
        archive.import_archive(packed, tmp_path / "corpus")
