"""Capture a live run at handover into a snapshot directory: the Python half of roles/snapshot_record.

    python -m orchestrator.snapshots.capture --run-dir RUN --out DIR --scenario ID --spec-version N \
        [--tsdb RAW_TSDB] [--frozen-now T] [--window-start T] [--since T]

The role has already copied the run Prometheus's TSDB snapshot to RAW_TSDB (outside DIR). This module reads the
world exactly as the run's tool gateway would at the frozen now, through the gateway's own code (its context,
scope, tool handlers and the telemetry store's rules), and writes what the replay gateway will serve:

* alerts.json, services.json: the answers of get_alerts (the alerts Prometheus's `ALERTS` series says were
  firing at the frozen now, each as the handover's or the capture's read of Alertmanager gave it, else rendered
  from the TSDB; without such a record, the handover's read completed by the capture's), list_services and
  describe_service (every visible service), with today's scope and redaction;
* topology.json: the visible declared topology and the service calls measured from the window's traces;
* telemetry/: log records and spans of the window in TelemetryStore's layout, without the machinery's records
  (`Scope.hidden_services`), so a TelemetryStore pointed at it answers as the live gateway did;
* metrics/tsdb/: the TSDB of the evidence window without the machinery's series (the gateway's `visible_series`
  rule), rewritten by a private Prometheus;
* changes.json: the change journal's entries up to the frozen now (within the visible window on a shared
  environment); browser/: a copy of the browser capture the live gateway serves (the latest in the window);
* billing/<table>.parquet: the billing table a FinOps data environment serves (every row, zstd; DuckDB store);
* manifest.json: the agent's manifest without token, URLs, endpoints, run handle, deadline or paths.

It never opens the scenario's ground truth, the run's `state/` (saved fault state) or the spec's faults; families
the scenario masks (observability off) are not recorded at all. snapshot.json is written last (format.write_index).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import math
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

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


PromGet = Callable[[str, dict[str, str]], Any]
"""One Prometheus HTTP API GET (path, params) -> the decoded JSON body (`{"status", "data"}`)."""

ALERTS_LOOKBACK_S = 3600
"""How far back the capture reads the `ALERTS` series to find when a firing alert's current streak began."""
RESEND_DELAY_S = 60.0
"""Prometheus's default `--rules.alert.resend-delay`: a firing alert is sent to Alertmanager again (with its
annotations rendered anew) once this long has passed since it was last sent."""
DEFAULT_EVAL_INTERVAL_S = 60.0
"""Prometheus's default evaluation interval, when the rules API does not say."""


def _data(body: Any) -> Any:
    return body.get("data") if isinstance(body, dict) else None


def _label_key(labels: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((str(k), str(v)) for k, v in labels.items()))


def go_g4(value: float) -> str:
    """Go's `%.4g` (Python's printf `g` follows the same rules: 4 significant digits, trailing zeros dropped)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return f"{value:.4g}"


def humanize(value: float) -> str:
    """Prometheus's `humanize` template function (SI prefixes)."""
    if value == 0 or math.isnan(value) or math.isinf(value):
        return go_g4(value)
    if abs(value) >= 1:
        prefix = ""
        for p in ("k", "M", "G", "T", "P", "E", "Z", "Y"):
            if abs(value) < 1000:
                break
            prefix, value = p, value / 1000
        return f"{go_g4(value)}{prefix}"
    prefix = ""
    for p in ("m", "u", "n", "p", "f", "a", "z", "y"):
        if abs(value) >= 1:
            break
        prefix, value = p, value * 1000
    return f"{go_g4(value)}{prefix}"


def humanize_1024(value: float) -> str:
    """Prometheus's `humanize1024` template function (binary prefixes)."""
    if abs(value) <= 1 or math.isnan(value) or math.isinf(value):
        return go_g4(value)
    prefix = ""
    for p in ("ki", "Mi", "Gi", "Ti", "Pi", "Ei", "Zi", "Yi"):
        if abs(value) < 1024:
            break
        prefix, value = p, value / 1024
    return f"{go_g4(value)}{prefix}"


