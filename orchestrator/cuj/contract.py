"""Outcome contracts: what a scenario's user-visible symptom must look like in a browser capture.

A scenario states the symptom it must produce (roles/check_cuj's arguments): either every journey passes (a healthy
baseline), or named journeys fail at named steps, and the evidence families that must carry the symptom there:

* ``network``: a request of the journey, up to the failing step, failed, was blocked, answered >= 400 or took >= 5 s;
* ``console``: an error or uncaught page error was logged up to the failing step;
* ``spans``: a frontend span of the journey, up to the failing step, has status error or lasted >= 5 s;
* ``screenshot``, ``dom``, ``storage``: the failing step has a screenshot, a DOM snapshot, storage records.

`hold` runs the journeys until the contract holds or the time is up (a fault can take a few seconds to show: a
container stopping, a flag being re-read), keeping only the capture of the last attempt, where the gateway's browser
tools find it: ``<root>/<unix ms>-<label>/``. Used as ``python -m orchestrator.cuj.contract`` by roles/check_cuj.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .capture import Capture, load_capture
from .errors import CujError
from .journeys import select_journeys
from .runner import DEFAULT_ACTION_TIMEOUT, run

EVIDENCE = ("network", "console", "spans", "screenshot", "dom", "storage")
SLOW_MS = 5000
MAX_ATTEMPT_S = 150.0


@dataclass(frozen=True)
class Failing:
    journey: str
    step: str | None = None


@dataclass(frozen=True)
class Contract:
    expect: str = "pass"
    """`pass`: every journey run passes; `fail`: each of `failing` fails (at its step, when given)."""
    journeys: tuple[str, ...] = ()
    """The journeys to run (default: every shop journey; a `fail` contract adds its failing ones)."""
    failing: tuple[Failing, ...] = ()
    evidence: tuple[str, ...] = ()

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Contract:
        """A contract from check_cuj's arguments; ValueError naming the field on bad input."""
        expect = str(data.get("expect") or "pass")
        if expect not in ("pass", "fail"):
            raise ValueError(f"expect: {expect!r} is neither 'pass' nor 'fail'")
        failing = []
        for i, item in enumerate(data.get("failing") or []):
            if not isinstance(item, dict) or not item.get("journey"):
                raise ValueError(f"failing[{i}]: needs a journey ({{journey: NAME, step: NAME}})")
            failing.append(Failing(str(item["journey"]), str(item["step"]) if item.get("step") else None))
        evidence = tuple(str(e) for e in data.get("evidence") or [])
        unknown = [e for e in evidence if e not in EVIDENCE]
        if unknown:
            raise ValueError(f"evidence: unknown families {unknown}; families: {', '.join(EVIDENCE)}")
        if expect == "fail" and not failing:
            raise ValueError("failing: an 'expect: fail' contract names at least one failing journey")
        if expect == "pass" and (failing or evidence):
            raise ValueError("failing/evidence: only an 'expect: fail' contract names failing journeys and evidence")
        journeys = tuple(dict.fromkeys([*(data.get("journeys") or []), *(f.journey for f in failing)]))
        select_journeys(list(journeys))  # CujError naming the known journeys for an unknown one
        return cls(expect, journeys, tuple(failing), evidence)


@dataclass
class Verdict:
    ok: bool
    detail: str
    problems: list[str] = field(default_factory=list)


def _upto(entries: list[dict[str, Any]], steps: list[str], step: str | None) -> list[dict[str, Any]]:
    """The entries of the steps up to and including `step` (all when None)."""
    if step is None or step not in steps:
        return entries
    kept = set(steps[:steps.index(step) + 1])
    return [e for e in entries if e.get("step") in kept]


def _carries(capture: Capture, family: str, journey: str, step: str | None) -> bool:
    steps = capture.step_names(journey)
    last = step or next((s["name"] for s in capture.steps(journey) if s.get("status") in ("failed", "error")), None)
    if family == "network":
        return any(bool(e.get("failure")) or bool(e.get("blocked")) or (e.get("status") or 0) >= 400
                   or (e.get("duration_ms") or 0) >= SLOW_MS for e in _upto(capture.network(journey), steps, last))
    if family == "console":
        return any(e.get("type") in ("error", "pageerror") for e in _upto(capture.console(journey), steps, last))
    if family == "spans":
        return any(e.get("status") == "error" or (e.get("endTime") or 0) - (e.get("startTime") or 0) >= SLOW_MS
                   for e in _upto(capture.spans(journey), steps, last))
    if last is None:
        return False
    record = capture.step(journey, last)
    if family in ("screenshot", "dom"):
        return bool(record.get(family))
    return bool(capture.storage(journey, last))


