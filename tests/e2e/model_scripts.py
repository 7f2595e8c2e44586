"""Scripted model servers that speak a vendor's wire protocol, for running the real agent CLIs with no real model.

One server answers every protocol the presets need, by path:

- ``POST .../v1/messages`` (Anthropic Messages, streaming or not): Claude Code;
- ``POST .../v1/responses`` (OpenAI Responses, streaming): Codex CLI;
- ``POST .../v1/chat/completions`` (OpenAI Chat Completions, streaming or not): OpenCode;
- ``POST .../v1beta/models/M:streamGenerateContent`` and ``:generateContent`` (Gemini): Gemini CLI.

A script is a list of steps. The server finds how far the conversation is by counting the tool calls already in
the request (the CLI sends the whole conversation every turn) and answers the next step: an MCP tool call
(``Mcp("get_alerts", {...})``: the tool whose advertised name ends with that name), a shell command through the
CLI's own shell tool (``Shell("...")``), or a last text (``Say``). Requests without the run's MCP tools (a CLI's
background calls: titles, summaries) get a short text. Every request, the tool results the CLI sent back and the
usage the server reported are kept, so a test can check what the CLI did and what the proxy counted.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Mcp:
    tool: str
    args: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Shell:
    """A command for the CLI's own shell; a callable is asked for it when the step is answered (a port known
    only once the run is under way)."""

    command: str | Callable[[], str]

    def text(self) -> str:
        return self.command if isinstance(self.command, str) else self.command()


@dataclass(frozen=True)
class Say:
    text: str


Step = Mcp | Shell | Say


@dataclass
class Log:
    requests: list[dict[str, Any]] = field(default_factory=list)
    usages: list[dict[str, Any]] = field(default_factory=list)  # the usage the server reported, every answer
    background: int = 0  # answers to requests outside the script (no MCP tools offered)
    tool_results: list[str] = field(default_factory=list)  # the CLI's tool outputs, in the last request


def _tool_names(body: dict[str, Any]) -> list[str]:
    names = []
    for tool in body.get("tools") or []:
        if isinstance(tool, dict):
            if tool.get("name"):
                names.append(str(tool["name"]))
            elif isinstance(tool.get("function"), dict):
                names.append(str(tool["function"].get("name")))
            for sub in tool.get("tools") or []:  # a namespace of tools
                if isinstance(sub, dict) and sub.get("name"):
                    names.append(f"{tool.get('name')}.{sub['name']}")
            for decl in tool.get("functionDeclarations") or tool.get("function_declarations") or []:  # Gemini
                if isinstance(decl, dict) and decl.get("name"):
                    names.append(str(decl["name"]))
    return names


def _response_text(response: Any) -> str:
    """A Gemini functionResponse's text: its ``output`` (the CLI's shell and MCP tools put the text there)."""
    if isinstance(response, dict) and isinstance(response.get("output"), str):
        return str(response["output"])
    return json.dumps(response)


def _gateway(tools: list[str]) -> bool:
    """Whether a request offers the run's MCP tools (else it is a CLI's background call: a title, a summary)."""
    return any(t.endswith("get_alerts") for t in tools)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_text(c.get("text", c.get("content", ""))) if isinstance(c, dict) else str(c)
                         for c in content)
    return json.dumps(content)


class ScriptedModel:
    """``with ScriptedModel(script) as model:`` then point the CLI at ``model.url``."""

    def __init__(self, script: list[Step], model: str = "scripted-model", delay: float = 0.0,
                 silent: bool = False, follow_all: bool = False, port: int = 0) -> None:
        self.script = script
        self.model = model
        self.delay = delay
        self.silent = silent  # accept and never answer (a model server that hangs)
        self.follow_all = follow_all  # every request follows the script (no gateway tools needed: no MCP server)
        self.log = Log()
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", port), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._stop = threading.Event()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> ScriptedModel:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._server.shutdown()
        self._server.server_close()

    # -- Anthropic Messages -----------------------------------------------------------------------------------
    def anthropic(self, body: dict[str, Any]) -> tuple[list[dict[str, Any]], str, dict[str, int]]:
        """(content blocks, stop reason, usage) of the next answer."""
        tools = _tool_names(body)
        messages = body.get("messages") or []
        done = sum(1 for m in messages if m.get("role") == "assistant" and isinstance(m.get("content"), list)
                   for c in m["content"] if isinstance(c, dict) and c.get("type") == "tool_use")
        results = [_text(c.get("content")) for m in messages if m.get("role") == "user"
                   and isinstance(m.get("content"), list) for c in m["content"]
                   if isinstance(c, dict) and c.get("type") == "tool_result"]
        if not self.follow_all and not any(t.startswith("mcp__") for t in tools):
            with self._lock:
                self.log.background += 1
            return [{"type": "text", "text": "OpsBench incident"}], "end_turn", {"input_tokens": 10, "output_tokens": 3}
        with self._lock:
            self.log.tool_results = results
        step = self.script[done] if done < len(self.script) else Say("done")
        usage = {"input_tokens": 100 + 10 * done, "cache_read_input_tokens": 500 * done,
                 "cache_creation_input_tokens": 40 if done == 0 else 0, "output_tokens": 20 + done}
        if isinstance(step, Say):
            return [{"type": "text", "text": step.text}], "end_turn", usage
        if isinstance(step, Shell):
            name, args = "Bash", {"command": step.text(), "description": "run"}
        else:
            name = next((t for t in tools if t.endswith("__" + step.tool)), step.tool)
            args = step.args
        return [{"type": "tool_use", "id": f"toolu_{done:04d}", "name": name, "input": args}], "tool_use", usage

    def anthropic_sse(self, blocks: list[dict[str, Any]], stop: str, usage: dict[str, int]) -> bytes:
        events: list[tuple[str, dict[str, Any]]] = [("message_start", {"type": "message_start", "message": {
            "id": f"msg_{time.monotonic_ns()}", "type": "message", "role": "assistant", "model": self.model,
            "content": [], "stop_reason": None, "stop_sequence": None,
            "usage": {**{k: v for k, v in usage.items() if k != "output_tokens"}, "output_tokens": 1}}})]
        for i, block in enumerate(blocks):
            if block["type"] == "text":
                events += [("content_block_start", {"type": "content_block_start", "index": i,
                                                    "content_block": {"type": "text", "text": ""}}),
                           ("content_block_delta", {"type": "content_block_delta", "index": i,
                                                    "delta": {"type": "text_delta", "text": block["text"]}})]
            else:
                events += [("content_block_start", {"type": "content_block_start", "index": i, "content_block": {
                    "type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}}),
                           ("content_block_delta", {"type": "content_block_delta", "index": i, "delta": {
                               "type": "input_json_delta", "partial_json": json.dumps(block["input"])}})]
            events.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
        events += [("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                                      "usage": {"output_tokens": usage["output_tokens"]}}),
                   ("message_stop", {"type": "message_stop"})]
        return b"".join(f"event: {e}\ndata: {json.dumps(d)}\n\n".encode() for e, d in events)

    # -- OpenAI Responses -------------------------------------------------------------------------------------
    def responses(self, body: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """(output items, usage) of the next answer."""
        tools = _tool_names(body)
        items = [i for i in body.get("input") or [] if isinstance(i, dict)]
        done = sum(1 for i in items if i.get("type") in ("function_call", "custom_tool_call", "local_shell_call"))
        results = [_text(i.get("output")) for i in items
                   if i.get("type") in ("function_call_output", "custom_tool_call_output")]
        if not self.follow_all and not any("opsbench" in t for t in tools):
            with self._lock:
                self.log.background += 1
            step: Step = Say("OpsBench incident")
        else:
            with self._lock:
                self.log.tool_results = results
            step = self.script[done] if done < len(self.script) else Say("done")
        usage = {"input_tokens": 1000 + 100 * done, "input_tokens_details": {"cached_tokens": 200 * done},
                 "output_tokens": 30 + done, "output_tokens_details": {"reasoning_tokens": 0},
                 "total_tokens": 1030 + 101 * done}
        if isinstance(step, Say):
            return [{"type": "message", "id": f"msg_{done}", "role": "assistant", "status": "completed",
                     "content": [{"type": "output_text", "text": step.text, "annotations": []}]}], usage
        if isinstance(step, Shell):
            name = next((t for t in ("exec_command", "shell", "shell_command") if t in tools), "shell")
            command = step.text()
            args: dict[str, Any] = {"cmd": command} if name == "exec_command" else \
                {"command": command} if name == "shell_command" else {"command": ["bash", "-lc", command]}
        else:
            mcp = [t for t in tools if t.endswith(step.tool) and "opsbench" in t]
            name, args = (mcp[0] if mcp else step.tool), step.args
        call = {"type": "function_call", "id": f"fc_{done}", "call_id": f"call_{done:04d}", "name": name,
                "arguments": json.dumps(args), "status": "completed"}
        if "." in name:  # a tool of a namespace (Codex offers an MCP server's tools as one)
            call["namespace"], call["name"] = name.split(".", 1)
        return [call], usage

    def responses_sse(self, output: list[dict[str, Any]], usage: dict[str, Any]) -> bytes:
        rid = f"resp_{time.monotonic_ns()}"
        base = {"id": rid, "object": "response", "created_at": int(time.time()), "model": self.model}
        events: list[tuple[str, dict[str, Any]]] = [
            ("response.created", {"type": "response.created", "response": {**base, "status": "in_progress",
                                                                          "output": []}})]
        for i, item in enumerate(output):
            events.append(("response.output_item.added", {"type": "response.output_item.added", "output_index": i,
                                                          "item": {**item, "status": "in_progress"}}))
            if item["type"] == "message":
                text = item["content"][0]["text"]
                events.append(("response.output_text.delta", {"type": "response.output_text.delta",
                                                              "item_id": item["id"], "output_index": i,
                                                              "content_index": 0, "delta": text}))
            events.append(("response.output_item.done", {"type": "response.output_item.done", "output_index": i,
                                                         "item": item}))
        events.append(("response.completed", {"type": "response.completed", "response": {
            **base, "status": "completed", "output": output, "usage": usage}}))
        return b"".join(f"event: {e}\ndata: {json.dumps(d)}\n\n".encode() for e, d in events)

    # -- OpenAI Chat Completions ------------------------------------------------------------------------------
    def chat(self, body: dict[str, Any]) -> tuple[dict[str, Any], str, dict[str, Any]]:
        """(assistant message, finish reason, usage) of the next answer."""
        tools = _tool_names(body)
        messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
        done = sum(len(m.get("tool_calls") or []) for m in messages if m.get("role") == "assistant")
        results = [_text(m.get("content")) for m in messages if m.get("role") == "tool"]
        if not self.follow_all and not _gateway(tools):
            with self._lock:
                self.log.background += 1
            step: Step = Say("OpsBench incident")
        else:
            with self._lock:
                self.log.tool_results = results
            step = self.script[done] if done < len(self.script) else Say("done")
        usage = {"prompt_tokens": 2000 + 100 * done, "completion_tokens": 40 + done,
                 "total_tokens": 2040 + 101 * done, "prompt_tokens_details": {"cached_tokens": 300 * done}}
        if isinstance(step, Say):
            return {"role": "assistant", "content": step.text}, "stop", usage
        if isinstance(step, Shell):
            name = next((t for t in ("bash", "shell", "run_shell_command") if t in tools), "bash")
            args: dict[str, Any] = {"command": step.text(), "description": "run"}
        else:
            name = next((t for t in tools if t.endswith(step.tool)), step.tool)
            args = step.args
        call = {"id": f"call_{done:04d}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
        return {"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls", usage

    def chat_sse(self, message: dict[str, Any], finish: str, usage: dict[str, Any]) -> bytes:
        base = {"id": f"chatcmpl-{time.monotonic_ns()}", "object": "chat.completion.chunk",
                "created": int(time.time()), "model": self.model}
        delta: dict[str, Any] = {"role": "assistant"}
        if message.get("tool_calls"):
            delta["tool_calls"] = [{"index": i, **c} for i, c in enumerate(message["tool_calls"])]
        else:
            delta["content"] = message["content"]
        chunks = [{**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
                  {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]},
                  {**base, "choices": [], "usage": usage}]
        return b"".join(f"data: {json.dumps(c)}\n\n".encode() for c in chunks) + b"data: [DONE]\n\n"

    # -- Gemini generateContent --------------------------------------------------------------------------------
    def gemini(self, body: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """(content parts, usageMetadata) of the next answer."""
        tools = _tool_names(body)
        contents = [c for c in body.get("contents") or [] if isinstance(c, dict)]
        parts = [(c.get("role"), p) for c in contents for p in c.get("parts") or [] if isinstance(p, dict)]
        done = sum(1 for role, p in parts if role == "model" and "functionCall" in p)
        results = [_response_text(p["functionResponse"].get("response")) for _, p in parts if "functionResponse" in p]
        if not self.follow_all and not _gateway(tools):
            with self._lock:
                self.log.background += 1
            step: Step = Say("OpsBench incident")
        else:
            with self._lock:
                self.log.tool_results = results
            step = self.script[done] if done < len(self.script) else Say("done")
        usage = {"promptTokenCount": 3000 + 100 * done, "cachedContentTokenCount": 400 * done,
                 "candidatesTokenCount": 50 + done, "thoughtsTokenCount": 7, "totalTokenCount": 3057 + 101 * done}
        if isinstance(step, Say):
            return [{"text": step.text}], usage
        if isinstance(step, Shell):
            name = next((t for t in ("run_shell_command", "shell") if t in tools), "run_shell_command")
            args: dict[str, Any] = {"command": step.text(), "description": "run"}
        else:
            name = next((t for t in tools if t.endswith(step.tool)), step.tool)
            args = step.args
        return [{"functionCall": {"name": name, "args": args}}], usage

    def gemini_answer(self, parts: list[dict[str, Any]], usage: dict[str, Any]) -> dict[str, Any]:
        return {"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
                "usageMetadata": usage, "modelVersion": self.model, "responseId": f"r{time.monotonic_ns()}"}

    # -- HTTP -------------------------------------------------------------------------------------------------
    def _handler(self) -> type[BaseHTTPRequestHandler]:
        model = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def reply(self, status: int, body: bytes, content_type: str = "application/json") -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                self.reply(200, json.dumps({"object": "list", "data": [], "models": []}).encode())

            def do_HEAD(self) -> None:
                self.reply(200, b"")

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {}
                path = self.path.split("?")[0]
                with model._lock:
                    model.log.requests.append({"path": path, "body": body,
                                               "headers": {k.lower(): v for k, v in self.headers.items()}})
                if model.silent:
                    model._stop.wait(600)
                    return
                if model.delay:
                    time.sleep(model.delay)
                if path.endswith("/count_tokens"):
                    self.reply(200, json.dumps({"input_tokens": 100}).encode())
                elif path.endswith("/messages"):
                    blocks, stop, usage = model.anthropic(body)
                    with model._lock:
                        model.log.usages.append(usage)
                    if body.get("stream"):
                        self.reply(200, model.anthropic_sse(blocks, stop, usage), "text/event-stream")
                    else:
                        self.reply(200, json.dumps({
                            "id": "msg_1", "type": "message", "role": "assistant", "model": model.model,
                            "content": blocks, "stop_reason": stop, "stop_sequence": None, "usage": usage}).encode())
                elif path.endswith("/responses"):
                    output, usage = model.responses(body)
                    with model._lock:
                        model.log.usages.append(usage)
                    self.reply(200, model.responses_sse(output, usage), "text/event-stream")
                elif path.endswith("/chat/completions"):
                    message, finish, usage = model.chat(body)
                    with model._lock:
                        model.log.usages.append(usage)
                    if body.get("stream"):
                        self.reply(200, model.chat_sse(message, finish, usage), "text/event-stream")
                    else:
                        self.reply(200, json.dumps({
                            "id": "chatcmpl-1", "object": "chat.completion", "created": int(time.time()),
                            "model": model.model, "usage": usage,
                            "choices": [{"index": 0, "message": message, "finish_reason": finish}]}).encode())
                elif path.endswith(":countTokens"):
                    self.reply(200, json.dumps({"totalTokens": 100}).encode())
                elif path.endswith((":streamGenerateContent", ":generateContent")):
                    parts, usage = model.gemini(body)
                    with model._lock:
                        model.log.usages.append(usage)
                    answer = json.dumps(model.gemini_answer(parts, usage))
                    if path.endswith(":streamGenerateContent"):
                        self.reply(200, f"data: {answer}\r\n\r\n".encode(), "text/event-stream")
                    else:
                        self.reply(200, answer.encode())
                else:
                    self.reply(404, json.dumps({"error": {"message": f"no {path} here"}}).encode())

        return Handler