def humanize_duration(value: float) -> str:
    """Prometheus's `humanizeDuration` template function."""
    if math.isnan(value) or math.isinf(value):
        return go_g4(value)
    if value == 0:
        return f"{go_g4(value)}s"
    if abs(value) >= 1:
        sign = "-" if value < 0 else ""
        value = abs(value)
        whole = int(value)
        seconds, minutes, hours, days = whole % 60, whole // 60 % 60, whole // 3600 % 24, whole // 86400
        if days:
            return f"{sign}{days}d {hours}h {minutes}m {seconds}s"
        if hours:
            return f"{sign}{hours}h {minutes}m {seconds}s"
        if minutes:
            return f"{sign}{minutes}m {seconds}s"
        return f"{sign}{go_g4(value)}s"
    prefix = ""
    for p in ("m", "u", "n", "p", "f", "a", "z", "y"):
        if abs(value) >= 1:
            break
        prefix, value = p, value * 1000
    return f"{go_g4(value)}{prefix}s"


TEMPLATE_FUNCTIONS: dict[str, Callable[[float], str]] = {
    "humanize": humanize, "humanize1024": humanize_1024, "humanizeDuration": humanize_duration,
    "humanizePercentage": lambda v: f"{go_g4(v * 100)}%"}
_ACTION = re.compile(r"\{\{-?\s*(.*?)\s*-?\}\}")
_LABEL_REF = re.compile(r"^\$labels\.([A-Za-z_][A-Za-z0-9_]*)$")


def render_annotation(template: str, labels: dict[str, str], value: float | None) -> str | None:
    """An alerting rule's annotation template rendered as Prometheus renders it, for the subset OpsBench's rules
    use: `{{ $labels.NAME }}`, `{{ $value }}` and `{{ $value | FUNCTION }}` (humanize, humanize1024,
    humanizeDuration, humanizePercentage). None when the template uses anything else (no guessed text)."""
    failed = False

    def action(match: re.Match[str]) -> str:
        nonlocal failed
        parts = [p.strip() for p in match[1].split("|")]
        label = _LABEL_REF.match(parts[0])
        if label and len(parts) == 1:
            return labels.get(label[1], "")
        if parts[0] == "$value" and value is not None and len(parts) <= 2:
            if len(parts) == 1:
                return go_g4(value) if math.isnan(value) or math.isinf(value) else repr(float(value)).removesuffix(".0")
            function = TEMPLATE_FUNCTIONS.get(parts[1])
            if function is not None:
                return function(value)
        failed = True
        return ""

    text = _ACTION.sub(action, template)
    return None if failed else text


def rfc3339_ms(at: float) -> str:
    """A time as Alertmanager writes `startsAt` (UTC, milliseconds, trailing zeros dropped: Go's RFC3339Nano)."""
    moment = datetime.fromtimestamp(round(at, 3), UTC)
    fraction = f"{moment.microsecond // 1000:03d}".rstrip("0")
    return moment.strftime("%Y-%m-%dT%H:%M:%S") + (f".{fraction}" if fraction else "") + "Z"


def _streak_start(times: list[float], last: float, interval: float) -> float:
    """When the run of evaluations ending at `last` began: walk back while consecutive samples are at most 1.5
    evaluation intervals apart (a resolved alert leaves a staleness marker, so a gap ends the run)."""
    earlier = sorted(t for t in times if t <= last)
    start = last
    for previous in reversed(earlier[:-1] if earlier and earlier[-1] == last else earlier):
        if start - previous > 1.5 * interval:
            break
        start = previous
    return start


def _last_send(times: list[float], start: float, last: float) -> float:
    """When Prometheus last sent the alert to Alertmanager (with annotations rendered at that evaluation): at
    the streak's start, then at the first evaluation more than `RESEND_DELAY_S` after the previous send."""
    sent = start
    for at in sorted(t for t in times if start <= t <= last):
        if at - sent > RESEND_DELAY_S:
            sent = at
    return sent


