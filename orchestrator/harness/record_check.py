"""`opsbench snapshot record --check`: is a replay worth the live trial it stands for?

With `--check` a recording runs the scenario's baseline agent live right after handover (the snapshot's frozen
now), then records the snapshot, then collects and evaluates the live trial as a run does; once every recording
is made, each new snapshot is replayed once with the same baseline agent. The two trials must agree on the
diagnosis (incident or not, the entities and which are root causes, the propagation chain) and on every score
that is not a time (a time measures when the agent ran, not what it concluded). A difference is reported with
what differs, and makes the command exit non-zero.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from orchestrator import store
from orchestrator.progress import Progress

TIME_KEY = re.compile(r"(^|_)(time|mttd|mttr|ttp|seconds|elapsed|duration|latency|s)($|_)|_at$")
"""Score keys that measure when, not what (`time_to_process`, `mttd`, `elapsed_s`, `started_at`, ...)."""
SKIPPED_KEYS = frozenset({"reason", "reasons", "detail", "trajectory_bad_lines"})
"""Free text and bookkeeping, not scores."""


@dataclass
class Check:
    """One recording's live trial against its replay."""

    scenario: str
    snapshot_id: str
    live_run: str
    replay_run: str = ""
    live: dict[str, Any] = field(default_factory=dict)
    replay: dict[str, Any] = field(default_factory=dict)
    differences: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.differences


def diagnosis(output: dict[str, Any] | None) -> dict[str, Any]:
    """What a diagnosis output concludes, in a comparable form (order and wording aside)."""
    if not isinstance(output, dict):
        return {"submitted": False}
    entities = [e for e in output.get("entities") or [] if isinstance(e, dict)]
    return {"submitted": True, "incident": output.get("incident"),
            "root_causes": sorted(str(e.get("id")) for e in entities if e.get("root_cause")),
            "entities": sorted(str(e.get("id")) for e in entities),
            "propagations": sorted(f"{p.get('source')}->{p.get('target')}"
                                   for p in output.get("propagations") or [] if isinstance(p, dict))}


def scores(evaluations: dict[str, Any]) -> dict[str, Any]:
    """Every evaluator's scores without times and free text: what live and replay must share."""
    return {name: {k: v for k, v in sorted(result.items()) if k not in SKIPPED_KEYS and not TIME_KEY.search(k)}
            for name, result in sorted(evaluations.items()) if isinstance(result, dict)}


def differences(live: dict[str, Any], replay: dict[str, Any]) -> list[str]:
    """`key: live X, replay Y` for every field of the two views (`diagnosis` + `scores`) that differs."""
    out: list[str] = []

    def walk(a: Any, b: Any, path: str) -> None:
        if isinstance(a, dict) and isinstance(b, dict):
            for key in sorted(set(a) | set(b)):
                walk(a.get(key), b.get(key), f"{path}.{key}" if path else key)
        elif a != b:
            out.append(f"{path}: live {json.dumps(a)}, replay {json.dumps(b)}")

    walk(live, replay, "")
    return out


def trial_view(run_id: str, evaluations: dict[str, Any] | None = None) -> dict[str, Any]:
    """A finished trial's diagnosis (its collected output) and scores, from its run record."""
    row = store.get_run(run_id) if run_id else None
    if row is None:
        return {"diagnosis": diagnosis(None), "scores": scores(evaluations or {})}
    record = Path(row["run_dir"])
    if evaluations is None:
        state = json.loads((record / "run.json").read_text())
        evaluations = state["results"].get("evaluate", {}).get("stats", {}).get("evaluations", {})
    output_file = record / "artifacts" / "agent-output.json"
    try:
        output = json.loads(output_file.read_text()) if output_file.is_file() else None
    except ValueError:
        output = None
    return {"diagnosis": diagnosis(output), "scores": scores(evaluations or {})}


def check(scenario: str, snapshot: Path, snapshot_id: str, live_run: str, progress: Progress,
          replay: Callable[..., Sequence[Any]] | None = None) -> Check:
    """Replay `snapshot` once with the scenario's baseline agent and compare it with the live trial `live_run`."""
    if replay is None:
        from orchestrator.harness.replay import replay as run_replay

        replay = run_replay
    result = Check(scenario, snapshot_id, live_run, live=trial_view(live_run))
    live_state = store.get_run(live_run)
    if live_state is None or live_state["status"] != "completed":
        result.differences.append(f"the live trial {live_run} did not complete "
                                  f"({live_state['status'] if live_state else 'no record'})")
        return result
    records = replay([snapshot], None, 1, progress=progress, purpose="record")
    rec = records[0] if records else None
    if rec is None or rec.status != "completed":
        result.differences.append("the replay did not complete" + (f": {rec.status} {rec.reason}" if rec else ""))
        return result
    result.replay_run = rec.run_id
    result.replay = trial_view(rec.run_id, rec.scores)
    result.differences = differences(result.live, result.replay)
    return result


def as_dicts(checks: Sequence[Check]) -> list[dict[str, Any]]:
    return [{**asdict(c), "ok": c.ok} for c in checks]


def _short(view: dict[str, Any]) -> tuple[str, str]:
    diag, sc = view.get("diagnosis", {}), view.get("scores", {}).get("diagnosis", {})
    roots = ",".join(diag.get("root_causes", [])) if diag.get("submitted") else "(no output)"
    return roots or "-", f"fl_pass {sc.get('fl_pass', '-')} ntam_fl {sc.get('ntam_fl', '-')}"


def render(checks: Sequence[Check]) -> str:
    """The live-vs-replay table, then each difference."""
    head = ("SCENARIO", "SNAPSHOT", "LIVE ROOT CAUSE", "REPLAY ROOT CAUSE", "LIVE SCORES", "REPLAY SCORES", "SAME")
    rows = []
    for c in checks:
        live_root, live_scores = _short(c.live)
        replay_root, replay_scores = _short(c.replay) if c.replay else ("-", "-")
        rows.append((c.scenario, c.snapshot_id, live_root, replay_root, live_scores, replay_scores,
                     "yes" if c.ok else "NO"))
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    lines = ["  ".join(x.ljust(w) for x, w in zip(row, widths, strict=True)).rstrip() for row in [head, *rows]]
    for c in checks:
        lines += [f"  {c.snapshot_id}: {d}" for d in c.differences]
    lines.append(f"{sum(c.ok for c in checks)}/{len(checks)} replay(s) match their live trial")
    return "\n".join(lines)
