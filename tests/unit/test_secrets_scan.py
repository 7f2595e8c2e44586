"""The secrets scanner finds what it is meant to find, so a scan that finds nothing after a campaign means something."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from orchestrator.secrets_scan import run_secrets, scan_files, scan_sqlite

SECRETS = {"agent token": "tok-0123456789abcdef0123456789", "redis password": "R3d1sPassw0rdValue123456"}


def test_files_known_values_and_shapes(tmp_path: Path) -> None:
    (tmp_path / "steps" / "01-deploy").mkdir(parents=True)
    (tmp_path / "clean.json").write_text('{"ok": true}')
    (tmp_path / "steps" / "01-deploy" / "stdout").write_text(f"... {SECRETS['redis password']} ...")
    (tmp_path / "kubeconfig").write_text("users:\n- user:\n    client-key-data: LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVk=\n")
    (tmp_path / "key.pem").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nabc\n")
    (tmp_path / "workspace").mkdir()
    (tmp_path / "workspace" / "token.txt").write_text(SECRETS["agent token"])
    scanned, findings = scan_files([tmp_path], SECRETS, skip=[tmp_path / "workspace"])
    assert scanned == 4
    assert {(Path(f.where).name, f.what) for f in findings} == {
        ("stdout", "redis password"), ("kubeconfig", "kubeconfig credential"), ("key.pem", "private key")}
    assert all(SECRETS["redis password"] not in f.where + f.what for f in findings)  # never the value itself


def test_sqlite_rows(tmp_path: Path) -> None:
    db = tmp_path / "opsbench.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE runs (id TEXT, outcome TEXT, blob BLOB)")
        conn.execute("INSERT INTO runs VALUES ('r1', '{}', NULL)")
        conn.execute("INSERT INTO runs VALUES ('r2', ?, NULL)", (f'{{"reason": "{SECRETS["agent token"]}"}}',))
        conn.execute("INSERT INTO runs VALUES ('r3', NULL, ?)", (SECRETS["redis password"].encode(),))
    rows, findings = scan_sqlite(db, SECRETS)
    assert rows == 3
    assert {(f.where, f.what) for f in findings} == {("opsbench.db:runs#2", "agent token"),
                                                     ("opsbench.db:runs#3", "redis password")}


def test_run_secrets_reads_every_generated_secret(tmp_path: Path) -> None:
    run_dir = tmp_path / "r1"
    (run_dir / "secrets").mkdir(parents=True)
    (run_dir / "secrets" / "redis_password").write_text(SECRETS["redis password"] + "\n")
    (run_dir / "secrets" / "postgres_password").write_text("Pg0123456789abcdefPg0123")
    (run_dir / "secrets" / "empty").write_text("")
    assert run_secrets(run_dir) == {"r1/secrets/redis_password": SECRETS["redis password"],
                                    "r1/secrets/postgres_password": "Pg0123456789abcdefPg0123"}
    assert run_secrets(tmp_path / "gone") == {}  # after teardown: nothing to read