def _alerting_rules(get: PromGet) -> dict[str, list[dict[str, Any]]]:
    """Alerting rules by alert name (query, labels, annotation templates, the group's interval); none when the
    rules API does not answer (a frozen Prometheus has no rules)."""
    try:
        groups = (_data(get("/api/v1/rules", {"type": "alert"})) or {}).get("groups") or []
    except (ToolError, AttributeError):
        return {}
    rules: dict[str, list[dict[str, Any]]] = {}
    for group in groups:
        for rule in group.get("rules") or []:
            if rule.get("type") == "alerting" and rule.get("name"):
                rules.setdefault(str(rule["name"]), []).append(
                    {**rule, "interval": float(group.get("interval") or DEFAULT_EVAL_INTERVAL_S)})
    return rules


def _external_labels(get: PromGet) -> dict[str, str]:
    """Prometheus's `global.external_labels`: added to every alert it sends (not to the `ALERTS` series)."""
    try:
        config = yaml.safe_load((_data(get("/api/v1/status/config", {})) or {}).get("yaml") or "") or {}
    except (ToolError, AttributeError, yaml.YAMLError):
        return {}
    external = (config.get("global") or {}).get("external_labels") if isinstance(config, dict) else None
    return {str(k): str(v) for k, v in external.items()} if isinstance(external, dict) else {}


def _rule_value(get: PromGet, rule: dict[str, Any], labels: dict[str, str], at: float) -> float | None:
    """The value of `rule`'s expression at `at` for the series whose labels the alert carries."""
    try:
        result = (_data(get("/api/v1/query", {"query": str(rule.get("query") or ""), "time": f"{at:.3f}"}))
                  or {}).get("result") or []
    except (ToolError, AttributeError):
        return None
    for sample in result:
        metric = {k: v for k, v in (sample.get("metric") or {}).items() if k != "__name__"}
        if all(labels.get(k) == v for k, v in metric.items()):
            try:
                return float(sample["value"][1])
            except (KeyError, IndexError, TypeError, ValueError):
                return None
    return None


def _is_alert(metric: dict[str, Any]) -> bool:
    return metric.get("__name__", "ALERTS") == "ALERTS" and bool(metric.get("alertname"))


def firing_in_tsdb(get: PromGet, now: float) -> list[dict[str, Any]] | None:
    """The alerts firing at `now` by Prometheus's own record, `ALERTS{alertstate="firing"}` evaluated at `now`,
    in get_alerts' item shape: labels as Alertmanager has them (external labels added), `startsAt` when the
    current firing streak began (Prometheus sends that evaluation's time as startsAt), annotations rendered from
    the rule's templates at the evaluation Prometheus last sent them (empty when the rules API does not answer or
    a template is beyond `render_annotation`), Alertmanager's fingerprint. None when Prometheus recorded no
    firing alert at all in the last `ALERTS_LOOKBACK_S`: no record to judge by."""
    ranged = (_data(get("/api/v1/query", {"query": f'ALERTS{{alertstate="firing"}}[{ALERTS_LOOKBACK_S}s]',
                                          "time": f"{now:.3f}"})) or {}).get("result") or []
    ranged = [s for s in ranged if _is_alert(s.get("metric") or {})]
    if not ranged:
        return None
    instant = (_data(get("/api/v1/query", {"query": 'ALERTS{alertstate="firing"}', "time": f"{now:.3f}"}))
               or {}).get("result") or []
    history = {_label_key(s.get("metric") or {}): [float(v[0]) for v in s.get("values") or []] for s in ranged}
    rules = _alerting_rules(get)
    external = _external_labels(get)
    answer = []
    for sample in instant:
        metric = {str(k): str(v) for k, v in (sample.get("metric") or {}).items()}
        if not _is_alert(metric):
            continue
        last = float(sample["value"][0])
        times = history.get(_label_key(metric), [last])
        labels = {**external, **{k: v for k, v in metric.items() if k not in ("__name__", "alertstate")}}
        candidates = [r for r in rules.get(labels.get("alertname", ""), [])
                      if all(labels.get(k) == str(v) for k, v in (r.get("labels") or {}).items())]
        rule = candidates[0] if candidates else None
        ordered = sorted(times)
        gaps = [b - a for a, b in itertools.pairwise(ordered) if b > a]
        interval = float(rule["interval"]) if rule else min(gaps or [DEFAULT_EVAL_INTERVAL_S])
        start = _streak_start(times, last, interval)
        annotations: dict[str, str] = {}
        if rule is not None:
            value = _rule_value(get, rule, labels, _last_send(times, start, last))
            for name, template in (rule.get("annotations") or {}).items():
                text = render_annotation(str(template), labels, value)
                if text is not None:
                    annotations[str(name)] = text
        answer.append({"alertname": labels.get("alertname"), "labels": labels, "annotations": annotations,
                       "startsAt": rfc3339_ms(start), "state": "active", "fingerprint": fingerprint(labels)})
    return answer


