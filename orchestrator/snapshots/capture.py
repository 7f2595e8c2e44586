"""Capture a live run at handover into a snapshot directory: the Python half of roles/snapshot_record.

    python -m orchestrator.snapshots.capture --run-dir RUN --out DIR --scenario ID --spec-version N \
        [--tsdb RAW_TSDB] [--frozen-now T] [--window-start T] [--since T]

The role has already copied the run Prometheus's TSDB snapshot to RAW_TSDB (outside DIR). This module reads the
world exactly as the run's tool gateway would at the frozen now, through the gateway's own code (its context,
scope, tool handlers and the telemetry store's rules), and writes what the replay gateway will serve:

* alerts.json, services.json: the answers of get_alerts (the alerts the handover read, completed by those
  Alertmanager still lists that began before the frozen now), list_services and describe_service (every visible
  service), with today's scope and redaction;
* topology.json: the visible declared topology and the service calls measured from the window's traces;
* telemetry/: log records and spans of the window in TelemetryStore's layout, without the machinery's records
  (`Scope.hidden_services`), so a TelemetryStore pointed at it answers as the live gateway did;
* metrics/tsdb/: the TSDB of the evidence window without the machinery's series (the gateway's `visible_series`
  rule), rewritten by a private Prometheus;
* changes.json: the change journal's entries up to the frozen now (within the visible window on a shared
  environment); browser/: a copy of the browser capture the live gateway serves (the latest in the window);
* manifest.json: the agent's manifest without token, URLs, endpoints, run handle, deadline or paths.

It never opens the scenario's ground truth, the run's `state/` (saved fault state) or the spec's faults; families
the scenario masks (observability off) are not recorded at all. snapshot.json is written last (format.write_index).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any

from orchestrator.gateway.context import GatewayOptions, RunContext, load_context
from orchestrator.gateway.control import ControlBackend
from orchestrator.gateway.errors import ToolError
from orchestrator.gateway.promql_scope import INTERNAL_METRIC, MONITORING_JOBS
from orchestrator.gateway.scope import INTERNAL_NAMES, INTERNAL_PREFIXES, INTERNAL_SUFFIXES, visible_topology
from orchestrator.gateway.times import to_ns
from orchestrator.gateway.tools import BY_NAME
from orchestrator.gateway.tools.base import NoArgs, ServiceArgs
from orchestrator.topology import run_topology

from . import format as fmt
from .frozen_prometheus import rewrite_without

MANIFEST_KEEP = ("manifest_version", "tasks", "alerts", "budget", "observability", "topology")
"""Manifest fields a replay can hand out unchanged; everything else is per trial (run handle, deadline, token,
gateway URLs, output paths) or names the live environment (endpoints, targets, kubeconfig)."""

DESCRIBE_WORKERS = 4


def machinery_matchers() -> list[str]:
    """PromQL series selectors for everything the gateway's `visible_series` hides (RE2, fully anchored)."""
    names = "|".join(sorted(INTERNAL_NAMES))
    prefixes = "|".join(p.replace(".", r"\.") for p in INTERNAL_PREFIXES)
    suffixes = "|".join(s.replace(".", r"\.") for s in INTERNAL_SUFFIXES)
    internal = f"(?i)\\s*(?:(?:{names})|(?:{prefixes}).*|.*(?:{suffixes}))\\s*"
    # Backquoted PromQL strings are raw: the regular expressions' backslashes reach RE2 as written.
    matchers = [f"{{__name__=~`{INTERNAL_METRIC.pattern.lstrip('^')}.*`}}",
                f"{{job=~`(?i){'|'.join(sorted(MONITORING_JOBS))}`}}"]
    matchers += [f"{{{label}=~`{internal}`}}" for label in ("service", "container", "instance_id")]
    return matchers


def _manifest(run_dir: Path) -> dict[str, Any]:
    manifest = json.loads((run_dir / "agent" / "manifest.json").read_text())
    return {k: manifest[k] for k in MANIFEST_KEEP if k in manifest}


