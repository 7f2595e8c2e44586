"""A run's trajectory in ATIF (Agent Trajectory Interchange Format, RFC 0001, as Harbor reads and writes it), so
the trajectory viewers and converters of that ecosystem take OpsBench runs: ``opsbench show RUN --atif``.

One ATIF document per run, built from what the run recorded (nothing is re-run):

- step 1, ``user``: what the agent was asked (a preset's prompt, from ``agent/preset.json``; else the manifest's
  tasks and alerts);
- one ``agent`` step per model call the recording proxy counted (``gateway/model-calls.jsonl``): its model,
  tokens (prompt tokens include the cached ones, as ATIF counts them), cost, latency, the text the model answered
  and, as ``tool_calls``, the calls it asked for (the CLI's own shell and file tools among them); the gateway calls
  logged after that call began and before the next one did are joined to the asked call they answer by tool name,
  their answers (``gateway/answers.jsonl``, or the refusal) in the step's ``observation``; the CLI's own tools'
  results are not recorded by OpsBench (``agent/cli.jsonl`` has them);
- an agent without counted model calls (a command agent, the baselines): one step per tool call, marked
  ``llm_call_count: 0``; tool calls before a preset's first model call get such a step too;
- ``final_metrics``: the totals; ``extra.opsbench``: the run, scenario, mode, status, the output and the scores.

The document is checked against ``orchestrator/schemas/atif.schema.json`` (harbor 0.25.0's models as JSON Schema) and
against the models' cross-field rules (``problems``) before it is written.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import jsonschema

from orchestrator.errors import OpsBenchError
from orchestrator.schemacheck import load_schema

VERSION = "ATIF-v1.7"
AGENT_ONLY = ("model_name", "reasoning_effort", "reasoning_content", "tool_calls", "metrics")
NOTES = ("Exported by OpsBench from the run's records: model turns from the recording model proxy (tokens, cost, "
         "latency, the text and tool calls of each reply, shortened), the answers of the tool gateway's calls "
         "(over 64 KiB cut); the results of the CLI's own tools (shell, files) are not recorded and have no "
         "observation. Steps with llm_call_count 0 are gateway calls no counted model call preceded.")


class AtifError(OpsBenchError):
    """A run that cannot be exported: its files missing, or an export that breaks the format (a bug)."""


def _iso(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _jsonl(*candidates: Path) -> list[dict[str, Any]]:
    """The JSON objects of the first file of ``candidates`` that exists (a trial's gateway dir, else artifacts)."""
    for path in candidates:
        if path.is_file():
            out = []
            for line in path.read_text(errors="replace").splitlines():
                try:
                    obj = json.loads(line)
                except ValueError:
                    continue
                if isinstance(obj, dict):
                    out.append(obj)
            return out
    return []


def read_object(path: Path) -> dict[str, Any]:
    """A JSON object file of a run, or {} when it is missing, unreadable or not an object."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def _ask(manifest: dict[str, Any]) -> str:
    tasks = [f"[{t.get('kind')}] {t.get('goal')}" for t in manifest.get("tasks") or [] if isinstance(t, dict)]
    alerts = [str((a.get("labels") or {}).get("alertname", "?")) for a in manifest.get("alerts") or []
              if isinstance(a, dict)]
    return "\n".join(["Tasks:", *tasks, "Alerts firing at handover: " + (", ".join(alerts) or "none")])


def _observation(call: dict[str, Any], answers: dict[str, dict[str, Any]]) -> str:
    if call.get("status") != "ok":
        error = call.get("error") if isinstance(call.get("error"), dict) else {}
        return json.dumps({"ok": False, "error": error or {"code": call.get("status")}})
    kept = answers.get(str(call.get("result_sha256")))
    if kept is None:
        return f"(answer not recorded: {call.get('result_bytes', '?')} bytes, sha256 {call.get('result_sha256')})"
    cut = f"...[{kept['cut']} more characters not recorded]" if kept.get("cut") else ""
    return str(kept.get("answer", "")) + cut


def _gateway_extra(call: dict[str, Any]) -> dict[str, Any]:
    extra: dict[str, Any] = {k: call[k] for k in ("status", "elapsed", "transport", "family") if k in call}
    extra["timestamp"] = _iso(float(call["ts"])) if isinstance(call.get("ts"), int | float) else None
    return extra


def _same_tool(asked: str, tool: str) -> bool:
    """Whether the name a model used (``mcp__opsbench__get_alerts``, ``mcp_opsbench_get_alerts``,
    ``opsbench_get_alerts``, ``mcp__opsbench.get_alerts``) is the gateway's tool ``tool``."""
    return asked == tool or asked.endswith(("_" + tool, "." + tool))


def _tool_step(calls: list[tuple[int, dict[str, Any]]], answers: dict[str, dict[str, Any]],
               asked: list[dict[str, Any]] | None = None, turn: int = 0) -> dict[str, Any]:
    """``tool_calls`` and ``observation`` of one step: the tool calls the model ``asked`` for in its reply (the
    CLI's own tools among them), each gateway call of ``calls`` (index in the trajectory, record) joined to the
    asked call it answers, and the gateway calls no asked call names as calls of their own."""
    tool_calls: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    for i, call in enumerate(asked or []):
        tool_calls.append({"tool_call_id": f"turn-{turn}-{i + 1}", "function_name": str(call.get("name")),
                           "arguments": call.get("arguments") if isinstance(call.get("arguments"), dict) else {},
                           "extra": {"via": "model"}})
    for index, call in calls:
        tool = str(call.get("tool"))
        match = next((c for c in tool_calls if c["extra"].get("via") == "model" and "gateway_call" not in c["extra"]
                      and _same_tool(c["function_name"], tool)), None)
        if match is None:
            match = {"tool_call_id": f"call-{index + 1}", "function_name": tool,
                     "arguments": call.get("args") if isinstance(call.get("args"), dict) else {}, "extra": {}}
            tool_calls.append(match)
        match["extra"].update(_gateway_extra(call), gateway_call=index + 1)
        results.append({"source_call_id": match["tool_call_id"], "content": _observation(call, answers)})
    out: dict[str, Any] = {"tool_calls": tool_calls} if tool_calls else {}
    if results:
        out["observation"] = {"results": results}
    return out


def _metrics(call: dict[str, Any]) -> dict[str, Any]:
    extra = {k: call[k] for k in ("latency", "ttfb", "cache_write_tokens", "status", "http_status", "stream",
                                  "refused", "budget") if call.get(k) is not None}
    cost = call.get("cost_usd")
    return {"prompt_tokens": int(call.get("input_tokens") or 0),
            "completion_tokens": int(call.get("output_tokens") or 0),
            "cached_tokens": int(call.get("cached_tokens") or 0),
            **({"cost_usd": float(cost)} if isinstance(cost, int | float) else {}), "extra": extra}


def _ts(record: dict[str, Any]) -> float:
    value = record.get("ts")
    return float(value) if isinstance(value, int | float) else 0.0


def build(run_dir: Path) -> dict[str, Any]:
    """The ATIF document of the trial recorded in ``run_dir`` (the directory of its ``run.json``)."""
    state = read_object(run_dir / "run.json")
    if not state:
        raise AtifError(f"{run_dir}: no readable run.json: not a run directory")
    agent_dir, gateway, artifacts = run_dir / "agent", run_dir / "gateway", run_dir / "artifacts"
    manifest, preset = read_object(agent_dir / "manifest.json"), read_object(agent_dir / "preset.json")
    tools = _jsonl(gateway / "trajectory.jsonl", artifacts / "trajectory.jsonl")
    models = _jsonl(gateway / "model-calls.jsonl", artifacts / "model-calls.jsonl")
    answers = {str(a.get("sha256")): a for a in _jsonl(gateway / "answers.jsonl", artifacts / "answers.jsonl")}
    agent_result = (state.get("results") or {}).get("agent") or {}
    started = float(agent_result["started_at"]) if isinstance(agent_result.get("started_at"), int | float) else \
        min([_ts(r) for r in tools + models] or [0.0])

    name, version = str(state.get("agent") or "agent"), "unknown"
    if preset:
        name = str(preset.get("preset") or name)
        version = str(preset.get("package") or "").rpartition("@")[2] or version
    model = preset.get("model") if isinstance(preset.get("model"), str) else None
    steps: list[dict[str, Any]] = [{"step_id": 1, "timestamp": _iso(started), "source": "user",
                                    "message": str(preset.get("prompt") or _ask(manifest))}]

    indexed = sorted(enumerate(tools), key=lambda item: _ts(item[1]))
    turns = sorted(models, key=_ts)
    # each tool call belongs to the last model call that began before it (the call whose answer asked for it)
    by_turn: list[list[tuple[int, dict[str, Any]]]] = [[] for _ in turns]
    before: list[tuple[int, dict[str, Any]]] = []
    for index, call in indexed:
        owner = max((i for i, t in enumerate(turns) if _ts(t) <= _ts(call)), default=None)
        (before if owner is None else by_turn[owner]).append((index, call))
    for index, call in before:  # tool calls no counted model call asked for (or an agent without a proxy)
        steps.append({"step_id": len(steps) + 1, "timestamp": _iso(_ts(call)), "source": "agent", "message": "",
                      "llm_call_count": 0, **_tool_step([(index, call)], answers)})
    for number, (turn, calls) in enumerate(zip(turns, by_turn, strict=True), start=1):
        reply: dict[str, Any] = turn["reply"] if isinstance(turn.get("reply"), dict) else {}
        asked = [c for c in reply.get("tool_calls") or [] if isinstance(c, dict)]
        step: dict[str, Any] = {"step_id": len(steps) + 1, "timestamp": _iso(_ts(turn)), "source": "agent",
                                "message": str(reply.get("text") or ""), "llm_call_count": 1,
                                "metrics": _metrics(turn), **_tool_step(calls, answers, asked, number)}
        if isinstance(turn.get("model"), str):
            step["model_name"] = turn["model"]
        steps.append(step)

    priced = [t.get("cost_usd") for t in turns]
    summary = state.get("results") or {}
    doc: dict[str, Any] = {
        "schema_version": VERSION,
        "session_id": str(state.get("id") or run_dir.name),
        "trajectory_id": str(state.get("id") or run_dir.name),
        "agent": {"name": name, "version": version, **({"model_name": model} if model else {}),
                  "extra": {"command": state.get("agent"), "tool_profile": state.get("tool_profile")}},
        "steps": steps,
        "notes": NOTES,
        "final_metrics": {
            "total_prompt_tokens": sum(int(t.get("input_tokens") or 0) for t in turns),
            "total_completion_tokens": sum(int(t.get("output_tokens") or 0) for t in turns),
            "total_cached_tokens": sum(int(t.get("cached_tokens") or 0) for t in turns),
            **({"total_cost_usd": round(sum(float(c) for c in priced if isinstance(c, int | float)), 8)}
               if turns and all(isinstance(c, int | float) for c in priced) else {}),
            "total_steps": len(steps),
            "extra": {"model_calls": len(turns), "tool_calls": len(tools)}},
        "extra": {"opsbench": {
            "run_id": state.get("id"), "scenario_id": state.get("scenario_id"), "mode": state.get("mode", "live"),
            "snapshot_id": state.get("snapshot_id"), "status": state.get("status"),
            "agent": {k: agent_result.get(k) for k in ("status", "exit_code", "elapsed", "started_at", "ended_at")
                      if k in agent_result},
            "output": read_object(artifacts / "agent-output.json") or read_object(agent_dir / "output.json") or None,
            "evaluations": (summary.get("evaluate") or {}).get("stats", {}).get("evaluations")}},
    }
    found = problems(doc)
    if found:
        raise AtifError(f"{run_dir}: the ATIF export breaks the format (a bug): " + "; ".join(found[:5]))
    return doc


def problems(doc: Any) -> list[str]:
    """Why ``doc`` is not valid ATIF: the JSON Schema, then the rules harbor's models check in code."""
    found = [f"{'/'.join(map(str, e.absolute_path)) or '$'}: {e.message[:200]}"
             for e in jsonschema.Draft202012Validator(load_schema("atif")).iter_errors(doc)]
    if found or not isinstance(doc, dict):
        return found
    return found + list(_rules(doc))


def _rules(doc: dict[str, Any]) -> Iterable[str]:
    for i, step in enumerate(doc["steps"]):
        if step["step_id"] != i + 1:
            yield f"steps[{i}].step_id: expected {i + 1} (sequential from 1), got {step['step_id']}"
        if step.get("timestamp") is not None:
            try:
                dt.datetime.fromisoformat(str(step["timestamp"]).replace("Z", "+00:00"))
            except ValueError:
                yield f"steps[{i}].timestamp: not ISO 8601: {step['timestamp']!r}"
        if step["source"] != "agent":
            yield from (f"steps[{i}].{f}: only applicable when source is 'agent'" for f in AGENT_ONLY
                        if step.get(f) is not None)
        elif step.get("llm_call_count") == 0:
            yield from (f"steps[{i}].{f}: must be absent when llm_call_count is 0" for f in
                        ("metrics", "reasoning_content") if step.get(f) is not None)
        ids = {c["tool_call_id"] for c in step.get("tool_calls") or []}
        for result in (step.get("observation") or {}).get("results") or []:
            if result.get("source_call_id") is not None and result["source_call_id"] not in ids:
                yield f"steps[{i}]: observation source_call_id {result['source_call_id']!r} is not a tool call of it"
    subs = [s.get("trajectory_id") for s in doc.get("subagent_trajectories") or []]
    if None in subs or len(set(subs)) != len(subs):
        yield "subagent_trajectories: each needs a unique trajectory_id"


def write(run_dir: Path, out: Path | None = None) -> tuple[dict[str, Any], Path]:
    """Build and write the export (default ``<run dir>/artifacts/trajectory.atif.json``); (document, path)."""
    doc = build(run_dir)
    path = out or run_dir / "artifacts" / "trajectory.atif.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2) + "\n")
    return doc, path