def merge_alerts(*sources: list[dict[str, Any]], only: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Alert lists in get_alerts' item shape merged by label set, the earlier source winning (its annotations
    and startsAt), sorted as get_alerts sorts. `only`: keep just the label sets it has."""
    merged: dict[tuple[tuple[str, str], ...], dict[str, Any]] = {}
    for source in sources:
        for alert in source:
            merged.setdefault(_label_key(alert.get("labels") or {}), alert)
    if only is not None:
        keep = {_label_key(a.get("labels") or {}) for a in only}
        merged = {k: v for k, v in merged.items() if k in keep}
    return sorted(merged.values(), key=lambda a: (str(a["startsAt"]), str(a["alertname"]), str(a["fingerprint"])))


def alerts_at_frozen_now(known: list[dict[str, Any]], firing: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    """The get_alerts answer at the frozen now. Which alerts: those Prometheus's `ALERTS` series says were firing
    at the frozen now (`firing`; Alertmanager's active list follows Prometheus's evaluations within milliseconds,
    so this is what a get_alerts call at the frozen now answered), including one that began after the handover's
    read and resolved before the capture, and excluding one the handover read that resolved before the frozen
    now. Each alert as Alertmanager gave it (`known`: the handover's read, then the capture's listing) when it
    did, else as rendered from the TSDB. Without a record (`firing` None), `known` as it is."""
    if firing is None:
        return merge_alerts(known)
    return merge_alerts(known, firing, only=firing)


ITEM_KEYS = ("alertname", "labels", "annotations", "startsAt", "state", "fingerprint")
"""The key order of a get_alerts item as the live source builds it (LiveEvidence.alerts)."""


def as_served(alert: dict[str, Any]) -> dict[str, Any]:
    """An alert with its keys in the live item's order and its labels and annotations sorted by name, as
    Alertmanager's JSON has them (Go writes a map's keys sorted): the replay's get_alerts answer is then the live
    one byte for byte, not only equal."""
    item = {k: alert.get(k) for k in ITEM_KEYS}
    for key in ("labels", "annotations"):
        value = item[key]
        if isinstance(value, dict):
            item[key] = dict(sorted(value.items()))
    return item


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
            if "prometheus" in ctx.endpoints:
                # Alertmanager is read at handover (before the frozen now) and here (after it): an alert that began
                # or ended in between is wrong in one list or both; Prometheus's record of the frozen now is not.
                alerts = alerts_at_frozen_now(alerts, firing_in_tsdb(
                    lambda path, params: ctx.evidence.prometheus(path, params), now))
            (out / fmt.ALERTS).write_text(json.dumps([as_served(a) for a in alerts], indent=2) + "\n")
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
        if _serves_billing(ctx):
            # The FinOps data environment's evidence is its billing table: all of it (the agent may query any
            # charge period), as Parquet; the replay loads it into the same read-only DuckDB tool.
            assert ctx.billing_file is not None
            from orchestrator.finops.sql import export_table

            table = ctx.billing_table
            export_table(ctx.billing_file, table, out / fmt.BILLING_DIR / f"{table}.parquet")
            families.append("billing")
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


def _serves_billing(ctx: RunContext) -> bool:
    """Whether the run's gateway serves a billing table from a DuckDB file (the FinOps data environment's default
    store; a PostgreSQL store is not recorded: its answers differ in dialect from the DuckDB replay's)."""
    offered = ctx.offered_families
    return (ctx.billing_file is not None and ctx.billing_postgres is None
            and (offered is None or "billing" in offered))


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
