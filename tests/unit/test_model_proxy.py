"""The recording model proxy (orchestrator/modelproxy): per-call tokens, latency and cost for the four wire
protocols (Anthropic Messages, OpenAI Responses and Chat Completions, Gemini generateContent), streaming passed
through, a run's token and cost budget refused in each vendor's error shape, the run's token checked and the real
key put on upstream, a server that is down or never answers recorded as an error and cut at close. Against the
scripted vendor servers the real-CLI tests use (tests/e2e/model_scripts.py); no CLI needed, so these run in
`make test`."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from orchestrator.evaluation.process import model_usage, score_process
from orchestrator.modelproxy import Caps, ModelProxy, prices, refusal, reply, usage
from tests.e2e.model_scripts import Mcp, Say, ScriptedModel

TOKEN = "opsbench-run-token"
TABLE = {"scripted-model": prices.Price(3.0, 15.0, 0.3, 3.75)}


def post(url: str, body: dict[str, Any], key: str = TOKEN, header: str = "x-api-key",
         timeout: float = 10) -> tuple[int, bytes]:
    value = f"Bearer {key}" if header == "authorization" else key
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json", header: value})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


MCP_TOOLS = [{"name": "mcp__opsbench__get_alerts", "input_schema": {"type": "object"}}]


def test_anthropic_streaming_call_is_passed_through_and_counted(tmp_path: Path) -> None:
    record = tmp_path / "calls.jsonl"
    with ScriptedModel([Mcp("get_alerts"), Say("done")]) as model, \
            ModelProxy(model.url, "sk-real", TOKEN, record, TABLE) as proxy:
        messages = [{"role": "user", "content": "go"}]
        status, body = post(f"{proxy.base_url}/v1/messages?beta=true",
                            {"model": "scripted-model", "stream": True, "tools": MCP_TOOLS, "messages": messages})
        assert status == 200 and b"event: message_start" in body and b"input_json_delta" in body
        messages += [{"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "x", "input": {}}]},
                     {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "ok"}]}]
        status, body = post(f"{proxy.base_url}/v1/messages", {"model": "scripted-model", "tools": MCP_TOOLS,
                                                              "messages": messages})  # not streamed
        assert status == 200 and json.loads(body)["stop_reason"] == "end_turn"
        assert model.log.requests[0]["headers"]["x-api-key"] == "sk-real"  # the real key, only upstream
    first, second = (json.loads(line) for line in record.read_text().splitlines())
    # call 1: 100 input + 40 written to the cache; call 2: 110 input + 500 read from it
    assert (first["input_tokens"], first["cache_write_tokens"], first["output_tokens"], first["stream"]) == \
        (140, 40, 20, True)
    assert (second["input_tokens"], second["cached_tokens"], second["output_tokens"]) == (610, 500, 21)
    assert first["cost_usd"] == pytest.approx((100 * 3.0 + 40 * 3.75 + 20 * 15.0) / 1e6)
    assert second["cost_usd"] == pytest.approx((110 * 3.0 + 500 * 0.3 + 21 * 15.0) / 1e6)
    assert first["model"] == "scripted-model" and first["latency"] >= first["ttfb"] >= 0
    assert len(proxy.calls) == 2
    # what the model answered: the streamed tool call (its JSON arguments in pieces), then the text
    assert first["reply"] == {"text": "", "tool_calls": [{"name": "mcp__opsbench__get_alerts", "arguments": {}}]}
    assert second["reply"] == {"text": "done", "tool_calls": []}


def test_openai_responses_stream_is_counted_with_bearer_keys(tmp_path: Path) -> None:
    record = tmp_path / "calls.jsonl"
    tools = [{"type": "namespace", "name": "mcp__opsbench", "tools": [{"type": "function", "name": "get_alerts"}]}]
    with ScriptedModel([Mcp("get_alerts")]) as model, \
            ModelProxy(model.url + "/v1", "sk-real", TOKEN, record, TABLE, key_header="authorization") as proxy:
        assert proxy.base_url.endswith("/v1")
        status, body = post(f"{proxy.base_url}/responses", {"model": "scripted-model", "stream": True,
                                                             "tools": tools, "input": []}, header="authorization")
        assert status == 200 and b"response.completed" in body and b'"namespace": "mcp__opsbench"' in body
        assert model.log.requests[0]["headers"]["authorization"] == "Bearer sk-real"
    [call] = (json.loads(line) for line in record.read_text().splitlines())
    assert (call["input_tokens"], call["cached_tokens"], call["output_tokens"]) == (1000, 0, 30)
    assert call["reply"]["tool_calls"] == [{"name": "mcp__opsbench.get_alerts", "arguments": {}}]
    assert call["cost_usd"] == pytest.approx((1000 * 3.0 + 30 * 15.0) / 1e6)


def test_openai_chat_completions_stream_is_counted(tmp_path: Path) -> None:
    record = tmp_path / "calls.jsonl"
    tools = [{"type": "function", "function": {"name": "opsbench_get_alerts", "parameters": {}}}]
    with ScriptedModel([Mcp("get_alerts")]) as model, \
            ModelProxy(model.url + "/v1", "sk-real", TOKEN, record, TABLE, key_header="authorization") as proxy:
        messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
        status, body = post(f"{proxy.base_url}/chat/completions", {
            "model": "scripted-model", "stream": True, "tools": tools, "messages": messages}, header="authorization")
        assert status == 200 and b'"name": "opsbench_get_alerts"' in body and body.endswith(b"data: [DONE]\n\n")
        messages += [{"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {
            "name": "opsbench_get_alerts", "arguments": "{}"}}]}, {"role": "tool", "tool_call_id": "c",
                                                                     "content": "ContainerNotRunning"}]
        status, body = post(f"{proxy.base_url}/chat/completions", {"model": "scripted-model", "tools": tools,
                                                                    "messages": messages}, header="authorization")
        assert status == 200 and json.loads(body)["choices"][0]["finish_reason"] == "stop"
        assert model.log.tool_results == ["ContainerNotRunning"]
    first, second = proxy.calls
    assert (first["input_tokens"], first["cached_tokens"], first["output_tokens"], first["stream"]) == \
        (2000, 0, 40, True)
    assert (second["input_tokens"], second["cached_tokens"], second["output_tokens"]) == (2100, 300, 41)
    assert second["cost_usd"] == pytest.approx((1800 * 3.0 + 300 * 0.3 + 41 * 15.0) / 1e6)
    assert first["reply"]["tool_calls"] == [{"name": "opsbench_get_alerts", "arguments": {}}]
    assert second["reply"] == {"text": "done", "tool_calls": []}


def test_gemini_stream_is_counted_with_the_model_from_the_path(tmp_path: Path) -> None:
    record = tmp_path / "calls.jsonl"
    tools = [{"functionDeclarations": [{"name": "get_alerts", "parameters": {}}]}]
    with ScriptedModel([Mcp("get_alerts"), Say("done")]) as model, \
            ModelProxy(model.url, "sk-real", TOKEN, record, TABLE, key_header="x-goog-api-key") as proxy:
        contents: list[dict[str, Any]] = [{"role": "user", "parts": [{"text": "go"}]}]
        status, body = post(f"{proxy.base_url}/v1beta/models/scripted-model:streamGenerateContent?alt=sse",
                            {"contents": contents, "tools": tools}, header="x-goog-api-key")
        assert status == 200 and body.startswith(b"data: ") and b'"functionCall"' in body
        assert model.log.requests[0]["headers"]["x-goog-api-key"] == "sk-real"
        contents += [{"role": "model", "parts": [{"functionCall": {"name": "get_alerts", "args": {}}}]},
                     {"role": "user", "parts": [{"functionResponse": {"name": "get_alerts",
                                                                      "response": {"items": []}}}]}]
        status, body = post(f"{proxy.base_url}/v1beta/models/scripted-model:generateContent",
                            {"contents": contents, "tools": tools}, header="x-goog-api-key")
        assert status == 200 and json.loads(body)["candidates"][0]["content"]["parts"] == [{"text": "done"}]
    first, second = proxy.calls
    assert (first["requested_model"], first["stream"], second["stream"]) == ("scripted-model", True, False)
    # thinking tokens are output; the cached tokens are part of the prompt's
    assert (first["input_tokens"], first["cached_tokens"], first["output_tokens"]) == (3000, 0, 57)
    assert (second["input_tokens"], second["cached_tokens"], second["output_tokens"]) == (3100, 400, 58)
    assert second["cost_usd"] == pytest.approx((2700 * 3.0 + 400 * 0.3 + 58 * 15.0) / 1e6)
    assert first["reply"]["tool_calls"] == [{"name": "get_alerts", "arguments": {}}]
    assert second["reply"] == {"text": "done", "tool_calls": []}


@pytest.mark.parametrize(("path", "header", "status", "shape"), [
    ("/v1/messages", "x-api-key", 400, {"type": "error", "error": {"type": "invalid_request_error"}}),
    ("/v1/responses", "authorization", 429, {"error": {"type": "insufficient_quota", "code": "insufficient_quota"}}),
    ("/v1/chat/completions", "authorization", 400, {"error": {"code": "insufficient_quota"}}),
    ("/v1beta/models/scripted-model:streamGenerateContent", "x-goog-api-key", 400,
     {"error": {"code": 400, "status": "FAILED_PRECONDITION"}}),
])
def test_a_spent_budget_is_refused_in_the_vendor_shape_and_recorded(tmp_path: Path, path: str, header: str,
                                                                      status: int, shape: dict[str, Any]) -> None:
    record = tmp_path / "calls.jsonl"
    bodies = {"/v1/messages": {"model": "scripted-model", "messages": []},
              "/v1/responses": {"model": "scripted-model", "input": []},
              "/v1/chat/completions": {"model": "scripted-model", "messages": []}}
    body = bodies.get(path, {"contents": []})
    with ScriptedModel([]) as model, \
            ModelProxy(model.url, "k", TOKEN, record, TABLE, key_header=header, caps=Caps(tokens=10)) as proxy:
        first = post(proxy.base_url + path, body, header=header)
        assert first[0] == 200  # nothing spent yet: forwarded (and it spends more than the cap)
        code, answer = post(proxy.base_url + path, body, header=header)
        assert len(model.log.requests) == 1  # the refused call never reached the server
    assert code == status
    doc = json.loads(answer)
    for key, value in shape.items():
        assert {k: doc[key][k] for k in value} == value if isinstance(value, dict) else doc[key] == value
    assert "budget" in json.dumps(doc)
    forwarded, refused = (json.loads(line) for line in record.read_text().splitlines())
    assert refused["status"] == "refused" and refused["budget"] == "tokens" and refused["http_status"] == status
    assert refused["input_tokens"] == 0 and refused["cost_usd"] == 0.0
    counted = model_usage(record)
    assert (counted["model_calls"], counted["model_calls_refused"], counted["model_budget"]) == (1, 1, "tokens")
    assert counted["input_tokens"] == forwarded["input_tokens"]


def test_a_reply_is_kept_short() -> None:
    body = json.dumps({"choices": [{"message": {"content": "x" * 10000, "tool_calls": [
        {"index": 0, "function": {"name": "bash", "arguments": '{"command": "' + "y" * 5000 + '"}'}},
        {"index": 1, "function": {"name": "edit", "arguments": "not json"}}]}}]}).encode()
    kept = reply.parse("/v1/chat/completions", body, "application/json").record()
    assert len(kept["text"]) == reply.MAX_TEXT
    [long, broken] = kept["tool_calls"]
    assert long["name"] == "bash" and len(long["arguments"]["_raw"]) == reply.MAX_ARGS
    assert broken["arguments"] == {"_raw": "not json"}
    assert reply.parse("/v1/unknown", body).record() == {"text": "", "tool_calls": []}


def test_caps_come_from_the_budget_and_cost_is_capped_too() -> None:
    assert Caps.of({"wallClockSeconds": 60}) == Caps()
    assert Caps.of({"tokens": 5000, "costUsd": 1}) == Caps(5000, 1.0)
    assert Caps.of({"tokens": True, "costUsd": "1"}) == Caps()  # not numbers: no cap (the schema refuses them)
    calls = [{"input_tokens": 40, "output_tokens": 10, "cost_usd": 0.3}, {"input_tokens": 10, "cost_usd": None}]
    assert Caps(tokens=61).spent(calls) is None and Caps(tokens=60).spent(calls) == "tokens"
    assert Caps(cost_usd=0.31).spent(calls) is None and Caps(cost_usd=0.3).spent(calls) == "cost_usd"
    assert refusal("/v1/messages", "m")[0] == 400 and refusal("/x/responses", "m")[0] == 429


def test_a_wrong_token_is_refused_and_never_forwarded(tmp_path: Path) -> None:
    with ScriptedModel([]) as model, ModelProxy(model.url, "sk-real", TOKEN, tmp_path / "c.jsonl", TABLE) as proxy:
        status, body = post(f"{proxy.base_url}/v1/messages", {"model": "scripted-model"}, key="sk-guess")
        assert status == 401 and b"not this run's model key" in body
        assert model.log.requests == []
    assert (tmp_path / "c.jsonl").read_text() == ""


def test_an_unpriced_model_is_recorded_without_a_cost(tmp_path: Path) -> None:
    with ScriptedModel([], model="another-model") as model, \
            ModelProxy(model.url, "k", TOKEN, tmp_path / "c.jsonl", TABLE) as proxy:
        post(f"{proxy.base_url}/v1/messages", {"model": "another-model", "messages": []})
    [call] = proxy.calls
    assert call["cost_usd"] is None and call["unpriced"] is True and call["model"] == "another-model"
    assert model_usage(tmp_path / "c.jsonl")["cost_usd"] is None  # a total that would hide a call is no total


def test_a_server_that_is_down_is_a_502_and_an_error_record(tmp_path: Path) -> None:
    proxy = ModelProxy("http://127.0.0.1:9", "k", TOKEN, tmp_path / "c.jsonl", TABLE).start()
    try:
        status, body = post(f"{proxy.base_url}/v1/messages", {"model": "scripted-model"})
    finally:
        proxy.close()
    assert status == 502 and b"did not answer" in body
    [call] = proxy.calls
    assert call["status"] == "error" and call["http_status"] is None and "ConnectionRefused" in call["error"]


def test_close_cuts_a_call_the_server_never_answers(tmp_path: Path) -> None:
    with ScriptedModel([], silent=True) as model:
        proxy = ModelProxy(model.url, "k", TOKEN, tmp_path / "c.jsonl", TABLE).start()
        outcome: list[Any] = []
        caller = threading.Thread(target=lambda: outcome.append(
            post(f"{proxy.base_url}/v1/messages", {"model": "scripted-model"}, timeout=30)), daemon=True)
        caller.start()
        deadline = time.monotonic() + 10
        while not model.log.requests and time.monotonic() < deadline:
            time.sleep(0.05)
        start = time.monotonic()
        proxy.close()
        assert time.monotonic() - start < 6
        caller.join(10)
        deadline = time.monotonic() + 5
        while not proxy.calls and time.monotonic() < deadline:
            time.sleep(0.05)
    assert proxy.calls and proxy.calls[0]["status"] == "error"


@pytest.mark.parametrize(("body", "content_type", "want"), [
    (b'{"model": "gpt-5", "usage": {"prompt_tokens": 50, "completion_tokens": 7, '
     b'"prompt_tokens_details": {"cached_tokens": 20}}}', "application/json", ("gpt-5", 50, 7, 20, 0)),
    (b'data: {"model": "gpt-5", "choices": []}\n\ndata: {"model": "gpt-5", "usage": {"prompt_tokens": 9, '
     b'"completion_tokens": 2}}\n\ndata: [DONE]\n\n', "text/event-stream", ("gpt-5", 9, 2, 0, 0)),
    (b'{"model": "claude-x", "usage": {"input_tokens": 5, "cache_read_input_tokens": 100, '
     b'"cache_creation_input_tokens": 10, "output_tokens": 3}}', "application/json", ("claude-x", 115, 3, 100, 10)),
    (b'data: {"usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 1}}\r\n\r\n'
     b'data: {"modelVersion": "gemini-2.5-pro", "usageMetadata": {"promptTokenCount": 10, "cachedContentTokenCount": 4,'
     b' "candidatesTokenCount": 6, "thoughtsTokenCount": 3, "toolUsePromptTokenCount": 2}}\r\n\r\n',
     "text/event-stream", ("gemini-2.5-pro", 12, 9, 4, 0)),
    (b'[{"usageMetadata": {"promptTokenCount": 7, "candidatesTokenCount": 2}}]', "application/json",
     (None, 7, 2, 0, 0)),
    (b"not json", "application/json", (None, 0, 0, 0, 0)),
])
def test_usage_of_each_protocol(body: bytes, content_type: str, want: tuple[Any, ...]) -> None:
    found = usage.parse(body, content_type)
    assert (found.model, found.input_tokens, found.output_tokens, found.cached_tokens, found.cache_write_tokens) \
        == want


def test_the_price_table_is_merged_and_checked(tmp_path: Path) -> None:
    table, source = prices.load({})
    assert prices.lookup(table, "claude-sonnet-4-5-20250929") == table["claude-sonnet-4-5"]  # dated ids
    assert prices.lookup(table, "scripted-model") is None
    own = tmp_path / "p.json"
    own.write_text(json.dumps({"scripted-model": {"input": 1, "output": 2}}))
    table, source = prices.load({"OPSBENCH_PRICES": str(own)})
    assert table["scripted-model"] == prices.Price(1.0, 2.0, 1.0, 1.0) and "gpt-5" in table and str(own) in source
    with pytest.raises(prices.PriceError, match=r"model 'nope' has no price in .*OPSBENCH_PRICES"):
        prices.require(table, source, "nope")


@pytest.mark.parametrize(("doc", "message"), [
    ('{"m": {"input": -1, "output": 2}}', "model 'm': input must be a number >= 0"),
    ('{"m": {"input": 1}}', "model 'm': output is missing"),
    ('{"m": {"input": 1, "output": 2, "reasoning": 3}}', "unknown field"),
    ('{"m": 3}', "expected an object"),
    ('[1]', "a price table is a JSON object"),
    ("{not json", "not JSON"),
])
def test_a_bad_price_table_is_one_error_naming_it(tmp_path: Path, doc: str, message: str) -> None:
    file = tmp_path / "prices.json"
    file.write_text(doc)
    with pytest.raises(prices.PriceError, match=message) as info:
        prices.load({"OPSBENCH_PRICES": str(file)})
    assert str(file) in str(info.value)


def test_process_metrics_take_the_proxy_count(tmp_path: Path) -> None:
    calls = tmp_path / "model-calls.jsonl"
    calls.write_text("\n".join(json.dumps(c) for c in [
        {"tool": "model", "input_tokens": 100, "output_tokens": 10, "cached_tokens": 50, "cost_usd": 0.5,
         "latency": 1.5},
        {"tool": "model", "input_tokens": 200, "output_tokens": 20, "cached_tokens": 0, "cost_usd": 0.25,
         "latency": 0.5}]) + "\nnot json\n")
    reported = tmp_path / "agent-trajectory.jsonl"  # what the agent says it spent: the proxy's count wins
    reported.write_text(json.dumps({"tool": "llm", "input_tokens": 1, "output_tokens": 1}) + "\n")
    scores = score_process(None, None, {}, reported, calls)
    assert (scores["model_calls"], scores["input_tokens"], scores["output_tokens"], scores["cached_tokens"],
            scores["cost_usd"], scores["model_seconds"]) == (2, 300, 30, 50, 0.75, 2.0)
    plain = score_process(None, None, {}, reported)
    assert plain["model_calls"] is None and plain["cost_usd"] is None and plain["input_tokens"] == 1
