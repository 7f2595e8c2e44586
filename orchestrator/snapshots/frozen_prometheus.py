"""A real Prometheus serving a recorded TSDB snapshot, read-only in effect, for one replay trial.

It runs the Debian `prometheus` binary on a PRIVATE COPY of the snapshot's TSDB (Prometheus writes into its data
directory: lock, WAL, compactions), with a configuration that has no scrape configs and no rule files, so nothing
is ever added: every answer comes from the recorded blocks. It listens on 127.0.0.1 on a free port. Retention is
huge: Prometheus deletes blocks older than its retention at start-up, and a snapshot is replayed months later.

Queries need no special flag: an instant query at `time=<frozen now>` and a range query ending at the frozen now
read the recorded blocks like any past time; the 5-minute lookback (`--query.lookback-delta`) applies as in the
live run, and series that had ended before handover carry the staleness markers the live Prometheus wrote.

Stopping is reliable: a context manager stops it (SIGTERM, then SIGKILL) and deletes the copy; a pid file in the
work directory lets `kill_leftover` stop it after the orchestrator itself was SIGKILLed (the pid is only signalled
when its command line still shows this work directory, so a recycled pid is never hit).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from orchestrator.errors import OpsBenchError

PID_FILE = "prometheus.pid"
DATA_DIR = "data"
CONFIG = "prometheus.yml"
LOG = "prometheus.log"
RETENTION = "100y"
"""Prometheus's largest accepted retention is 100 years (larger values are clamped)."""
CONFIG_TEXT = """# Frozen replay: no scrape configs and no rule files, so the recorded TSDB is all Prometheus serves.
global:
  scrape_interval: 1m
  evaluation_interval: 1m
"""


class PrometheusError(OpsBenchError):
    """The frozen Prometheus cannot run: no binary, a start that failed, an API call refused."""


def prometheus_binary() -> str:
    """The `prometheus` executable on PATH, or a clear error saying how to get it."""
    found = shutil.which("prometheus")
    if found is None:
        raise PrometheusError("no `prometheus` binary on PATH: replaying a snapshot's metrics needs it "
                              "(Debian/Ubuntu: `apt-get install prometheus`, which `make setup` does through "
                              "roles/bootstrap_host)")
    return found


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie still answers kill(0): look at its state.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][:1] != "Z"
    except (OSError, IndexError):
        return False


