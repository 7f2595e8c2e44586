"""Damaged snapshot archives are refused whatever part is damaged, and named as the user gave them; `snapshot list`
reads archives as well as directories (the committed sample corpus is archives only)."""

from __future__ import annotations

import gzip
import io
import json
import shutil
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from orchestrator.cli import main
from orchestrator.snapshots import corpus
from orchestrator.snapshots import format as fmt

SAMPLES = Path(__file__).resolve().parents[1] / "data" / "snapshots"
SAMPLE = sorted(SAMPLES.glob("*.tar.gz"))[0]


def _cut_end(data: bytes) -> bytes:
    return data[:-4]  # inside the gzip trailer: the tar end marker is still readable


def _flip_trailer(data: bytes) -> bytes:
    damaged = bytearray(data)
    damaged[-6] ^= 0xFF  # a byte of the CRC-32
    return bytes(damaged)


def _flip_middle(data: bytes) -> bytes:
    damaged = bytearray(data)
    damaged[len(data) // 2] ^= 0xFF
    return bytes(damaged)


def _corrupt_member(data: bytes) -> bytes:
    """A member's bytes changed and the stream compressed again: gzip and tar are sound, the checksum is not."""
    raw = bytearray(gzip.decompress(data))
    with tarfile.open(fileobj=io.BytesIO(bytes(raw))) as tar:
        member = next(m for m in tar.getmembers() if m.isfile() and m.size > 0 and not m.name.endswith(fmt.INDEX))
    raw[member.offset_data] ^= 0xFF
    return gzip.compress(bytes(raw))


DAMAGE: dict[str, Callable[[bytes], bytes]] = {
    "last bytes cut": _cut_end, "gzip trailer flipped": _flip_trailer, "middle byte flipped": _flip_middle,
    "member corrupted": _corrupt_member}


@pytest.fixture(scope="module")
def sample_bytes() -> bytes:
    return SAMPLE.read_bytes()


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("OPSBENCH_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_archive_is_refused_by_verify_and_named_as_given(tmp_path: Path, sample_bytes: bytes,
                                                                    damage: str, home: Path) -> None:
    damaged = tmp_path / SAMPLE.name
    damaged.write_bytes(DAMAGE[damage](sample_bytes))
    with pytest.raises(fmt.SnapshotError) as caught:
        corpus.verify_path(damaged)
    assert caught.value.snapshot == str(damaged)
    assert "opsbench-verify-" not in str(caught.value) and ".import-" not in str(caught.value)
    got = CliRunner().invoke(main, ["snapshot", "verify", "--no-replay", str(damaged)])
    assert got.exit_code == 2 and "Traceback" not in got.output
    assert str(damaged) in got.output and "ok " not in got.output


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_archive_is_refused_by_import_leaving_nothing(tmp_path: Path, sample_bytes: bytes,
                                                                 damage: str, home: Path) -> None:
    damaged = tmp_path / SAMPLE.name
    damaged.write_bytes(DAMAGE[damage](sample_bytes))
    into = tmp_path / "corpus"
    got = CliRunner().invoke(main, ["snapshot", "import", str(damaged), "--into", str(into)])
    assert got.exit_code == 2 and "Traceback" not in got.output, got.output
    assert str(damaged) in got.output and str(into / ".import-") not in got.output
    assert list(into.iterdir()) == []


def test_the_intact_sample_still_verifies(sample_bytes: bytes, tmp_path: Path, home: Path) -> None:
    copy = tmp_path / SAMPLE.name
    copy.write_bytes(sample_bytes)
    assert corpus.verify_path(copy).path == copy


def test_snapshot_list_reads_the_sample_corpus_archives(home: Path) -> None:
    entries = corpus.list_corpus(SAMPLES)
    assert [e.path for e in entries] == [str(p) for p in sorted(SAMPLES.glob("*.tar.gz"))]
    assert all(e.snapshot_id and not e.problem and e.files > 0 for e in entries)
    got = CliRunner().invoke(main, ["snapshot", "list", str(SAMPLES)])
    assert got.exit_code == 0 and "no snapshots" not in got.output
    assert all(e.snapshot_id in got.output for e in entries)


def test_snapshot_list_names_a_damaged_archive_beside_good_ones(tmp_path: Path, sample_bytes: bytes,
                                                                home: Path) -> None:
    shutil.copy(SAMPLE, tmp_path / SAMPLE.name)
    (tmp_path / "cut.tar.gz").write_bytes(_cut_end(sample_bytes))
    (tmp_path / "notes.txt").write_text("not a snapshot")
    got = CliRunner().invoke(main, ["snapshot", "list", "--json", str(tmp_path)])
    assert got.exit_code == 0, got.output
    rows = {Path(r["path"]).name: r for r in json.loads(got.output)}
    assert set(rows) == {SAMPLE.name, "cut.tar.gz"}
    assert rows[SAMPLE.name]["problem"] == "" and "truncated or corrupt" in rows["cut.tar.gz"]["problem"]


def test_snapshot_list_of_a_file_is_one_error(tmp_path: Path, home: Path) -> None:
    got = CliRunner().invoke(main, ["snapshot", "list", "--json", str(SAMPLE)])
    assert got.exit_code == 2 and "Traceback" not in got.output
    error = json.loads(got.stdout)
    assert str(SAMPLE) in error["error"] and "not a directory" in error["error"]
