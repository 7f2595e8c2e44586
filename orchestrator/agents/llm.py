"""A ReAct-style tool-calling LLM agent for any OpenAI-compatible chat-completions endpoint.

The model gets the manifest's goal and alerts, the gateway's tools as functions, and a
``submit`` function whose argument is the output document. Decoding is greedy (temperature 0,
recorded with the model name in the output's ``usage``). RCAgent's cheap stabilisers:

* malformed tool arguments are repaired where the intent is clear (code fences, trailing
  commas, single quotes) and otherwise returned to the model as an error;
* a call identical to an earlier one is rejected with a pointer to the earlier observation;
* long observations stay behind a key: the model sees a preview and can page the rest with
  ``read_observation(key, offset)``.

An image a tool returns (``view_screenshot``: ``mime_type`` image/*, base64 ``data``) reaches the model as
OpenAI-compatible ``image_url`` content (a data URL) in a user message right after the tool results, since tool
messages carry text only; the tool message itself says what the picture is. ``OPSBENCH_LLM_IMAGES=0`` replaces the
picture with a note, for a model that accepts no images.

Configuration from the environment: ``OPSBENCH_LLM_URL`` (base URL, e.g. http://host/v1),
``OPSBENCH_LLM_MODEL``, ``OPSBENCH_LLM_API_KEY`` (optional), ``OPSBENCH_LLM_MAX_TURNS``
(default 20), ``OPSBENCH_LLM_IMAGES`` (default 1). Run as ``python -m orchestrator.agents.llm`` with
OPSBENCH_MANIFEST set.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema

from orchestrator.agents.gateway_client import GatewayClient, ToolError, open_session

PREVIEW_CHARS = 2000
PAGE_CHARS = 4000
SUBMIT = "submit"
READ = "read_observation"


@dataclass
class LLMConfig:
    url: str
    model: str
    api_key: str | None = None
    max_turns: int = 20
    timeout: float = 120.0
    images: bool = True

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> LLMConfig:
        env = os.environ if environ is None else environ
        url, model = env.get("OPSBENCH_LLM_URL", ""), env.get("OPSBENCH_LLM_MODEL", "")
        if not url or not model:
            raise ValueError("set OPSBENCH_LLM_URL and OPSBENCH_LLM_MODEL (an OpenAI-compatible endpoint)")
        return cls(url.rstrip("/"), model, env.get("OPSBENCH_LLM_API_KEY") or None,
                   int(env.get("OPSBENCH_LLM_MAX_TURNS", "20")),
                   images=env.get("OPSBENCH_LLM_IMAGES", "1").strip().lower() not in ("0", "false", "no", "off"))


def chat(config: LLMConfig, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
    """One chat-completions call, greedy; returns the parsed response."""
    body = {"model": config.model, "messages": messages, "tools": tools, "temperature": 0}
    headers = {"Content-Type": "application/json"}
    if config.api_key:
        headers["Authorization"] = f"Bearer {config.api_key}"
    req = urllib.request.Request(f"{config.url}/chat/completions", data=json.dumps(body).encode(),
                                 headers=headers, method="POST")
    with urllib.request.urlopen(req, timeout=config.timeout) as resp:
        result: dict[str, Any] = json.loads(resp.read())
    return result


def repair_json(text: str) -> Any:
    """Parse tool arguments, repairing the usual slips; raise ValueError when intent is unclear."""
    text = (text or "").strip() or "{}"
    candidates = [text]
    fenced = re.sub(r"^```(?:json)?\s*|\s*```$", "", text)
    candidates.append(fenced)
    no_commas = re.sub(r",\s*([}\]])", r"\1", fenced)
    candidates += [no_commas, no_commas.replace("'", '"')]
    for candidate in candidates:
        try:
            return json.loads(candidate)
        except json.JSONDecodeError:
            continue
    raise ValueError(f"arguments are not JSON: {text[:200]}")


@dataclass
class Session:
    """The state a run keeps across turns: observations behind keys, calls already made, usage."""

    call: Callable[..., Any]
    schemas: dict[str, Any]
    seen: dict[str, str] = field(default_factory=dict)
    observations: dict[str, str] = field(default_factory=dict)
    usage: dict[str, int] = field(default_factory=lambda: {"input_tokens": 0, "output_tokens": 0})
    output: dict[str, Any] | None = None
    images: list[tuple[str, str]] = field(default_factory=list)
    """Pictures tools returned this turn: (what it is, data URL), sent to the model after the tool results."""

    def observe(self, text: str) -> str:
        if len(text) <= PREVIEW_CHARS:
            return text
        key = f"obs{len(self.observations) + 1}"
        self.observations[key] = text
        return (f"{text[:PREVIEW_CHARS]}\n... [{len(text)} characters; the rest is kept under key {key}: "
                f"call {READ} with key={key} and offset={PREVIEW_CHARS}]")

    def execute(self, name: str, raw_args: str) -> str:
        try:
            args = repair_json(raw_args)
        except ValueError as exc:
            return f"error: {exc}"
        if not isinstance(args, dict):
            return "error: arguments must be a JSON object"
        if name == READ:
            text = self.observations.get(str(args.get("key")), "")
            offset = int(args.get("offset", 0) or 0)
            return text[offset:offset + PAGE_CHARS] if text else f"error: no observation {args.get('key')!r}"
        if name == SUBMIT:
            return self.submit(args.get("output", args))
        signature = json.dumps([name, args], sort_keys=True)
        if signature in self.seen:
            return f"rejected: you already made this exact call; its result is {self.seen[signature]}"
        try:
            answer = self.call(name, **args)
            if isinstance(answer, dict) and str(answer.get("mime_type", "")).startswith("image/") \
                    and isinstance(answer.get("data"), str):
                answer = dict(answer)
                data = answer.pop("data")
                caption = f"the image {name} returned for {json.dumps(args, sort_keys=True)}"
                self.images.append((caption, f"data:{answer['mime_type']};base64,{data}"))
                answer["image"] = "sent to you as an image in the next message"
            result = json.dumps(answer)
        except ToolError as exc:
            result = f"error: {exc}"
        except (OSError, ValueError) as exc:
            result = f"error: the gateway did not answer: {exc}"
        self.seen[signature] = f"the observation of call {len(self.seen) + 1}" if len(result) > PREVIEW_CHARS \
            else result[:300]
        return self.observe(result)

    def submit(self, output: Any) -> str:
        if not isinstance(output, dict):
            return "error: submit needs the output document as a JSON object"
        problems = []
        for kind, schema in self.schemas.items():
            errors = list(jsonschema.Draft202012Validator(schema).iter_errors(output))
            problems += [f"{kind}: {'/'.join(map(str, e.absolute_path)) or '$'}: {e.message}" for e in errors[:3]]
        if problems:
            return "error: the output does not match its schema; fix and submit again: " + "; ".join(problems)
        self.output = output
        return "submitted"


def function_specs(tools: list[dict[str, Any]], output_schema: dict[str, Any]) -> list[dict[str, Any]]:
    """The gateway's tools, ``read_observation`` and ``submit`` as OpenAI function definitions."""
    specs = [{"type": "function", "function": {"name": t["name"], "description": t.get("description", ""),
                                               "parameters": t.get("input_schema") or {"type": "object"}}}
             for t in tools]
    specs.append({"type": "function", "function": {
        "name": READ, "description": "Read more of a long observation kept under a key.",
        "parameters": {"type": "object", "required": ["key"],
                       "properties": {"key": {"type": "string"}, "offset": {"type": "integer"}}}}})
    specs.append({"type": "function", "function": {
        "name": SUBMIT, "description": "Submit the final answer (ends the run).",
        "parameters": {"type": "object", "required": ["output"], "properties": {"output": output_schema}}}})
    return specs