def _all_pages(ctx: RunContext, tool: str, args: dict[str, Any]) -> Iterator[Any]:
    """Every item of a paged tool's answer, following `next_page`."""
    spec = BY_NAME[tool]
    page: str | None = None
    while True:
        result = spec.run(ctx, spec.args(**args, page=page))
        yield from result.result["items"]
        page = result.next_page
        if page is None:
            return


def _jsonl_records(files: Iterable[Path]) -> Iterator[tuple[Path, str, dict[str, Any]]]:
    """(file, line as written, parsed record) of every JSON object line of `files`."""
    for file in files:
        with file.open(errors="replace") as fh:
            for line in fh:
                try:
                    record = json.loads(line)
                except ValueError:
                    continue  # a partial last line or garbage: the store ignores it too
                if isinstance(record, dict):
                    yield file, line.rstrip("\n"), record


def _service(record: dict[str, Any]) -> str:
    resource = record.get("resource")
    return str(resource.get("service.name") or "") if isinstance(resource, dict) else ""


def copy_telemetry(source: Path, dest: Path, kind: str, time_key: str, since_ns: int, until_ns: int,
                   hidden: Iterable[str]) -> int:
    """Copy the records of `kind` (logs/traces) in [since_ns, until_ns) whose service is not hidden, one output
    file per input file (files left empty are not written), each line byte for byte as recorded. Returns how many
    records were kept."""
    hidden_set = set(hidden)
    kept: dict[str, list[str]] = {}
    files = sorted(p for p in (source / kind).glob("*.jsonl") if p.is_file())
    for file, line, record in _jsonl_records(files):
        at = record.get(time_key)
        if not isinstance(at, int) or isinstance(at, bool) or not since_ns <= at < until_ns:
            continue
        if _service(record) in hidden_set:
            continue
        kept.setdefault(file.name, []).append(line)
    for name, lines in kept.items():
        (dest / kind).mkdir(parents=True, exist_ok=True)
        (dest / kind / name).write_text("\n".join(lines) + "\n")
    return sum(len(lines) for lines in kept.values())


def _earliest(telemetry: Path | None, tsdb: Path | None) -> float | None:
    """The oldest time any recorded evidence has (log, span, TSDB block), in Unix seconds."""
    found: list[float] = []
    if tsdb is not None:
        for meta in tsdb.glob("*/meta.json"):
            with contextlib.suppress(OSError, ValueError, KeyError):
                found.append(int(json.loads(meta.read_text())["minTime"]) / 1000)
    if telemetry is not None:
        for kind, key in (("logs", "timeUnixNano"), ("traces", "startTimeUnixNano")):
            for _file, _line, record in _jsonl_records(sorted((telemetry / kind).glob("*.jsonl"))):
                at = record.get(key)
                if isinstance(at, int) and not isinstance(at, bool):
                    found.append(at / 1e9)
                    break
    return min(found) if found else None


