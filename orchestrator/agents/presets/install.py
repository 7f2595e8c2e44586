"""``make agents``: install the presets' CLIs, at their pinned versions, under ``.agents/`` (npm, project-local).

Not part of ``make setup``: the CLIs are large (hundreds of MB of native binaries) and only preset runs need them.
Prints what it installed, how long it took and how big the prefix is; exits non-zero naming the step that failed.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

from orchestrator.agents.presets import PREFIX, PRESETS


def size(path: Path) -> int:
    """Bytes under ``path``, as ``du`` counts them: hard links once (the Claude Code package links its binary),
    symlinks not followed."""
    seen: dict[tuple[int, int], int] = {}
    for p in path.rglob("*"):
        st = p.lstat()
        if p.is_file() and not p.is_symlink():
            seen[st.st_dev, st.st_ino] = st.st_size
    return sum(seen.values())


def main() -> int:
    npm = shutil.which("npm")
    if npm is None:
        print("make agents: npm is not installed (Debian: apt-get install nodejs npm)", file=sys.stderr)
        return 2
    PREFIX.mkdir(parents=True, exist_ok=True)
    specs = [f"{p.package}@{p.version}" for p in PRESETS.values()]
    start = time.monotonic()
    done = subprocess.run([npm, "install", "--prefix", str(PREFIX), "--no-audit", "--no-fund", "--save-exact",
                           "--loglevel=error", *specs], check=False)
    elapsed = time.monotonic() - start
    if done.returncode != 0:
        print(f"make agents: npm install {' '.join(specs)} failed (exit {done.returncode})", file=sys.stderr)
        return 1
    missing = [p.name for p in PRESETS.values() if p.installed_version() != p.version]
    if missing:
        print(f"make agents: installed, but not at the pinned version: {', '.join(missing)}", file=sys.stderr)
        return 1
    for p in PRESETS.values():
        version = subprocess.run([str(p.path), "--version"], capture_output=True, text=True, check=False,
                                 timeout=60).stdout.strip()
        print(f"{p.name}: {p.package}@{p.version} -> {p.path} ({version or 'no --version output'})")
    print(f"installed in {elapsed:.0f} s; {PREFIX} holds {size(PREFIX) / 1e6:.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