def _terminate(pid: int, grace: float = 10.0) -> None:
    """SIGTERM, wait up to `grace` seconds, then SIGKILL."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if not _alive(pid):
                return
            time.sleep(0.05)


def kill_leftover(work_dir: Path) -> bool:
    """Stop the frozen Prometheus a dead orchestrator left running in `work_dir` (its pid file says which) and
    remove its data copy. True when a process was stopped."""
    work_dir = Path(work_dir)
    pid_file = work_dir / PID_FILE
    stopped = False
    try:
        pid = int(pid_file.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        pid = 0
    if pid > 0 and "prometheus" in _cmdline(pid) and str(work_dir.resolve()) in _cmdline(pid):
        _terminate(pid)
        stopped = True
    pid_file.unlink(missing_ok=True)
    shutil.rmtree(work_dir / DATA_DIR, ignore_errors=True)
    return stopped


def api(url: str, path: str, params: dict[str, Any] | Sequence[tuple[str, str]] | None = None, *,
        method: str = "GET", timeout: float = 30.0) -> Any:
    """One Prometheus HTTP API call; the decoded JSON `data` (or the whole body for non-API paths)."""
    query = urllib.parse.urlencode(params or {}, doseq=True)
    full = f"{url}{path}" + (f"?{query}" if query and method == "GET" else "")
    body = query.encode() if method == "POST" and query else (b"" if method == "POST" else None)
    request = urllib.request.Request(full, data=body, method=method)
    if method == "POST":
        request.add_header("Content-Type", "application/x-www-form-urlencoded")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            raw = response.read()
    except urllib.error.HTTPError as exc:
        raise PrometheusError(f"Prometheus {method} {path}: HTTP {exc.code}: "
                              f"{exc.read().decode(errors='replace')[:500]}") from None
    except OSError as exc:
        raise PrometheusError(f"Prometheus {method} {path}: {exc}") from None
    if not raw:
        return None
    doc = json.loads(raw)
    return doc.get("data") if isinstance(doc, dict) and "status" in doc else doc


class FrozenPrometheus:
    """`with FrozenPrometheus(tsdb, work_dir) as prom: prom.url` — see the module docstring.

    `work_dir` is the instance's own directory (pid file, config, log, data copy); the copy is removed on stop.
    `admin=True` enables the admin API (used when recording, to delete the machinery's series from a copy).
    """

    def __init__(self, tsdb_dir: Path, work_dir: Path, *, admin: bool = False, startup_timeout: float = 60.0,
                 extra_args: Sequence[str] = ()) -> None:
        self.tsdb_dir = Path(tsdb_dir)
        self.work_dir = Path(work_dir).resolve()
        self.admin = admin
        self.startup_timeout = startup_timeout
        self.extra_args = list(extra_args)
        self.port: int | None = None
        self.process: subprocess.Popen[bytes] | None = None
        self._timed_out = False

    @property
    def url(self) -> str:
        if self.port is None:
            raise PrometheusError("the frozen Prometheus is not running")
        return f"http://127.0.0.1:{self.port}"

    @property
    def data_dir(self) -> Path:
        return self.work_dir / DATA_DIR

    def start(self) -> FrozenPrometheus:
        binary = prometheus_binary()
        if not self.tsdb_dir.is_dir():
            raise PrometheusError(f"no TSDB snapshot at {self.tsdb_dir}")
        kill_leftover(self.work_dir)
        self.work_dir.mkdir(parents=True, exist_ok=True)
        shutil.copytree(self.tsdb_dir, self.data_dir)
        (self.work_dir / CONFIG).write_text(CONFIG_TEXT)
        try:
            self._launch(binary)
        except BaseException:
            self.stop()
            raise
        return self

    def _launch(self, binary: str) -> None:
        for _attempt in range(3):
            self.port = _free_port()
            args = [binary, f"--config.file={self.work_dir / CONFIG}", f"--storage.tsdb.path={self.data_dir}",
                    f"--storage.tsdb.retention.time={RETENTION}", f"--web.listen-address=127.0.0.1:{self.port}",
                    "--log.level=warn", *self.extra_args]
            if self.admin:
                args.append("--web.enable-admin-api")
            with (self.work_dir / LOG).open("ab") as log:
                self.process = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                                start_new_session=True)
            (self.work_dir / PID_FILE).write_text(f"{self.process.pid}\n")
            if self._wait_ready():
                return
            if "address already in use" not in self._log_tail():
                break
        assert self.process is not None
        what = (f"did not become ready within {self.startup_timeout:.0f}s" if self._timed_out
                else f"exited with status {self.process.returncode}")
        raise PrometheusError(f"the frozen Prometheus on {self.tsdb_dir} {what}; its log ({self.work_dir / LOG}) "
                              f"ends:\n{self._log_tail()}")

    def _wait_ready(self) -> bool:
        assert self.process is not None
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                return False
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as response:
                    if response.status == 200:
                        return True
            except OSError:
                pass
            time.sleep(0.1)
        _terminate(self.process.pid)
        self.process.wait()
        self._timed_out = True
        return False

    def _log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join((self.work_dir / LOG).read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self) -> None:
        """Stop Prometheus (if running) and remove the data copy and pid file. Safe to call twice."""
        if self.process is not None:
            if self.process.poll() is None:
                _terminate(self.process.pid)
            self.process.wait()
            self.process = None
        self.port = None
        (self.work_dir / PID_FILE).unlink(missing_ok=True)
        shutil.rmtree(self.data_dir, ignore_errors=True)

    def query(self, query: str, at: float) -> Any:
        return api(self.url, "/api/v1/query", {"query": query, "time": f"{at:.3f}"})

    def query_range(self, query: str, start: float, end: float, step: float) -> Any:
        return api(self.url, "/api/v1/query_range",
                   {"query": query, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step:g}"})

    def __enter__(self) -> FrozenPrometheus:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


def rewrite_without(tsdb_dir: Path, out_dir: Path, work_dir: Path, matchers: Sequence[str],
                    keep_from: float | None = None) -> Path:
    """A copy of `tsdb_dir` at `out_dir` without the series any of `matchers` selects, and without any sample
    older than `keep_from` (Unix seconds) when given, in Prometheus's own block format: delete_series +
    clean_tombstones on a private admin-enabled instance, then its own TSDB snapshot. The cut keeps an earlier
    incident on a shared host (its ALERTS, its metrics) out of the next trial's snapshot: live, the gateway hid
    it (`visible_since`); frozen, it is simply not there."""
    with FrozenPrometheus(tsdb_dir, work_dir, admin=True) as prom:
        deletes: list[list[tuple[str, str]]] = [[("match[]", m) for m in matchers]] if matchers else []
        if keep_from is not None:
            deletes.append([("match[]", '{__name__=~".+"}'), ("start", "0"), ("end", f"{keep_from - 0.001:.3f}")])
        for params in deletes:
            api(prom.url, "/api/v1/admin/tsdb/delete_series", params, method="POST", timeout=120)
        if deletes:
            api(prom.url, "/api/v1/admin/tsdb/clean_tombstones", method="POST", timeout=300)
        made = api(prom.url, "/api/v1/admin/tsdb/snapshot", method="POST", timeout=300)
        name = str((made or {}).get("name") or "")
        if not name:
            raise PrometheusError(f"the TSDB snapshot of {tsdb_dir} returned no name")
        out_dir.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(prom.data_dir / "snapshots" / name), str(out_dir))
    return out_dir
