"""The CUJ capture: what one run of journeys leaves on disk, and the reader other code uses.

Layout under the output directory (every JSON file UTF-8, written atomically)::

    cuj.json                      index: version, base_url, started, finished, duration_s, chromium_version,
                                  journeys [{name, status, failed_step, duration_s, message}], timed_out_at
    runner.log                    the browser worker's stderr (Chromium's own messages), when it wrote any
    <journey>/report.json         {journey, description, status, failed_step, message, started, duration_s, vars,
                                  steps: [{index, name, status, assertion, expected, actual, error, message, url,
                                  started, duration_ms, screenshot, dom, evidence_id}]}
    <journey>/step-NN-<step>.png  viewport screenshot at the end of each executed step  (screenshot:<j>:<step>)
    <journey>/dom-NN-<step>.html  the page's HTML at the end of each executed step        (dom:<j>:<step>)
    <journey>/console.json        [{id console:<j>:<step>:<n>, step, type log|warning|error|pageerror, text,
                                  location {url, line, column}, time}]
    <journey>/network.json        [{id net:<j>:<step>:<n>, step, method, url, resource_type, status, failure,
                                  blocked, started, duration_ms, request_headers, response_headers,
                                  response_size, request_body, response_body}]
    <journey>/storage.json        [{id storage:<j>:<step>:cookie|local|session:<name>, step, kind, name, value,
                                  (cookies:) domain, path, httpOnly}]
    <journey>/spans.json          [{id span:<j>:<step>:<n>, step, traceId, spanId, parentSpanId, name, kind, ...}]

Statuses: a journey is passed|failed|error|timeout, a step passed|failed|skipped|error (a journey stops at its
first step that is not passed; the later ones are skipped). ``<n>`` counts from 1 within a step. Steps are numbered
from 1 (``NN`` is two digits). Times are Unix epoch seconds (spans keep the page's epoch milliseconds).

This module has no dependency on the browser or on the tool gateway: ``load_capture(dir)`` reads a capture
anywhere (a run directory, a snapshot's copy).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

VERSION = 1
INDEX = "cuj.json"
LOG = "runner.log"
REPORT = "report.json"
FAMILIES = ("console", "network", "storage", "spans")
"""The per-journey evidence lists, each in ``<journey>/<family>.json``."""
JOURNEY_STATUSES = ("passed", "failed", "error", "timeout")
STEP_STATUSES = ("passed", "failed", "skipped", "error")
DOM_CAP = 256 * 1024
REQUEST_BODY_CAP = 2 * 1024
RESPONSE_BODY_CAP = 4 * 1024
STORAGE_VALUE_CAP = 2 * 1024
ID_PREFIX = {"console": "console", "network": "net", "storage": "storage", "spans": "span"}

def screenshot_name(index: int, step: str) -> str:
    return f"step-{index:02d}-{step}.png"

def dom_name(index: int, step: str) -> str:
    return f"dom-{index:02d}-{step}.html"

def step_id(journey: str, step: str) -> str:
    return f"cuj:{journey}:{step}"

def write_json(path: Path, data: Any) -> None:
    """Write ``data`` as JSON atomically (a reader never sees half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        os.fchmod(fd, 0o644)  # readable like the screenshots (mkstemp makes 0600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=1, ensure_ascii=False, default=str)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise

def write_bytes(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)

def cap_text(value: str, cap: int) -> tuple[str, bool]:
    """``value`` cut to at most ``cap`` UTF-8 bytes (on a character boundary), and whether it was cut."""
    raw = value.encode("utf-8")
    if len(raw) <= cap:
        return value, False
    return raw[:cap].decode("utf-8", errors="ignore"), True

class CaptureError(LookupError):
    """Something asked of a capture that it does not have; the message names what it does have."""

    def __str__(self) -> str:  # LookupError would show the repr of the message
        return str(self.args[0]) if self.args else ""

@dataclass
class Capture:
    """A CUJ capture on disk (``load_capture``). Journeys and steps are named as in the index and reports;
    every lookup of an unknown one raises CaptureError listing the known ones."""

    root: Path
    index: dict[str, Any]
    _cache: dict[tuple[str, str], Any] = field(default_factory=dict, repr=False)

    # -- the run ---------------------------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        return str(self.index.get("base_url", ""))

    @property
    def chromium_version(self) -> str | None:
        v = self.index.get("chromium_version")
        return str(v) if v else None

    def journeys(self) -> list[str]:
        """The journey names, in run order."""
        return [str(j["name"]) for j in self.index.get("journeys", [])]

    def summary(self, journey: str) -> dict[str, Any]:
        """The index entry of a journey: name, status, failed_step, duration_s, message."""
        for entry in self.index.get("journeys", []):
            if entry.get("name") == journey:
                return dict(entry)
        raise CaptureError(f"no journey {journey!r} in this capture; its journeys: {', '.join(self.journeys())}")

    def failed(self) -> list[str]:
        """The journeys that did not pass."""
        return [j["name"] for j in self.index.get("journeys", []) if j.get("status") != "passed"]

    # -- one journey -----------------------------------------------------------------------------------------
    def report(self, journey: str) -> dict[str, Any]:
        """``<journey>/report.json``."""
        self.summary(journey)  # known?
        data = self._json(journey, REPORT, None)
        if not isinstance(data, dict):
            raise CaptureError(f"journey {journey!r} has no report ({journey}/{REPORT} is missing)")
        return data

    def steps(self, journey: str) -> list[dict[str, Any]]:
        steps = self.report(journey).get("steps", [])
        return list(steps) if isinstance(steps, list) else []

    def step_names(self, journey: str) -> list[str]:
        return [str(s["name"]) for s in self.steps(journey)]

    def step(self, journey: str, step: str) -> dict[str, Any]:
        """One step's record (status, failing assertion, expected/actual, url, timing, file names)."""
        for record in self.steps(journey):
            if record.get("name") == step:
                return dict(record)
        raise CaptureError(f"journey {journey!r} has no step {step!r}; its steps: "
                           f"{', '.join(self.step_names(journey))}")

    def screenshot(self, journey: str, step: str) -> Path:
        """The PNG taken at the end of the step."""
        return self._step_file(journey, step, "screenshot")

    def dom(self, journey: str, step: str) -> str:
        """The page's HTML at the end of the step (capped at 256 KiB)."""
        return self._step_file(journey, step, "dom").read_text(encoding="utf-8", errors="replace")

    def _step_file(self, journey: str, step: str, what: str) -> Path:
        record = self.step(journey, step)
        name = record.get(what)
        if not name:
            why = (f"it was {record.get('status')}" if record.get("status") in ("skipped", "error")
                   else "none was taken")
            executed = [s["name"] for s in self.steps(journey) if s.get(what)]
            raise CaptureError(f"journey {journey!r} step {step!r} has no {what} ({why}); steps with one: "
                               f"{', '.join(executed) or 'none'}")
        path = self._inside(self.root / journey / str(name))
        if not path.is_file():
            raise CaptureError(f"the {what} of journey {journey!r} step {step!r} is missing ({journey}/{name})")
        return path

    # -- evidence lists --------------------------------------------------------------------------------------
    def console(self, journey: str | None = None, step: str | None = None) -> list[dict[str, Any]]:
        return self._entries("console", journey, step)

    def network(self, journey: str | None = None, step: str | None = None) -> list[dict[str, Any]]:
        return self._entries("network", journey, step)

    def spans(self, journey: str | None = None, step: str | None = None) -> list[dict[str, Any]]:
        return self._entries("spans", journey, step)

    def storage(self, journey: str | None = None, step: str | None = None) -> list[dict[str, Any]]:
        return self._entries("storage", journey, step)

    def _entries(self, family: str, journey: str | None, step: str | None) -> list[dict[str, Any]]:
        if journey is None:
            if step is not None:
                raise CaptureError("a step filter needs its journey (step names repeat across journeys)")
            return [e for j in self.journeys() for e in self._entries(family, j, None)]
        if step is not None:
            self.step(journey, step)  # known?
        else:
            self.summary(journey)
        data = self._json(journey, f"{family}.json", [])
        entries = [e for e in data if isinstance(e, dict)] if isinstance(data, list) else []
        return [dict(e, journey=journey) for e in entries if step is None or e.get("step") == step]

    def find(self, evidence_id: str) -> dict[str, Any]:
        """The evidence an id names: a step record (``cuj:``), an entry (``console:``, ``net:``, ``storage:``,
        ``span:``), a screenshot (``screenshot:``: its ``path``) or a page's HTML (``dom:``: its ``html``)."""
        kind, _, rest = evidence_id.partition(":")
        journey, _, tail = rest.partition(":")
        if not journey:
            raise CaptureError(f"{evidence_id!r} is not a CUJ evidence id (kind:journey:step[...])")
        step = tail.split(":", 1)[0]
        if kind == "cuj":
            return {"id": evidence_id, "journey": journey, **self.step(journey, tail)}
        if kind == "screenshot":
            return {"id": evidence_id, "journey": journey, "step": tail, "path": str(self.screenshot(journey, tail))}
        if kind == "dom":
            return {"id": evidence_id, "journey": journey, "step": tail, "html": self.dom(journey, tail)}
        families = {prefix: family for family, prefix in ID_PREFIX.items()}
        if kind not in families:
            raise CaptureError(f"unknown evidence kind {kind!r} in {evidence_id!r}; kinds: cuj, screenshot, dom, "
                               f"{', '.join(families)}")
        for entry in self._entries(families[kind], journey, step or None):
            if entry.get("id") == evidence_id:
                return entry
        raise CaptureError(f"no {families[kind]} evidence {evidence_id!r} in journey {journey!r}")

    # -- files -----------------------------------------------------------------------------------------------
    def _inside(self, path: Path) -> Path:
        resolved = path.resolve()
        if not resolved.is_relative_to(self.root.resolve()):
            raise CaptureError(f"{path} is outside the capture")
        return resolved

    def _json(self, journey: str, name: str, default: Any) -> Any:
        key = (journey, name)
        if key not in self._cache:
            path = self._inside(self.root / journey / name)
            try:
                self._cache[key] = json.loads(path.read_text(encoding="utf-8"))
            except FileNotFoundError:
                return default
            except ValueError as exc:
                raise CaptureError(f"{journey}/{name} is not valid JSON: {exc}") from None
        return self._cache[key]

def load_capture(directory: str | Path) -> Capture:
    """The capture in ``directory`` (CaptureError when it holds none)."""
    root = Path(directory)
    index_file = root / INDEX
    try:
        index = json.loads(index_file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CaptureError(f"{root} holds no CUJ capture ({INDEX} is missing)") from None
    except ValueError as exc:
        raise CaptureError(f"{index_file} is not valid JSON: {exc}") from None
    if not isinstance(index, dict) or not isinstance(index.get("journeys"), list):
        raise CaptureError(f"{index_file} is not a CUJ capture index (no journeys list)")
    return Capture(root, index)

Reader = Callable[[str | Path], Capture]
