"""Tokens and model of one model call, read from the response body as the vendor sent it (JSON or SSE).

Three wire protocols, one normal form. ``input_tokens`` counts every prompt token, cached ones included, so the
figure compares across vendors (Anthropic reports cache reads and writes apart from ``input_tokens``; OpenAI
includes cached tokens in ``input_tokens``/``prompt_tokens``):

- Anthropic Messages: ``usage`` of the body, or of ``message_start``'s message and ``message_delta`` (streaming;
  the delta's ``output_tokens`` is cumulative);
- OpenAI Responses: ``usage`` of the body, or of ``response.completed``'s response (streaming);
- OpenAI Chat Completions: ``usage`` with ``prompt_tokens``/``completion_tokens`` (the last chunk when streaming);
- Gemini generateContent: ``usageMetadata`` (each chunk of a stream carries the totals so far): ``promptTokenCount``
  (cached tokens included, as ``cachedContentTokenCount``) plus ``toolUsePromptTokenCount``; output is
  ``candidatesTokenCount`` plus ``thoughtsTokenCount`` (thinking is billed as output).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


@dataclass
class Usage:
    model: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    found: bool = False


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def objects(body: bytes, content_type: str) -> list[dict[str, Any]]:
    """The JSON objects of a body: the body itself, or each SSE ``data:`` line."""
    text = body.decode("utf-8", errors="replace")
    if "event-stream" in content_type or text.lstrip().startswith(("event:", "data:")):
        found = []
        for line in text.splitlines():
            if line.startswith("data:"):
                data = line[5:].strip()
                if data and data != "[DONE]":
                    try:
                        obj = json.loads(data)
                    except ValueError:
                        continue
                    if isinstance(obj, dict):
                        found.append(obj)
        return found
    try:
        obj = json.loads(text)
    except ValueError:
        return []
    if isinstance(obj, list):  # Gemini's streamGenerateContent without alt=sse: one JSON array of chunks
        return [o for o in obj if isinstance(o, dict)]
    return [obj] if isinstance(obj, dict) else []


def _apply(usage: Usage, raw: dict[str, Any]) -> None:
    """Fold one ``usage`` object in; later objects of a stream refine earlier ones."""
    usage.found = True
    if "prompt_tokens" in raw or "completion_tokens" in raw:  # chat completions
        usage.input_tokens = _int(raw.get("prompt_tokens")) or usage.input_tokens
        usage.output_tokens = _int(raw.get("completion_tokens")) or usage.output_tokens
        details = raw.get("prompt_tokens_details") or {}
        usage.cached_tokens = _int(details.get("cached_tokens")) or usage.cached_tokens
        return
    if "input_tokens_details" in raw or "output_tokens_details" in raw:  # OpenAI Responses
        usage.input_tokens = max(usage.input_tokens, _int(raw.get("input_tokens")))
        usage.output_tokens = max(usage.output_tokens, _int(raw.get("output_tokens")))
        usage.cached_tokens = _int((raw.get("input_tokens_details") or {}).get("cached_tokens")) or usage.cached_tokens
        return
    # Anthropic: input_tokens excludes the cache, so it is added back; a stream's message_delta may carry only
    # output_tokens (cumulative)
    if "cache_read_input_tokens" in raw:
        usage.cached_tokens = _int(raw.get("cache_read_input_tokens"))
    if "cache_creation_input_tokens" in raw:
        usage.cache_write_tokens = _int(raw.get("cache_creation_input_tokens"))
    if "input_tokens" in raw:
        usage.input_tokens = max(usage.input_tokens,
                                 _int(raw.get("input_tokens")) + usage.cached_tokens + usage.cache_write_tokens)
    usage.output_tokens = max(usage.output_tokens, _int(raw.get("output_tokens")))


def _apply_gemini(usage: Usage, raw: dict[str, Any]) -> None:
    usage.found = True
    usage.input_tokens = max(usage.input_tokens, _int(raw.get("promptTokenCount"))
                             + _int(raw.get("toolUsePromptTokenCount")))
    usage.output_tokens = max(usage.output_tokens, _int(raw.get("candidatesTokenCount"))
                              + _int(raw.get("thoughtsTokenCount")))
    usage.cached_tokens = max(usage.cached_tokens, _int(raw.get("cachedContentTokenCount")))


def parse(body: bytes, content_type: str = "") -> Usage:
    """The usage and model a response body reports (``found`` False when it reports none)."""
    usage = Usage()
    for obj in objects(body, content_type):
        for holder in (obj, obj.get("message"), obj.get("response")):
            if not isinstance(holder, dict):
                continue
            if isinstance(holder.get("model"), str) and holder["model"]:
                usage.model = holder["model"]
            if isinstance(holder.get("usage"), dict):
                _apply(usage, holder["usage"])
            if isinstance(holder.get("modelVersion"), str) and holder["modelVersion"]:
                usage.model = holder["modelVersion"]
            if isinstance(holder.get("usageMetadata"), dict):
                _apply_gemini(usage, holder["usageMetadata"])
    return usage
