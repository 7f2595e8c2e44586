"""Run critical user journeys in Debian's Chromium (through Playwright) and write their capture.

The browser work happens in a child process (``python -m orchestrator.cuj _worker``, see worker.py) in a session
of its own. The parent watches its progress events and the clock: when the run's overall timeout expires it kills
the worker's session and every session its processes started (Playwright starts Chromium detached, in a session of
its own) plus any process carrying the run's private config directory (Chromium's crash handlers), SIGTERM then
SIGKILL, checks in /proc that none of them is left, and records where the run was (journey and step).

Setup problems raise CujError (exit code 2): Chromium missing, base URL not loopback or refusing connections,
unknown or invalid journeys, an output directory holding something else.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit

from . import capture
from .errors import CujError
from .journeys import SHOP_JOURNEYS, Journey, journeys_from

DEFAULT_CHROMIUM = "/usr/bin/chromium"
DEFAULT_TIMEOUT = 300.0
DEFAULT_ACTION_TIMEOUT = 10.0
KILL_GRACE = 2.0
LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})
SETUP_HINT = "`make setup` installs Debian's chromium (roles/bootstrap_host); or give --chromium PATH"

Progress = Callable[[str], None]


@dataclass
class RunResult:
    """What a run produced: the index (as written to cuj.json) and the CLI's exit code."""

    out: Path
    index: dict[str, Any]
    exit_code: int
    worker_pid: int | None = None
    sessions: frozenset[int] = frozenset()
    """Every session the worker's processes ran in (checked empty at the end)."""
    leftovers: list[int] = field(default_factory=list)
    """Processes of those sessions still alive after the kill (should be none)."""

    @property
    def timed_out(self) -> bool:
        return self.index.get("timed_out_at") is not None

    def statuses(self) -> dict[str, str]:
        return {j["name"]: j["status"] for j in self.index["journeys"]}


# -- preflight ---------------------------------------------------------------------------------------------------

def check_chromium(path: str | Path) -> None:
    p = Path(path)
    if not p.is_file() or not os.access(p, os.X_OK):
        raise CujError(f"Chromium is missing at {p} (not an executable file): {SETUP_HINT}")


def check_base_url(base_url: str, timeout: float = 5.0) -> None:
    """The base URL is http(s) on a loopback host and accepts connections."""
    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise CujError(f"base URL {base_url!r} is not an http(s) URL with a host")
    if parts.hostname not in LOOPBACK:
        raise CujError(f"base URL {base_url} is not on a loopback host ({', '.join(sorted(LOOPBACK))}): the CUJ "
                       "runner only drives local sites (it blocks every other host)")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((parts.hostname, port), timeout=timeout):
            pass
    except OSError as exc:
        raise CujError(f"base URL {base_url} is unreachable: nothing accepts connections on "
                       f"{parts.hostname}:{port} ({exc.strerror or exc})") from None


def prepare_out(out: Path, journeys: Iterable[str]) -> None:
    """An empty or new directory, or a previous capture (whose files are removed)."""
    if not out.exists():
        out.mkdir(parents=True)
        return
    if not out.is_dir():
        raise CujError(f"output {out} exists and is not a directory")
    if not any(out.iterdir()):
        return
    index = out / capture.INDEX
    if not index.is_file():
        raise CujError(f"output directory {out} is not empty and holds no previous CUJ capture ({capture.INDEX}): "
                       "give a new or empty directory")
    try:
        old = [str(j["name"]) for j in json.loads(index.read_text())["journeys"]]
    except (ValueError, KeyError, TypeError):
        old = []
    for name in {*old, *journeys}:
        d = out / name
        if d.is_dir() and (d / capture.REPORT).exists() and d.resolve().parent == out.resolve():
            shutil.rmtree(d)
    for name in (capture.INDEX, capture.LOG):
        (out / name).unlink(missing_ok=True)


# -- processes ---------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    sid: int
    state: str


def processes() -> list[Proc]:
    """Every process in /proc (pid, ppid, session, state)."""
    out = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                stat = f.read().decode(errors="replace")
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        out.append(Proc(int(entry.name), int(fields[1]), int(fields[3]), fields[0]))
    return out


def _cmdline_has(pid: int, marker: str) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return marker.encode() in f.read()
    except OSError:
        return False


def sessions_of_tree(root: int, known: set[int]) -> set[int]:
    """The sessions of ``root`` and its descendants, added to ``known``."""
    procs = processes()
    children: dict[int, list[Proc]] = {}
    for p in procs:
        children.setdefault(p.ppid, []).append(p)
    found = set(known)
    stack = [root]
    seen: set[int] = set()
    while stack:
        pid = stack.pop()
        if pid in seen:
            continue
        seen.add(pid)
        for child in children.get(pid, []):
            found.add(child.sid)
            stack.append(child.pid)
    found.update(p.sid for p in procs if p.pid == root)
    return found