def started_after(alert: dict[str, Any], now: float) -> bool:
    """Whether an alert began firing after the frozen now. Alertmanager is read when the capture runs, seconds to
    tens of seconds after handover (after the live agent with `record --check`): an alert that began firing since
    was not part of the incident at handover and must not be in its snapshot."""
    try:
        starts = datetime.fromisoformat(str(alert.get("startsAt", "")).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return False
    return starts > now


def fingerprint(labels: dict[str, str]) -> str:
    """Alertmanager's fingerprint of a label set (prometheus/common model.LabelSet.Fingerprint: FNV-1a 64 over the
    sorted names and values, each followed by 0xff)."""
    value = 0xcbf29ce484222325
    for name in sorted(labels):
        for part in (name.encode(), b"\xff", str(labels[name]).encode(), b"\xff"):
            for byte in part:
                value = ((value ^ byte) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return f"{value:016x}"


def alerts_at_handover(at_handover: list[dict[str, Any]], listed: list[dict[str, Any]],
                       now: float) -> list[dict[str, Any]]:
    """The get_alerts answer at the frozen now. `at_handover` is what the handover read from Alertmanager into the
    manifest (labels, annotations, startsAt), `listed` what get_alerts answers at capture time, seconds later (after
    the live agent with `record --check`). An alert can resolve in between and one can begin: the handover's read
    is the truth (its annotations too: they render the value at handover), completed by alerts still listed that
    began before the frozen now. Sorted as get_alerts sorts."""
    def key(labels: dict[str, Any]) -> tuple[tuple[str, str], ...]:
        return tuple(sorted((str(k), str(v)) for k, v in labels.items()))

    still = {key(a.get("labels") or {}): a for a in listed}
    answer: dict[tuple[tuple[str, str], ...], dict[str, Any]] = {}
    for alert in at_handover:
        labels = {str(k): str(v) for k, v in (alert.get("labels") or {}).items()}
        same = still.get(key(labels))
        entry = {"alertname": labels.get("alertname"), "labels": labels,
                 "annotations": alert.get("annotations") or {}, "startsAt": alert.get("startsAt"),
                 "state": "active", "fingerprint": same["fingerprint"] if same else fingerprint(labels)}
        if not started_after(entry, now):
            answer[key(labels)] = entry
    for labels_key, alert in still.items():
        if not started_after(alert, now):
            answer.setdefault(labels_key, alert)
    return sorted(answer.values(), key=lambda a: (str(a["startsAt"]), str(a["alertname"]), str(a["fingerprint"])))


def capture(run_dir: Path, out: Path, *, scenario_id: str, spec_version: int, raw_tsdb: Path | None,
            frozen_now: float | None = None, window_start: float | None = None,
            visible_since: float | None = None, control: ControlBackend | None = None) -> fmt.SnapshotInfo:
    """Write the snapshot of the run in `run_dir` into `out` (must not exist yet or be empty). `control` replaces
    the environment's control backend (tests)."""
    run_dir, out = Path(run_dir), Path(out)
    if out.exists() and any(out.iterdir()):
        raise fmt.SnapshotError(out, ".", "the output directory is not empty")
    out.mkdir(parents=True, exist_ok=True)
    now = time.time() if frozen_now is None else frozen_now
    manifest = _manifest(run_dir)
    masked = tuple(f for f, on in (manifest.get("observability") or {}).items() if not on)
    ctx = load_context(run_dir, GatewayOptions(hidden_families=masked, visible_since=visible_since), control=control)
    ctx.clock = lambda: now
    offered = ctx.offered_families
    wants = {f for f in ("alerts", "metrics", "logs", "traces", "topology")
             if f not in masked and (offered is None or f in offered)}
    if window_start is None:
        window_start = visible_since or _earliest(ctx.telemetry_dir, raw_tsdb) or now
    window_start = min(window_start, now)
    families: list[str] = []
    try:
        (out / fmt.MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
        if "alerts" in wants and "alertmanager" in ctx.endpoints:
            alerts = alerts_at_handover(manifest.get("alerts") or [],
                                        list(_all_pages(ctx, "get_alerts", {"service": None, "limit": 200})), now)
            _write(out / fmt.ALERTS, alerts)
            families.append("alerts")
        since_ns, until_ns = to_ns(window_start), to_ns(now)
        if ctx.telemetry_dir is not None:
            for family, key in (("logs", "timeUnixNano"), ("traces", "startTimeUnixNano")):
                if family in wants:
                    copy_telemetry(ctx.telemetry_dir, out / fmt.TELEMETRY_DIR, family, key, since_ns, until_ns,
                                   ctx.scope.hidden_services)
                    families.append(family)
        if "topology" in wants:
            measured = visible_topology(run_topology(run_dir, since_ns, until_ns)) if ctx.telemetry_dir else None
            _write(out / fmt.TOPOLOGY, {"declared": ctx.scope.topology, "measured": measured})
            families.append("topology")
        services = _services(ctx)
        if services is not None:
            _write(out / fmt.SERVICES, services)
            families.append("services")
        if ctx.evidence.changes_file is not None:
            _write(out / fmt.CHANGES, [e for e in ctx.evidence.changes() if float(e["time"]) <= now
                                       and (visible_since is None or float(e["time"]) >= visible_since)])
            families.append("changes")
        if ctx.evidence.browser_dir is not None:
            # The capture the live gateway serves at this moment (the latest in the run's window); none: the
            # family is still recorded, and the replay answers "nothing captured" as the live run would.
            served = ctx.evidence.browser_capture(visible_since)
            if served is not None:
                shutil.copytree(served, out / fmt.BROWSER_DIR, symlinks=True)
            families.append("browser")
        if "metrics" in wants and raw_tsdb is not None:
            with tempfile.TemporaryDirectory(prefix="opsbench-capture-") as work:
                rewrite_without(raw_tsdb, out / fmt.TSDB_DIR, Path(work) / "prometheus", machinery_matchers(),
                                keep_from=window_start)
            families.append("metrics")
    finally:
        ctx.close()
    environment = {"application": ctx.environment.get("application"),
                   "container_prefix": (ctx.environment.get("control") or {}).get("container_prefix"),
                   "tool_families": ctx.environment.get("tool_families")}
    return fmt.write_index(out, scenario_id=scenario_id, spec_version=spec_version, frozen_now=now,
                           window_start=window_start, families=families, extra={"environment": environment})


def _services(ctx: RunContext) -> dict[str, Any] | None:
    """list_services and describe_service of every visible service, as the gateway answers them now."""
    if ctx.control is None:
        return None
    try:
        listing = BY_NAME["list_services"].run(ctx, NoArgs()).result
    except ToolError as exc:
        if exc.code == "not_supported":
            return None
        raise

    def describe(service: str) -> Any:
        try:
            return BY_NAME["describe_service"].run(ctx, ServiceArgs(service=service)).result
        except ToolError as exc:
            return {"error": {"code": exc.code, "message": str(exc)}}

    # Each answer costs podman calls; the gateway serves concurrent calls too, so a few at once are safe.
    with ThreadPoolExecutor(max_workers=DESCRIBE_WORKERS) as pool:
        answers = list(pool.map(describe, ctx.scope.services))
    return {"list_services": listing, "describe_service": dict(zip(ctx.scope.services, answers, strict=True))}


def _write(path: Path, doc: Any) -> None:
    path.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m orchestrator.snapshots.capture",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--run-dir", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--scenario", required=True, help="scenario id (recorded, never read)")
    parser.add_argument("--spec-version", type=int, required=True)
    parser.add_argument("--tsdb", type=Path, default=None, help="the raw TSDB snapshot copied out of Prometheus")
    parser.add_argument("--remove-tsdb", action="store_true", help="delete --tsdb afterwards, whatever happens")
    parser.add_argument("--frozen-now", type=float, default=None, help="Unix time of handover (default: now)")
    parser.add_argument("--window-start", type=float, default=None,
                        help="start of the evidence window (default: --since, else the oldest evidence)")
    parser.add_argument("--since", type=float, default=None, help="the run's visible window start (campaigns)")
    args = parser.parse_args(argv)
    if args.out.exists() and (not args.out.is_dir() or any(args.out.iterdir())):
        parser.error(f"--out {args.out} exists and is not an empty directory")
    try:
        info = capture(args.run_dir, args.out, scenario_id=args.scenario, spec_version=args.spec_version,
                       raw_tsdb=args.tsdb, frozen_now=args.frozen_now, window_start=args.window_start,
                       visible_since=args.since)
    except BaseException:
        shutil.rmtree(args.out, ignore_errors=True)
        raise
    finally:
        if args.remove_tsdb and args.tsdb is not None:
            shutil.rmtree(args.tsdb, ignore_errors=True)
    json.dump({"snapshot_id": info.snapshot_id, "path": str(info.path), "families": list(info.families),
               "files": len(info.files), "bytes": sum(int(f["size"]) for f in info.files.values())}, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