def image_messages(images: list[tuple[str, str]], accepted: bool) -> list[dict[str, Any]]:
    """One user message per picture: a caption and the picture as `image_url` content (or a note, when the model
    takes no images)."""
    if not accepted:
        return [{"role": "user", "content": f"({caption} is not shown: this model takes no images)"}
                for caption, _ in images]
    return [{"role": "user", "content": [{"type": "text", "text": caption.capitalize() + ":"},
                                         {"type": "image_url", "image_url": {"url": url}}]}
            for caption, url in images]


DEVOPS_KINDS = frozenset({"fix", "write-tests"})


def system_prompt(manifest: dict[str, Any], tools: list[dict[str, Any]] | None = None) -> str:
    goals = "\n".join(f"- [{t['kind']}] {t['goal']}" for t in manifest["tasks"])
    terminal = any(t.get("name") == "exec" for t in tools or [])
    if terminal or DEVOPS_KINDS & {t["kind"] for t in manifest["tasks"]}:
        # A DevOps task: a terminal in the workspace container, no alerts, no telemetry.
        return ("You are a DevOps engineer with a terminal in a workspace container: the projects are under "
                "/workspace, there is no network, and you work as an unprivileged user. Run shell commands with "
                "exec (non-interactive; give long builds a longer timeout), read and change files with read_file, "
                "write_file and list_files. Think step by step, check your work by running the project's build and "
                f"tests (`make check`), then call {SUBMIT} exactly once with your report.\nTasks:\n{goals}\n"
                "Your changes in the workspace are what counts: they are rebuilt and retested in a fresh copy. "
                "Never weaken, skip or delete existing tests.")
    alerts = "\n".join(f"- {a.get('labels', {}).get('alertname')} on {a.get('labels', {}).get('service')}: "
                       f"{a.get('annotations', {}).get('summary', '')}" for a in manifest.get("alerts") or [])
    return ("You are an on-call SRE agent. Investigate with the tools, think step by step, and call "
            f"{SUBMIT} exactly once with your answer.\nTasks:\n{goals}\nFiring alerts:\n{alerts or '- none'}\n"
            "Name entities by the ids of get_topology.")