def members(sessions: set[int], marker: str | None) -> list[int]:
    """Live (non-zombie) processes in ``sessions`` or whose command line holds ``marker``; never this process."""
    me = os.getpid()
    return sorted(p.pid for p in processes()
                  if p.pid != me and p.state not in ("Z", "X")
                  and (p.sid in sessions or (marker is not None and _cmdline_has(p.pid, marker))))


def kill_sessions(sessions: set[int], marker: str | None, grace: float = KILL_GRACE) -> list[int]:
    """SIGTERM, then SIGKILL after ``grace`` seconds, every member; the pids still alive after that."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, grace)):
        pids = members(sessions, marker)
        if not pids:
            return []
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and members(sessions, marker):
            time.sleep(0.05)
    return members(sessions, marker)


# -- the run -----------------------------------------------------------------------------------------------------

@dataclass
class _State:
    chromium_version: str | None = None
    journey: str | None = None
    step: str | None = None
    fatal: str | None = None
    ended: dict[str, dict[str, Any]] = field(default_factory=dict)


def _read_events(stream: IO[bytes], sink: queue.Queue[dict[str, Any] | None]) -> None:
    for raw in stream:
        try:
            event = json.loads(raw)
        except ValueError:
            continue
        if isinstance(event, dict):
            sink.put(event)
    sink.put(None)


def _handle(event: dict[str, Any], state: _State, progress: Progress | None) -> None:
    kind = event.get("event")
    if kind == "browser":
        state.chromium_version = event.get("chromium_version")
    elif kind == "journey":
        state.journey, state.step = event["journey"], None
        _say(progress, f"{event['journey']}: {event['steps']} step(s)")
    elif kind == "step" and event.get("phase") == "start":
        state.step = event["step"]
    elif kind == "step":
        line = (f"{event['journey']} {event['index']}/{event['of']} {event['step']}: {event['status']} "
                f"({float(event.get('duration_ms') or 0) / 1000:.2f} s)")
        if event.get("message"):
            line += f"\n      {event['message']}"
        _say(progress, line)
    elif kind == "journey-end":
        state.ended[event["journey"]] = event
        state.journey = state.step = None
        where = f" at {event['failed_step']}" if event.get("failed_step") else ""
        _say(progress, f"{event['journey']}: {event['status']}{where} ({event['duration_s']:.1f} s)")
    elif kind == "fatal":
        state.fatal = str(event.get("message"))


def _say(progress: Progress | None, line: str) -> None:
    if progress is not None:
        progress(f"[cuj] {line}")


def run(base_url: str, out: str | Path, journeys: Iterable[Journey | Mapping[str, Any]] | None = None, *,
        timeout: float = DEFAULT_TIMEOUT, action_timeout: float = DEFAULT_ACTION_TIMEOUT,
        chromium: str | Path = DEFAULT_CHROMIUM, progress: Progress | None = None) -> RunResult:
    """Run ``journeys`` (default: the shop's four) against ``base_url`` and write the capture to ``out``.

    The verdicts are in the result (and ``out/cuj.json``); CujError when the run cannot start."""
    chosen = journeys_from(SHOP_JOURNEYS.values() if journeys is None else journeys)
    if timeout <= 0 or action_timeout <= 0:
        raise CujError("timeouts must be positive numbers of seconds")
    check_chromium(chromium)
    check_base_url(base_url, timeout=min(action_timeout, 5.0))
    out_dir = Path(out)
    prepare_out(out_dir, [j.name for j in chosen])
    started = time.time()
    private = Path(tempfile.mkdtemp(prefix="opsbench-cuj-"))
    marker = str(private)
    env = {**os.environ, "XDG_CONFIG_HOME": str(private / "config"), "XDG_CACHE_HOME": str(private / "cache"),
           "PYTHONUNBUFFERED": "1",
           "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[2]),
                                          *filter(None, [os.environ.get("PYTHONPATH")])])}
    job = {"base_url": base_url, "out": str(out_dir.resolve()), "action_timeout": action_timeout,
           "chromium": str(chromium), "journeys": [j.to_dict() for j in chosen]}
    state = _State()
    sessions: set[int] = set()
    leftovers: list[int] = []
    timed_out = False
    proc: subprocess.Popen[bytes] | None = None
    try:
        with open(out_dir / capture.LOG, "wb") as log:
            proc = subprocess.Popen([sys.executable, "-m", "orchestrator.cuj", "_worker"], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=log, env=env, start_new_session=True)
        sessions.add(proc.pid)
        assert proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.write(json.dumps(job).encode())
            proc.stdin.close()
        except BrokenPipeError:
            pass
        events: queue.Queue[dict[str, Any] | None] = queue.Queue()
        reader = threading.Thread(target=_read_events, args=(proc.stdout, events), daemon=True)
        reader.start()
        deadline = time.monotonic() + timeout
        next_scan = 0.0
        stream_open = True
        while stream_open or proc.poll() is None:
            if time.monotonic() >= next_scan:
                sessions = sessions_of_tree(proc.pid, sessions)
                next_scan = time.monotonic() + 0.5
            if time.monotonic() >= deadline:
                timed_out = True
                break
            try:
                event = events.get(timeout=0.1)
            except queue.Empty:
                continue
            if event is None:
                stream_open = False
                continue
            _handle(event, state, progress)
        if timed_out:
            sessions = sessions_of_tree(proc.pid, sessions)
            _say(progress, f"overall timeout of {timeout:g} s expired in journey {state.journey or '-'} step "
                           f"{state.step or '-'}: killing the browser worker")
        else:
            proc.wait()
    finally:
        if proc is not None:
            leftovers = kill_sessions(sessions, marker)
            if proc.poll() is None:
                proc.kill()
            proc.wait()
        shutil.rmtree(private, ignore_errors=True)
    assert proc is not None
    log_file = out_dir / capture.LOG
    if log_file.exists() and log_file.stat().st_size == 0:
        log_file.unlink()  # Chromium had nothing to say
    if state.fatal and not state.ended:
        raise CujError(f"{state.fatal}\n{_log_tail(out_dir)}")
    return _finish(out_dir, base_url, chosen, state, started, timeout, timed_out, proc.returncode, sessions,
                   leftovers, proc.pid)


def _log_tail(out: Path, lines: int = 15) -> str:
    try:
        text = (out / capture.LOG).read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return "runner.log (last lines):\n" + "\n".join(text[-lines:]) if text else ""


def _finish(out: Path, base_url: str, chosen: list[Journey], state: _State, started: float, timeout: float,
            timed_out: bool, returncode: int | None, sessions: set[int], leftovers: list[int],
            worker_pid: int) -> RunResult:
    entries = []
    timed_out_at = None
    for journey in chosen:
        report = _final_report(out, journey, state, timeout, timed_out, returncode)
        if report["status"] == "timeout" and report.get("failed_step"):
            timed_out_at = {"journey": journey.name, "step": report["failed_step"]}
        entries.append({"name": journey.name, "status": report["status"], "failed_step": report.get("failed_step"),
                        "duration_s": report.get("duration_s"), "message": report.get("message")})
    finished = time.time()
    if timed_out and timed_out_at is None:
        timed_out_at = {"journey": state.journey, "step": state.step}
    index: dict[str, Any] = {
        "version": capture.VERSION, "base_url": base_url, "started": round(started, 3),
        "finished": round(finished, 3), "duration_s": round(finished - started, 3),
        "chromium_version": state.chromium_version, "journeys": entries, "timed_out_at": timed_out_at}
    if leftovers:
        index["leftover_processes"] = leftovers
    capture.write_json(out / capture.INDEX, index)
    statuses = {e["status"] for e in entries}
    code = 0 if statuses == {"passed"} else 2 if statuses & {"error", "timeout"} or leftovers else 1
    return RunResult(out, index, code, worker_pid, frozenset(sessions), leftovers)


def _final_report(out: Path, journey: Journey, state: _State, timeout: float, timed_out: bool,
                  returncode: int | None) -> dict[str, Any]:
    """The journey's report as the worker left it, completed when the worker did not finish it."""
    path = out / journey.name / capture.REPORT
    try:
        report: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError):
        report = _empty_report(journey)
    if journey.name in state.ended and report.get("status") not in (None, "running"):
        return report
    if timed_out:
        status = "timeout"
        why = f"the run's overall timeout ({timeout:g} s) expired"
        if journey.name == state.journey:
            why += " during this step; the browser was killed"
        else:
            why = f"not run: {why} before this journey started"
    else:
        status = "error"
        why = (f"the browser worker exited (code {returncode}) before finishing this journey; see "
               f"{capture.LOG}")
    failed = None
    for rec in report["steps"]:
        if rec["status"] == "running":
            rec.update(status="error", error=why, message=f"step {rec['index']} {rec['name']!r}: {why}")
            failed = failed or rec
        elif rec["status"] == "pending":
            rec["status"] = "skipped"
    report.update(status=status, failed_step=failed["name"] if failed else None,
                  message=failed["message"] if failed else why)
    if report.get("started"):
        report["duration_s"] = round(time.time() - float(report["started"]), 3)
    capture.write_json(path, report)
    return report


def _empty_report(journey: Journey) -> dict[str, Any]:
    return {"journey": journey.name, "description": journey.description, "status": "running", "failed_step": None,
            "message": None, "started": None, "duration_s": None, "vars": {},
            "steps": [{"index": i, "name": s.name, "status": "pending", "assertion": None, "expected": None,
                       "actual": None, "error": None, "message": None, "url": None, "started": None,
                       "duration_ms": None, "screenshot": None, "dom": None,
                       "evidence_id": capture.step_id(journey.name, s.name)}
                      for i, s in enumerate(journey.steps, 1)]}
