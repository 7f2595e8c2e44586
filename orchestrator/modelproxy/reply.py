"""What a model call answered: its text and the tool calls it asked for, read from the response body as the vendor
sent it (JSON or SSE), so a trajectory export can show each model turn (``orchestrator/atif.py``), the CLI's own
tools (a shell, file edits) among them, which never reach the gateway.

- Anthropic Messages: ``text`` and ``tool_use`` content blocks (streamed: ``text_delta`` and ``input_json_delta``);
- OpenAI Responses: the ``output`` of ``response.completed`` (or of the body): ``output_text`` and ``function_call``
  items (a namespaced tool is ``namespace.name``);
- OpenAI Chat Completions: ``choices[0].message``, or the ``delta`` chunks (tool call arguments arrive in pieces);
- Gemini: ``candidates[0].content.parts``: ``text`` and ``functionCall``.

Kept short: the text to ``MAX_TEXT`` characters, a tool call's arguments to ``MAX_ARGS`` characters of JSON.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from orchestrator.modelproxy.usage import objects

MAX_TEXT = 8000
MAX_ARGS = 4000


@dataclass
class Reply:
    text: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)

    def record(self) -> dict[str, Any]:
        """For the call's record: the text (cut) and each tool call's name and arguments (an object, or the raw
        string cut when it is not JSON or too long)."""
        calls = []
        for call in self.tool_calls:
            args: Any = call.get("arguments")
            if isinstance(args, str):
                try:
                    args = json.loads(args) if args.strip() else {}
                except ValueError:
                    args = {"_raw": args[:MAX_ARGS]}
            if not isinstance(args, dict) or len(json.dumps(args)) > MAX_ARGS:
                args = {"_raw": json.dumps(args)[:MAX_ARGS]}
            calls.append({"name": str(call.get("name")), "arguments": args})
        return {"text": self.text[:MAX_TEXT], "tool_calls": calls}


def _anthropic(events: list[dict[str, Any]], reply: Reply) -> None:
    blocks: dict[int, dict[str, Any]] = {}
    for event in events:
        kind = event.get("type")
        if kind == "message" and isinstance(event.get("content"), list):  # not streamed
            for i, block in enumerate(event["content"]):
                if isinstance(block, dict):
                    blocks[i] = {**block, "partial": json.dumps(block.get("input", {}))}
        elif kind == "content_block_start" and isinstance(event.get("content_block"), dict):
            blocks[int(event.get("index", len(blocks)))] = {**event["content_block"], "partial": ""}
        elif kind == "content_block_delta" and isinstance(event.get("delta"), dict):
            block = blocks.setdefault(int(event.get("index", 0)), {"type": "text", "text": "", "partial": ""})
            delta = event["delta"]
            if delta.get("type") == "text_delta":
                block["text"] = str(block.get("text", "")) + str(delta.get("text", ""))
            elif delta.get("type") == "input_json_delta":
                block["partial"] += str(delta.get("partial_json", ""))
    for _, block in sorted(blocks.items()):
        if block.get("type") == "text":
            reply.text += str(block.get("text", ""))
        elif block.get("type") == "tool_use":
            reply.tool_calls.append({"name": block.get("name"), "arguments": block["partial"] or "{}"})


def _responses(output: list[Any], reply: Reply) -> None:
    for item in output:
        if not isinstance(item, dict):
            continue
        if item.get("type") == "message":
            reply.text += "".join(str(c.get("text", "")) for c in item.get("content") or [] if isinstance(c, dict))
        elif item.get("type") in ("function_call", "custom_tool_call"):
            name = f"{item['namespace']}.{item.get('name')}" if item.get("namespace") else item.get("name")
            reply.tool_calls.append({"name": name, "arguments": item.get("arguments", item.get("input", "{}"))})


def _chat(chunks: list[dict[str, Any]], reply: Reply) -> None:
    pieces: dict[int, dict[str, Any]] = {}
    for chunk in chunks:
        choice = (chunk.get("choices") or [{}])[0]
        if not isinstance(choice, dict):
            continue
        part = choice.get("message") or choice.get("delta") or {}
        if isinstance(part.get("content"), str):
            reply.text += part["content"]
        for call in part.get("tool_calls") or []:
            if not isinstance(call, dict):
                continue
            slot = pieces.setdefault(int(call.get("index", len(pieces))), {"name": "", "arguments": ""})
            function = call.get("function") or {}
            slot["name"] = slot["name"] or str(function.get("name") or "")
            slot["arguments"] += str(function.get("arguments") or "")
    reply.tool_calls += [pieces[i] for i in sorted(pieces)]


def _gemini(chunks: list[dict[str, Any]], reply: Reply) -> None:
    for chunk in chunks:
        candidate = (chunk.get("candidates") or [{}])[0]
        parts = (candidate.get("content") or {}).get("parts") if isinstance(candidate, dict) else None
        for part in parts or []:
            if not isinstance(part, dict) or part.get("thought"):
                continue
            if isinstance(part.get("text"), str):
                reply.text += part["text"]
            if isinstance(part.get("functionCall"), dict):
                call = part["functionCall"]
                reply.tool_calls.append({"name": call.get("name"), "arguments": call.get("args") or {}})


def parse(path: str, body: bytes, content_type: str = "") -> Reply:
    """The reply of a call to ``path`` (which protocol it is) whose answer was ``body``."""
    found = objects(body, content_type)
    reply = Reply()
    if path.endswith("/messages"):
        _anthropic(found, reply)
    elif path.endswith("/responses"):
        done = [o["response"] for o in found if o.get("type") == "response.completed"
                and isinstance(o.get("response"), dict)] or [o for o in found if "output" in o]
        _responses(done[-1].get("output") or [] if done else [], reply)
    elif path.endswith("completions"):
        _chat(found, reply)
    elif path.endswith(("generateContent", "GenerateContent")):
        _gemini(found, reply)
    return reply