def run(manifest: dict[str, Any], config: LLMConfig, call: Callable[..., Any],
        tools: list[dict[str, Any]], trajectory: Path | None = None) -> dict[str, Any] | None:
    """Converse until the model submits a valid output or the turns run out; returns the output."""
    schemas = {k: json.loads(Path(p).read_text()) for k, p in (manifest["output"].get("schemas") or {}).items()}
    merged: dict[str, Any] = {"type": "object", "allOf": list(schemas.values())} if schemas else {"type": "object"}
    session = Session(call, schemas)
    specs = function_specs(tools, merged)
    messages: list[dict[str, Any]] = [{"role": "system", "content": system_prompt(manifest, tools)},
                                      {"role": "user", "content": "Begin."}]
    for _ in range(config.max_turns):
        response = chat(config, messages, specs)
        usage = response.get("usage") or {}
        session.usage["input_tokens"] += int(usage.get("prompt_tokens", 0))
        session.usage["output_tokens"] += int(usage.get("completion_tokens", 0))
        if trajectory is not None:
            with trajectory.open("a") as f:
                f.write(json.dumps({"ts": time.time(), "tool": "llm", "status": "ok",
                                    "input_tokens": int(usage.get("prompt_tokens", 0)),
                                    "output_tokens": int(usage.get("completion_tokens", 0))}) + "\n")
        message = response["choices"][0]["message"]
        calls = message.get("tool_calls") or []
        turn: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
        if calls:
            turn["tool_calls"] = calls
        messages.append(turn)
        if not calls:
            messages.append({"role": "user", "content": f"Use the tools, then call {SUBMIT} with your answer."})
            continue
        for tc in calls:
            fn = tc.get("function", {})
            result = session.execute(fn.get("name", ""), fn.get("arguments", "{}"))
            messages.append({"role": "tool", "tool_call_id": tc.get("id", ""), "content": result})
        messages += image_messages(session.images, config.images)
        session.images.clear()
        if session.output is not None:
            return {**session.output, "usage": {**session.usage, "model": config.model}}
    return None


def main() -> int:
    try:
        config = LLMConfig.from_env()  # the model first: its settings are what a user most often forgets
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    session = open_session()
    manifest = session.manifest
    client = GatewayClient(session.url, session.token)
    req = urllib.request.Request(f"{session.url.rstrip('/')}/v1/tools",
                                 headers={"Authorization": f"Bearer {session.token}"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        listed = json.loads(resp.read())
    tools = listed.get("tools", listed) if isinstance(listed, dict) else listed
    trajectory = Path(os.environ["OPSBENCH_TRAJECTORY"]) if os.environ.get("OPSBENCH_TRAJECTORY") else None
    try:
        output = run(manifest, config, client, tools, trajectory)
    except (urllib.error.URLError, OSError, KeyError, ValueError) as exc:
        print(f"the model endpoint failed: {exc}", file=sys.stderr)
        return 1
    if output is None:
        print("no valid output within the turn budget", file=sys.stderr)
        return 1
    session.write(output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
