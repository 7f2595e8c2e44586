"""Scan a run's (or a whole OPSBENCH_HOME's) files and SQLite rows for secrets: known values, literally, and the
shapes of credentials whose value we do not know (private keys, kubeconfig credentials).

Used by the reliability tests after real runs and campaigns (docs/reliability.md). A finding names the file (or the
table and row), what was found and never the secret itself.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

# Credentials recognisable by their shape alone.
PATTERNS: dict[str, re.Pattern[bytes]] = {
    "private key": re.compile(rb"-----BEGIN [A-Z ]*PRIVATE KEY-----"),
    "kubeconfig credential": re.compile(rb"(client-key-data|client-certificate-data|certificate-authority-data)"
                                        rb"\s*[:=]\s*\S{16,}"),
    "kubeconfig token": re.compile(rb"\btoken:\s*[A-Za-z0-9._-]{20,}"),
    "AWS access key id": re.compile(rb"\bAKIA[0-9A-Z]{16}\b"),
}


@dataclass(frozen=True)
class Finding:
    where: str  # a file path, or `<db>:<table>#<rowid>`
    what: str  # the secret's name or the pattern's


def _scan_bytes(data: bytes, where: str, secrets: Mapping[str, str]) -> list[Finding]:
    found = [Finding(where, name) for name, value in secrets.items() if value and value.encode() in data]
    found += [Finding(where, name) for name, pattern in PATTERNS.items() if pattern.search(data)]
    return found


def scan_files(roots: Iterable[Path], secrets: Mapping[str, str], skip: Iterable[Path] = ()
               ) -> tuple[int, list[Finding]]:
    """(files scanned, findings) over every regular file under `roots` except those under `skip`."""
    skipped = [p.resolve() for p in skip]
    scanned, findings = 0, []
    for root in roots:
        files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink())
        for file in files:
            real = file.resolve()
            if any(real == s or s in real.parents for s in skipped):
                continue
            try:
                data = file.read_bytes()
            except OSError:
                continue
            scanned += 1
            findings += _scan_bytes(data, str(file), secrets)
    return scanned, findings


def scan_sqlite(db: Path, secrets: Mapping[str, str]) -> tuple[int, list[Finding]]:
    """(rows scanned, findings) over every row of every table of the SQLite database `db`."""
    rows, findings = 0, []
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        for table in tables:
            for row in conn.execute(f'SELECT rowid, * FROM "{table}"'):
                rows += 1
                data = "\x1f".join("" if v is None else v.decode(errors="replace") if isinstance(v, bytes) else str(v)
                                   for v in row[1:]).encode()
                findings += _scan_bytes(data, f"{db.name}:{table}#{row[0]}", secrets)
    return rows, findings


def run_secrets(run_dir: Path) -> dict[str, str]:
    """The secrets a deployment generated for its run, by name: every file under `<run dir>/secrets/` (the agent's
    token, the shop's Redis and PostgreSQL passwords). Teardown deletes them, so read them while the environment is
    up and scan for them after."""
    found: dict[str, str] = {}
    secrets_dir = run_dir / "secrets"
    for file in sorted(secrets_dir.iterdir()) if secrets_dir.is_dir() else []:
        try:
            value = file.read_text().strip() if file.is_file() else ""
        except (OSError, UnicodeDecodeError):
            continue
        if value:
            found[f"{run_dir.name}/secrets/{file.name}"] = value
    return found
