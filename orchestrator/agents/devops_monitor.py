"""Scripted baseline for DevOps monitoring: find the one misbehaving process of the workspace and what it does wrong.

It works only through the gateway's terminal tool ``exec`` (the workspace user's shell, in the run's workspace
container): it samples the processes a few times a few seconds apart (``ps -eo pid,ppid,stat,nlwp,rss,etimes,comm,
args`` and, per process, the open descriptors, CPU ticks and I/O counters of ``/proc/<pid>``), then looks once at
the files the processes hold open and at the disk use of the writable directories. The decision is deterministic:
each long-lived process gets a measure per anomaly; the anomalies are tried in a fixed order (the ones a single
measure proves first) and the process with the strongest measure over its threshold is the root cause:

========================  =================================================  ==================
anomaly                   measure                                            threshold
========================  =================================================  ==================
zombie_storm              its children in state Z                            >= 20
thread_explosion          its threads (nlwp)                                 >= 50
fd_leak                   its open descriptors                               >= 200
disk_fill                 the largest regular file it holds open             >= 64 MiB
memory_leak               its resident memory (or growth over the samples)   >= 150 MiB (>= 32 MiB growth)
io_hog                    bytes it writes per second (wchar/write_bytes)     >= 1 MiB/s
cpu_spin                  CPU time per second over the samples               >= 30% of a core
========================  =================================================  ==================

The output names the process by its program name (``comm``), which is its entity in the workspace's topology, with
layer ``process`` and the anomaly as fault type; with no process over a threshold it says there is no incident.
Run: ``opsbench run devops-monitor-memory-leak --agent "python -m orchestrator.agents.devops_monitor"``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from orchestrator.agents.gateway_client import Call, GatewayClient, ToolError, open_session

SAMPLES = 3
INTERVAL_S = 2.0
MIN_AGE_S = 3  # younger processes are the sampler's own (and whatever else just started)
MIB = 1024 * 1024

ORDER = ("zombie_storm", "thread_explosion", "fd_leak", "disk_fill", "memory_leak", "io_hog", "cpu_spin")
THRESHOLDS: dict[str, float] = {
    "zombie_storm": 20,
    "thread_explosion": 50,
    "fd_leak": 200,
    "disk_fill": 64 * MIB,
    "memory_leak": 150 * MIB,
    "io_hog": 1 * MIB,
    "cpu_spin": 0.30,
}
MEMORY_GROWTH = 32 * MIB
UNITS = {"zombie_storm": "zombie children", "thread_explosion": "threads", "fd_leak": "open descriptors",
         "disk_fill": "bytes in one open file", "memory_leak": "bytes resident", "io_hog": "bytes written per second",
         "cpu_spin": "of a core"}

EFFECTS = {
    "zombie_storm": "its zombies hold pids the workspace's builds and tests need (the container's pids limit)",
    "thread_explosion": "its threads hold pids the workspace's builds and tests need (the container's pids limit)",
    "fd_leak": "it nears its open-files limit, after which its own opens fail",
    "disk_fill": "the filesystem it writes to fills up, leaving less room for everything else in the workspace",
    "memory_leak": "the container's memory shrinks for builds and tests, up to out-of-memory kills",
    "io_hog": "the disk is kept busy, slowing every build and test that reads or writes files",
    "cpu_spin": "it takes CPU the container's builds and tests need, so they run slower",
}

# One sample: the uptime (seconds, the clock of the deltas), ps, then per process of the workspace user its open
# descriptors (a glob, no fork), its stat line and its I/O counters (shell builtins only, so a sample stays cheap
# even with a hundred zombies around).
SAMPLE_COMMAND = r"""
read -r up _ < /proc/uptime; echo "@time $up"
ps -eo pid=,ppid=,stat=,nlwp=,rss=,etimes=,comm=,args= | sed 's/^/@ps /'
for d in /proc/[0-9]*; do
  [ -r "$d/io" ] || continue
  read -r st < "$d/stat" 2>/dev/null || continue
  set -- "$d"/fd/*
  if [ -L "$1" ]; then n=$#; else n=0; fi
  io=""
  while read -r k v; do io="$io ${k%:}=$v"; done < "$d/io" 2>/dev/null
  echo "@proc ${d#/proc/} fds=$n$io stat=$st"
done
"""

# Once: the regular files the processes hold open (with their sizes), disk use of the writable places.
FILES_COMMAND = r"""
find /proc/[0-9]*/fd -maxdepth 1 -type l -printf '%h\t%l\n' 2>/dev/null | sort -u |
while IFS="$(printf '\t')" read -r dir target; do
  case $target in /*) ;; *) continue ;; esac
  [ -f "$target" ] || continue
  pid=${dir#/proc/}; pid=${pid%/fd}
  echo "@open $pid $(stat -c %s -- "$target") $target"
done
df -Pk /tmp /home /workspace 2>/dev/null | sed 1d | sed 's/^/@df /'
du -xk -d 2 /tmp "$HOME" 2>/dev/null | sort -rn | head -n 8 | sed 's/^/@du /'
"""


@dataclass
class Proc:
    pid: int
    ppid: int
    stat: str
    nlwp: int
    rss_kb: int
    etimes: int
    comm: str
    args: str
    fds: int | None = None
    cpu_ticks: int | None = None
    io: dict[str, int] = field(default_factory=dict)


@dataclass
class Sample:
    time: float
    procs: dict[int, Proc]


@dataclass(frozen=True)
class OpenFile:
    pid: int
    size: int
    path: str


@dataclass(frozen=True)
class Finding:
    pid: int
    name: str
    anomaly: str
    value: float
    detail: str = ""

    @property
    def strength(self) -> float:
        return self.value / THRESHOLDS[self.anomaly]

    def describe(self) -> str:
        if self.anomaly in ("disk_fill", "memory_leak"):
            shown = f"{self.value / MIB:.0f} MiB"
        elif self.anomaly == "io_hog":
            shown = f"{self.value / MIB:.1f} MiB/s written"
        elif self.anomaly == "cpu_spin":
            shown = f"{self.value:.0%} of a core"
        else:
            shown = f"{self.value:.0f} {UNITS[self.anomaly]}"
        return f"{self.name} (pid {self.pid}): {self.anomaly}, {shown}{' ' + self.detail if self.detail else ''}"


def parse_sample(text: str) -> Sample:
    """One sample's output (SAMPLE_COMMAND) as processes by pid; lines it does not know are skipped."""
    now = 0.0
    procs: dict[int, Proc] = {}
    extra: dict[int, tuple[int | None, int | None, dict[str, int]]] = {}
    for line in text.splitlines():
        tag, _, rest = line.partition(" ")
        try:
            if tag == "@time":
                now = float(rest.split()[0])
            elif tag == "@ps":
                parts = rest.split(None, 7)
                if len(parts) < 7:
                    continue
                pid, ppid, stat, nlwp, rss, etimes = parts[:6]
                procs[int(pid)] = Proc(int(pid), int(ppid), stat, int(nlwp), int(rss), int(etimes), parts[6],
                                       parts[7] if len(parts) > 7 else "")
            elif tag == "@proc":
                head, _, stat_line = rest.partition(" stat=")
                words = head.split()
                counters = dict(w.split("=", 1) for w in words[1:] if "=" in w)
                fds = int(counters.pop("fds")) if "fds" in counters else None
                after = stat_line.rpartition(")")[2].split()
                ticks = int(after[11]) + int(after[12]) if len(after) > 12 else None
                extra[int(words[0])] = (fds, ticks, {k: int(v) for k, v in counters.items() if v.isdigit()})
        except ValueError:
            continue
    for key, (fds, ticks, io) in extra.items():
        if key in procs:
            procs[key].fds, procs[key].cpu_ticks, procs[key].io = fds, ticks, io
    return Sample(now, procs)


def parse_files(text: str) -> list[OpenFile]:
    """The ``@open pid size path`` lines of FILES_COMMAND."""
    files = []
    for line in text.splitlines():
        if not line.startswith("@open "):
            continue
        parts = line.split(" ", 3)
        if len(parts) == 4 and parts[1].isdigit() and parts[2].isdigit():
            files.append(OpenFile(int(parts[1]), int(parts[2]), parts[3]))
    return files


def services(sample: Sample) -> list[Proc]:
    """The long-lived processes worth judging: not the container's init or its `sleep infinity`, not a zombie, not
    the sampler's own commands (younger than MIN_AGE_S)."""
    out = []
    for p in sample.procs.values():
        if p.pid == 1 or p.stat.startswith("Z") or p.etimes < MIN_AGE_S:
            continue
        if p.ppid == 1 and p.args == "sleep infinity":
            continue
        out.append(p)
    return out


def findings(samples: list[Sample], files: list[OpenFile], clk_tck: int = 100) -> list[Finding]:
    """Every (process, anomaly) whose measure reaches its threshold, in ORDER, strongest first within one anomaly."""
    if not samples:
        return []
    first, last = samples[0], samples[-1]
    span = last.time - first.time
    found: list[Finding] = []
    biggest: dict[int, OpenFile] = {}
    for f in files:
        if f.pid not in biggest or f.size > biggest[f.pid].size:
            biggest[f.pid] = f
    for p in services(last):
        before = first.procs.get(p.pid)
        if before is not None and before.comm != p.comm:
            before = None  # the pid was reused
        measures: dict[str, float] = {
            "zombie_storm": sum(1 for q in last.procs.values() if q.ppid == p.pid and q.stat.startswith("Z")),
            "thread_explosion": p.nlwp,
            "fd_leak": p.fds or 0,
            "disk_fill": biggest[p.pid].size if p.pid in biggest else 0,
            "memory_leak": p.rss_kb * 1024,
        }
        if before is not None and span > 0:
            growth = (p.rss_kb - before.rss_kb) * 1024
            if growth >= MEMORY_GROWTH:
                measures["memory_leak"] = max(measures["memory_leak"], THRESHOLDS["memory_leak"] * growth
                                              / MEMORY_GROWTH)
            written = max(p.io.get("wchar", 0) - before.io.get("wchar", 0),
                          p.io.get("write_bytes", 0) - before.io.get("write_bytes", 0))
            measures["io_hog"] = written / span
            if p.cpu_ticks is not None and before.cpu_ticks is not None:
                measures["cpu_spin"] = (p.cpu_ticks - before.cpu_ticks) / clk_tck / span
        for anomaly, value in measures.items():
            if value >= THRESHOLDS[anomaly]:
                detail = f"in {biggest[p.pid].path}" if anomaly == "disk_fill" else ""
                found.append(Finding(p.pid, p.comm, anomaly, float(value), detail))
    return sorted(found, key=lambda f: (ORDER.index(f.anomaly), -f.strength, f.pid))


def decide(samples: list[Sample], files: list[OpenFile], clk_tck: int = 100) -> Finding | None:
    """The root cause: the first finding (see the module's table), or None when nothing stands out."""
    found = findings(samples, files, clk_tck)
    return found[0] if found else None


def diagnosis(verdict: Finding | None, others: list[Finding]) -> dict[str, Any]:
    """The diagnosis output (diagnosis_output schema) for a decision."""
    if verdict is None:
        return {"schema": "opsbench/diagnosis/v1", "incident": False, "entities": [],
                "explanation": "No process of the workspace stands out: no zombies, threads, descriptors, memory, "
                               "open files, writes or CPU over the thresholds."}
    lines = [f"The misbehaving process is {verdict.describe()}."]
    rest = [f.describe() for f in others if f != verdict]
    if rest:
        lines.append("Also over a threshold (explained by it or weaker): " + "; ".join(rest) + ".")
    return {
        "schema": "opsbench/diagnosis/v1",
        "incident": True,
        "entities": [{"id": verdict.name, "root_cause": True, "layer": "process", "fault_type": verdict.anomaly}],
        # The workspace's topology: the container owns its processes; what one takes, the builds and tests lack.
        "propagations": [{"source": verdict.name, "target": "workspace", "condition": verdict.describe(),
                          "effect": EFFECTS[verdict.anomaly]}],
        "explanation": " ".join(lines),
    }


def exec_out(call: Call, command: str, timeout: int = 30) -> str:
    result = call("exec", command=command, timeout=timeout, max_output_bytes=1024 * 1024)
    return str(result.get("stdout", "")) if isinstance(result, dict) else ""


def observe(call: Call, samples: int = SAMPLES, interval_s: float = INTERVAL_S,
            sleep: Callable[[float], None] | None = None) -> tuple[list[Sample], list[OpenFile], int]:
    """Sample the workspace through ``exec``: the process samples, the open files and the clock tick."""
    taken = []
    for i in range(samples):
        if i:
            (sleep or time.sleep)(interval_s)
        taken.append(parse_sample(exec_out(call, SAMPLE_COMMAND)))
    files_text = exec_out(call, FILES_COMMAND + "echo \"@clk $(getconf CLK_TCK)\"\n")
    clk = next((int(x.split()[1]) for x in files_text.splitlines()
                if x.startswith("@clk ") and x.split()[1:2] and x.split()[1].isdigit()), 100)
    return taken, parse_files(files_text), clk


def run(call: Call, samples: int = SAMPLES, interval_s: float = INTERVAL_S,
        sleep: Callable[[float], None] | None = None) -> dict[str, Any]:
    """Observe, decide, and answer (the diagnosis output)."""
    taken, files, clk = observe(call, samples, interval_s, sleep)
    found = findings(taken, files, clk)
    return diagnosis(found[0] if found else None, found)


def main() -> int:
    session = open_session()
    try:
        output = run(GatewayClient(session.url, session.token))
    except ToolError as exc:
        print(f"devops_monitor: {exc}", file=sys.stderr)
        return 1
    session.write(output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