def judge(capture: Capture, contract: Contract) -> Verdict:
    """Whether the capture shows the contract's symptom (and only then: a healthy contract needs every journey
    passed)."""
    problems: list[str] = []
    if contract.expect == "pass":
        for name in capture.journeys():
            entry = capture.summary(name)
            if entry.get("status") != "passed":
                problems.append(f"journey {name} {entry.get('status')} at step {entry.get('failed_step')}: "
                                f"{entry.get('message') or ''}".strip())
        detail = "every journey passed" if not problems else "; ".join(problems)
        return Verdict(not problems, detail, problems)
    seen: list[str] = []
    for want in contract.failing:
        entry = capture.summary(want.journey)
        status, at = entry.get("status"), entry.get("failed_step")
        if status == "passed":
            problems.append(f"journey {want.journey} passed (expected it to fail"
                            f"{' at step ' + want.step if want.step else ''})")
            continue
        if want.step is not None and at != want.step:
            problems.append(f"journey {want.journey} {status} at step {at}, not at step {want.step}: "
                            f"{entry.get('message') or ''}".strip())
            continue
        missing = [f for f in contract.evidence if not _carries(capture, f, want.journey, want.step)]
        if missing:
            problems.append(f"journey {want.journey} {status} at step {at}, but the {', '.join(missing)} evidence "
                            "does not show it")
            continue
        seen.append(f"journey {want.journey} {status} at step {at}: {entry.get('message') or ''}".strip())
    detail = "; ".join(problems) if problems else "; ".join(seen)
    return Verdict(not problems, detail, problems)


def hold(base_url: str, root: Path, label: str, contract: Contract, timeout: float, *, interval: float = 2.0,
         action_timeout: float = DEFAULT_ACTION_TIMEOUT, progress: Callable[[str], None] | None = None
         ) -> dict[str, Any]:
    """Run the contract's journeys until it holds or `timeout` seconds pass; the last attempt's capture stays, in
    ``root/<unix ms>-<label>``. CujError when the browser cannot run at all."""
    started = time.monotonic()
    deadline = started + timeout
    journeys = select_journeys(list(contract.journeys))
    root.mkdir(parents=True, exist_ok=True)
    attempts, last_dir = 0, None
    while True:
        attempts += 1
        out = root / f"{int(time.time() * 1000)}-{label}"
        remaining = deadline - time.monotonic()
        result = run(base_url, out, journeys, timeout=max(min(remaining, MAX_ATTEMPT_S), 30.0),
                     action_timeout=action_timeout, progress=progress)
        if last_dir is not None:
            shutil.rmtree(last_dir, ignore_errors=True)
        last_dir = out
        verdict = judge(load_capture(out), contract)
        if verdict.ok or time.monotonic() + interval >= deadline:
            break
        time.sleep(interval)
    return {"ok": verdict.ok, "detail": verdict.detail, "attempts": attempts, "capture": str(out),
            "journeys": result.statuses(), "leftover_processes": len(result.leftovers),
            "waited_s": round(time.monotonic() - started, 1), "last_run_s": result.index.get("duration_s")}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m orchestrator.cuj.contract", description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--root", type=Path, required=True, help="where captures go (run_dir/browser)")
    parser.add_argument("--label", required=True, help="names the capture (the check's name)")
    parser.add_argument("--contract", required=True, help="JSON: {expect, journeys, failing, evidence}")
    parser.add_argument("--timeout", type=float, default=90.0)
    parser.add_argument("--interval", type=float, default=2.0)
    parser.add_argument("--action-timeout", type=float, default=DEFAULT_ACTION_TIMEOUT)
    args = parser.parse_args(argv)
    try:
        contract = Contract.from_dict(json.loads(args.contract))
        outcome = hold(args.base_url, args.root, args.label, contract, args.timeout, interval=args.interval,
                       action_timeout=args.action_timeout,
                       progress=lambda line: print(line, file=sys.stderr, flush=True))
    except (ValueError, CujError) as exc:
        print(f"check_cuj: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(outcome))
    return 0


if __name__ == "__main__":
    sys.exit(main())
