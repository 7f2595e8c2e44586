#!/usr/bin/python3
"""A background service of the workspace: the same program runs under every service name.

It reads its profile (one JSON line) from stdin at start-up, closes stdin and does its periodic work. A steady
profile stays light and nearly idle: every few seconds it reads a little of /proc or /workspace and appends a line
to its own log (kept small). Other profiles reach a given size of one resource and then hold it until the process
is killed. Nothing of the profile shows in the process's arguments or environment.
"""

import hashlib
import json
import os
import signal
import sys
import threading
import time

NAME = os.path.basename(sys.argv[0])
BASE = os.path.dirname(os.path.dirname(os.path.abspath(sys.argv[0])))
VAR = os.path.join(BASE, "var", NAME)      # disk-backed (the container's overlay)
TMP = os.path.join("/tmp", "services", NAME)  # the container's tmpfs
LOG_MAX = 64 * 1024
MB = 1024 * 1024

DEFAULTS = {
    "memory_mb": 320, "memory_mb_per_s": 64,
    "cpu_duty": 0.75,
    "fds": 700, "fds_per_s": 200,
    "disk_mb": 220, "disk_mb_per_s": 50,
    "children": 100, "children_per_s": 40,
    "io_mb_per_s": 6, "io_file_mb": 32,
    "threads": 200, "threads_per_s": 100,
}


def period() -> float:
    """A steady service's period, 3-8 s, fixed per name."""
    return 3.0 + int(hashlib.sha256(NAME.encode()).hexdigest()[:4], 16) % 50 / 10


class Log:
    """Its own small log: appended to, truncated past LOG_MAX."""

    def __init__(self) -> None:
        os.makedirs(VAR, exist_ok=True)
        self.path = os.path.join(VAR, NAME + ".log")
        self.f = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 (held for the life of the process)

    def line(self, text: str) -> None:
        if self.f.tell() > LOG_MAX:
            self.f.truncate(0)
            self.f.seek(0)
        self.f.write(time.strftime("%Y-%m-%dT%H:%M:%S ") + text + "\n")
        self.f.flush()


def tick(log: Log, n: int) -> None:
    """One round of a steady service's work."""
    if n % 2 == 0:
        with open("/proc/loadavg", encoding="ascii") as f:
            log.line("load " + f.read().strip())
        return
    entries = 0
    for _root, dirs, files in os.walk("/workspace"):
        entries += len(files)
        dirs[:] = [d for d in dirs if not d.startswith(".") and d not in ("target", "node_modules", ".venv")]
        if entries > 400:
            break
    log.line(f"scanned {entries} entries")


def steady(log: Log, _cfg: dict) -> None:
    n = 0
    while True:
        tick(log, n)
        n += 1
        time.sleep(period())


def hold(log: Log, _what: str) -> None:
    """Keep what was taken and go on like a steady service (the log does not tell: the process's resources do)."""
    n = 0
    while True:
        time.sleep(period())
        tick(log, n)
        n += 1


def memory(log: Log, cfg: dict) -> None:
    cache = []
    pause = 1 / float(cfg["memory_mb_per_s"])
    while len(cache) < int(cfg["memory_mb"]):
        cache.append(b"\x5a" * MB)  # written, so resident
        time.sleep(pause)
    hold(log, f"cache holds {len(cache)} MB")


def cpu(log: Log, cfg: dict) -> None:
    duty = float(cfg["cpu_duty"])
    busy, rest = 0.1 * duty, 0.1 * (1 - duty)
    x = 0
    while True:
        end = time.monotonic() + busy
        while time.monotonic() < end:
            x = (x * 31 + 7) % 1000003
        time.sleep(rest)


def fds(log: Log, cfg: dict) -> None:
    held = []
    path = os.path.join(VAR, "segments.idx")
    target, pause = int(cfg["fds"]), 1 / float(cfg["fds_per_s"])
    while len(held) < target:
        try:
            held.append(open(path, "a", encoding="utf-8"))  # noqa: SIM115 (kept open on purpose)
        except OSError:
            break
        time.sleep(pause)
    hold(log, f"{len(held)} handles open")


def disk(log: Log, cfg: dict) -> None:
    spool = os.path.join(TMP, "spool")
    os.makedirs(spool, exist_ok=True)
    f = open(os.path.join(spool, "batch-0001.dat"), "ab")  # noqa: SIM115 (kept open on purpose)
    block = b"\x00\x17" * (MB // 2)
    target, pause = int(cfg["disk_mb"]), 1 / float(cfg["disk_mb_per_s"])
    written = f.tell() // MB
    while written < target:
        try:
            f.write(block)
            f.flush()
        except OSError:
            break
        written += 1
        time.sleep(pause)
    hold(log, f"spooled {written} MB")


def children(log: Log, cfg: dict) -> None:
    made = 0
    target, pause = int(cfg["children"]), 1 / float(cfg["children_per_s"])
    while made < target:
        try:
            if os.fork() == 0:
                os._exit(0)  # the child is done at once; nobody ever waits for it
        except OSError:
            break
        made += 1
        time.sleep(pause)
    hold(log, f"dispatched {made} jobs")


def io(log: Log, cfg: dict) -> None:
    path = os.path.join(VAR, "journal.bin")
    size = int(cfg["io_file_mb"]) * MB
    block = os.urandom(MB)
    pause = 1 / float(cfg["io_mb_per_s"])
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    offset = 0
    while True:
        os.pwrite(fd, block, offset)
        offset = (offset + MB) % size
        if offset % (4 * MB) == 0:
            os.fsync(fd)
            os.pread(fd, MB, (offset + size // 2) % size)
        time.sleep(pause)


def threads(log: Log, cfg: dict) -> None:
    threading.stack_size(256 * 1024)
    stop = threading.Event()
    started = 0
    target, pause = int(cfg["threads"]), 1 / float(cfg["threads_per_s"])
    while started < target:
        try:
            threading.Thread(target=stop.wait, daemon=True).start()
        except RuntimeError:
            break
        started += 1
        time.sleep(pause)
    hold(log, f"{started} workers")


PROFILES = {"steady": steady, "memory_leak": memory, "cpu_spin": cpu, "fd_leak": fds, "disk_fill": disk,
            "zombie_storm": children, "io_hog": io, "thread_explosion": threads}


def main() -> None:
    line = sys.stdin.readline()
    os.close(0)
    os.open(os.devnull, os.O_RDONLY)
    profile = json.loads(line) if line.strip() else {}
    cfg = {**DEFAULTS, **profile.get("options", {})}
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    os.makedirs(TMP, exist_ok=True)
    log = Log()
    log.line("started")
    PROFILES.get(profile.get("mode", "steady"), steady)(log, cfg)


if __name__ == "__main__":
    main()
