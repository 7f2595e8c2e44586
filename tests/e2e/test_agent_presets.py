"""The agent presets with the real CLIs (installed by `make agents`) against scripted model servers, on a replay of
the committed sample snapshot of shop-cart-down: `make test-agents` (marker `agents`; not in `make test`: the CLIs
are ~1.3 GB of native binaries and bundles, which CI does not install).

For Claude Code (Anthropic Messages, streaming, tool use), Codex CLI (OpenAI Responses, streaming, namespaced MCP
function calls), Gemini CLI (Gemini streamGenerateContent, function calls) and OpenCode (OpenAI Chat Completions,
streaming tool calls), a scripted model (tests/e2e/model_scripts.py) drives the CLI to call the gateway's MCP tools
and to write the answer with its own shell; the run scores, and the recording proxy counted exactly what the server
reported. A script that sends the CLI's shell after the ground truth, Prometheus, the model server itself and
files outside its directory is refused by the sandbox, and the run still finishes and scores. A model server that
never answers ends at the deadline with no submission and nothing left running. A token budget spent after the
first call: the proxy refuses the next in the vendor's error shape, records it, and the CLI stops by itself.
"""

from __future__ import annotations

import json
import re
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from orchestrator import atif, paths
from orchestrator.agent import run_command_agent
from orchestrator.agents.presets import PREFIX, PRESETS, Choice
from orchestrator.evaluation.process import model_usage
from tests.e2e.conftest import run_cli, wait_for
from tests.e2e.model_scripts import Log, Mcp, Say, ScriptedModel, Shell, Step

pytestmark = [pytest.mark.e2e, pytest.mark.agents]

SAMPLE = next((paths.PROJECT_ROOT / "tests" / "data" / "snapshots").glob("shop-cart-down-*.tar.gz"))
SCHEMA = paths.PROJECT_ROOT / "orchestrator" / "schemas" / "diagnosis_output.schema.json"
GROUND_TRUTH = paths.PROJECT_ROOT / "scenario_specs" / "shop-cart-down" / "ground_truth.yaml"
SECRET = "sk-test-not-for-the-agent"
PRICES = {"scripted-model": {"input": 3.0, "output": 15.0, "cached_input": 0.3, "cache_write": 3.75}}
ANSWER = {"schema": "opsbench/diagnosis/v1", "incident": True,
          "entities": [{"id": "cart-1", "root_cause": True, "layer": "runtime", "fault_type": "process_down"}],
          "propagations": [{"source": "cart-1", "target": "frontend"}, {"source": "frontend", "target": "gateway"}],
          "explanation": "cart-1 is down; the frontend's cart calls fail; users see errors at the gateway"}
WRITE_ANSWER = Shell("cat > answer.json <<'EOF'\n" + json.dumps(ANSWER) + "\nEOF")


@pytest.fixture(params=sorted(PRESETS))
def preset(request: pytest.FixtureRequest) -> str:
    name = str(request.param)
    assert PRESETS[name].installed_version() == PRESETS[name].version, f"{name} is not installed: run `make agents`"
    return name


@pytest.fixture
def prices(tmp_path: Path) -> Path:
    file = tmp_path / "prices.json"
    file.write_text(json.dumps(PRICES))
    return file


GENERATION = ("/messages", "/responses", "/chat/completions", ":streamGenerateContent", ":generateContent")


def vendor_env(preset: str, model: ScriptedModel, prices: Path) -> dict[str, str]:
    p = PRESETS[preset]
    base = model.url + ("/v1" if p.vendor == "openai" else "")
    return {p.url_env: base, p.key_env: SECRET, "OPSBENCH_PRICES": str(prices)}


def replay(home: Path, preset: str, model: ScriptedModel, prices: Path) -> tuple[dict[str, Any], Path]:
    """One replay trial of the preset on the sample: its record and its run directory."""
    done = run_cli(home, "replay", str(SAMPLE), "--agent", f"{preset} --model scripted-model", "--json",
                   timeout=600, **vendor_env(preset, model, prices))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    [trial] = json.loads(done.stdout)["trials"]
    [run_dir] = list((home / "runs").glob(f"*/trials/{trial['run_id']}"))
    return trial, run_dir


def expected_usage(log: Log) -> dict[str, float]:
    """What the proxy should have counted: the server's reported usage, every prompt token in `input`."""
    total = {"input": 0.0, "output": 0.0, "cached": 0.0, "cost": 0.0}
    price = PRICES["scripted-model"]
    for u in log.usages:
        if "input_tokens_details" in u:  # Responses: input includes the cached tokens
            inp, cached, write, out = u["input_tokens"], u["input_tokens_details"]["cached_tokens"], 0, \
                u["output_tokens"]
        elif "prompt_tokens" in u:  # Chat Completions: the same, named otherwise
            inp, cached, write, out = u["prompt_tokens"], u["prompt_tokens_details"]["cached_tokens"], 0, \
                u["completion_tokens"]
        elif "promptTokenCount" in u:  # Gemini: thinking is billed as output
            inp, cached, write = u["promptTokenCount"], u["cachedContentTokenCount"], 0
            out = u["candidatesTokenCount"] + u["thoughtsTokenCount"]
        else:  # Messages: input excludes cache reads and writes
            cached, write = u.get("cache_read_input_tokens", 0), u.get("cache_creation_input_tokens", 0)
            inp, out = u["input_tokens"] + cached + write, u["output_tokens"]
        total["input"] += inp
        total["output"] += out
        total["cached"] += cached
        total["cost"] += ((inp - cached - write) * price["input"] + cached * price["cached_input"]
                          + write * price["cache_write"] + out * price["output"]) / 1e6
    return total


def cli_processes() -> list[str]:
    """Processes still running a preset's CLI (any binary under the agents' prefix)."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if str(PREFIX) in cmdline:
                found.append(f"{proc.name}: {cmdline[:200]}")
    return found


def host_prometheus(home: Path) -> str:
    """The frozen Prometheus of the replay under way (read from its host's run.json)."""
    for state in sorted((home / "runs").glob("*/run.json")):
        found = re.search(r'"prometheus": "(http://127\.0\.0\.1:\d+)"', state.read_text())
        if found:
            return found.group(1)
    return "http://127.0.0.1:9"


def test_a_preset_investigates_over_mcp_and_every_model_call_is_counted(tmp_path: Path, preset: str,
                                                                        prices: Path) -> None:
    home = tmp_path / "home"
    script: list[Step] = [Mcp("get_alerts", {}), Mcp("get_topology", {}), Mcp("query_metrics", {"query": "up"}),
                          WRITE_ANSWER, Say("The diagnosis is in answer.json.")]
    with ScriptedModel(script) as model:
        trial, run_dir = replay(home, preset, model, prices)
    assert trial["status"] == "completed" and trial["passed"] is True, trial
    # the gateway's tools were called over MCP, and answered (the CLI passed their results back to the model)
    calls = [json.loads(line) for line in (run_dir / "artifacts" / "trajectory.jsonl").read_text().splitlines()]
    assert {"get_alerts", "get_topology", "query_metrics"} <= {c["tool"] for c in calls if c["status"] == "ok"}
    assert {c.get("transport") for c in calls} == {"mcp"}, calls
    assert any("ContainerNotRunning" in r for r in model.log.tool_results), model.log.tool_results
    # the proxy counted every call exactly as the server reported it, and priced it from OPSBENCH_PRICES
    process, want = trial["scores"]["process"], expected_usage(model.log)
    generation = [r for r in model.log.requests if r["path"].endswith(GENERATION)]
    assert process["model_calls"] == len(generation) == len(model.log.usages) >= len(script)
    assert (process["input_tokens"], process["output_tokens"], process["cached_tokens"]) == \
        (want["input"], want["output"], want["cached"])
    assert process["cost_usd"] == pytest.approx(want["cost"], abs=1e-6) and process["cost_usd"] > 0
    # the real key never reached the CLI: the server saw the run's proxy token, and no file of the run holds the key
    keys = {r["headers"].get("x-api-key") or r["headers"].get("x-goog-api-key")
            or r["headers"].get("authorization", "").removeprefix("Bearer ") for r in model.log.requests}
    assert keys == {SECRET}, "the proxy forwards the real key upstream"
    agent_dir = run_dir / "agent"
    preset_record = json.loads((agent_dir / "preset.json").read_text())
    assert preset_record["answer"] == "answer.json" and preset_record["schema_problems"] == [], preset_record
    leaked = [f for f in home.rglob("*") if f.is_file() and SECRET.encode() in f.read_bytes()]
    assert not leaked, leaked
    state = json.loads((run_dir / "run.json").read_text())
    assert state["results"]["agent"]["isolation"]["model_proxy"]["calls"] == len(generation)
    assert not cli_processes()
    # results --json carries the tokens, cost and turns of the preset's trials
    done = run_cli(home, "results", "--json")
    [row] = [r for r in json.loads(done.stdout)["scenarios"] if r["agent_name"] == preset]
    assert row["model_calls"] == len(generation) and row["cost_usd"] == pytest.approx(want["cost"], abs=1e-6)
    # the trial's trajectory in ATIF: one step per model call, the MCP calls with their answers, the same totals
    done = run_cli(home, "show", trial["run_id"], "--atif")
    assert done.returncode == 0, done.stderr[-2000:]
    doc = json.loads(done.stdout)
    assert atif.problems(doc) == [] and doc["agent"]["name"] == preset
    assert sum(1 for s in doc["steps"] if s.get("llm_call_count") == 1) == len(generation)
    answered = {r["source_call_id"]: r["content"] for s in doc["steps"]
                for r in (s.get("observation") or {}).get("results") or []}
    called = {c["function_name"]: answered.get(c["tool_call_id"]) for s in doc["steps"]
              for c in s.get("tool_calls") or []}
    for tool in ("get_alerts", "get_topology", "query_metrics"):  # as the CLI names them, answered by the gateway
        [name] = [n for n in called if n == tool or n.endswith(("_" + tool, "." + tool))]
        assert called[name], (name, doc["steps"])
    assert "ContainerNotRunning" in str(called[next(n for n in called if n.endswith("get_alerts"))])
    # the CLI's own shell call that wrote the answer is a tool call of its step too (its result is not recorded)
    assert any("answer.json" in json.dumps(c["arguments"]) for s in doc["steps"] for c in s.get("tool_calls") or [])
    assert doc["final_metrics"]["total_prompt_tokens"] == want["input"]
    assert doc["final_metrics"]["total_cost_usd"] == pytest.approx(want["cost"], abs=1e-6)


def test_the_cli_shell_is_contained_and_the_run_still_scores(tmp_path: Path, preset: str, prices: Path) -> None:
    home = tmp_path / "home"
    inside = paths.PROJECT_ROOT / f"presets-probe-{preset}.txt"
    outside = paths.PROJECT_ROOT.parent / f"opsbench-presets-probe-{preset}.txt"
    holder: dict[str, str] = {}

    def probe() -> str:
        prometheus = host_prometheus(home)
        holder["prometheus"] = prometheus
        return (f"cat {GROUND_TRUTH}; echo gt-exit=$?; "
                f"curl -sS -m 5 '{prometheus}/api/v1/query?query=up'; echo prom-exit=$?; "
                f"curl -sS -m 5 {holder['model']}/v1/models; echo model-exit=$?; "
                f"echo pwned > {inside}; echo inside-exit=$?; echo pwned > {outside}; echo outside-exit=$?")

    script: list[Step] = [Shell(probe), Mcp("get_alerts", {}), WRITE_ANSWER, Say("done")]
    with ScriptedModel(script) as model:
        holder["model"] = model.url
        trial, run_dir = replay(home, preset, model, prices)
    assert trial["status"] == "completed" and trial["passed"] is True, trial
    [probed] = [r for r in model.log.tool_results if "gt-exit=" in r]
    exits = dict(re.findall(r"(\w+)-exit=(\d+)", probed))
    assert set(exits) == {"gt", "prom", "model", "inside", "outside"}, probed
    assert all(code != "0" for code in exits.values()), probed  # every probe refused
    assert "rootCause" not in probed and "process_down" not in probed, probed
    assert not inside.exists() and not outside.exists()
    assert holder["prometheus"] != "http://127.0.0.1:9", "the probe never learnt the frozen Prometheus' address"
    isolation = json.loads((run_dir / "run.json").read_text())["results"]["agent"]["isolation"]
    proxy_port = int(isolation["model_proxy"]["proxy"].rsplit(":", 1)[1])
    model_port = int(holder["model"].rsplit(":", 1)[1])
    assert proxy_port in isolation["network"]["host_ports"] and model_port not in isolation["network"]["host_ports"]
    assert not cli_processes()


@pytest.fixture
def silent_model() -> Iterator[ScriptedModel]:
    with ScriptedModel([], silent=True) as model:
        yield model


def bare_run(tmp_path: Path, budget: dict[str, Any]) -> Path:
    """A run directory with a manifest and no gateway (a port nobody listens on: the CLI's MCP server fails), for
    the agent step alone; its agent dir."""
    run = tmp_path / "run"
    agent_dir = run / "agent"
    (agent_dir / "workspace").mkdir(parents=True)
    (run / "gateway").mkdir()
    token = run / "token"
    token.write_text("gateway-token")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    (agent_dir / "manifest.json").write_text(json.dumps({
        "manifest_version": "opsbench/manifest/v1", "run": "r", "tasks": [{"id": "t", "kind": "diagnose",
                                                                           "goal": "Find the root cause."}],
        "budget": budget, "deadline": time.time() + budget["wallClockSeconds"],
        "tools": {"url": f"http://127.0.0.1:{dead}", "mcp_url": f"http://127.0.0.1:{dead}/mcp"},
        "token_file": str(token), "output": {"path": str(agent_dir / "output.json"),
                                             "schemas": {"diagnose": str(SCHEMA)}}}))
    return agent_dir


def test_a_model_server_that_never_answers_ends_at_the_deadline(tmp_path: Path, preset: str, prices: Path,
                                                                silent_model: ScriptedModel,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    budget = 25
    agent_dir = bare_run(tmp_path, {"wallClockSeconds": budget})
    run = agent_dir.parent
    for key, value in vendor_env(preset, silent_model, prices).items():
        monkeypatch.setenv(key, value)
    start = time.monotonic()
    result = run_command_agent(Choice(PRESETS[preset], "scripted-model").command, agent_dir, "r", budget + 20,
                               lambda: False, lambda pid: None)
    elapsed = time.monotonic() - start
    assert result.status == "crashed" and result.exit_code == 1, result  # the runner's own end: no answer
    assert elapsed < budget + 5, elapsed
    assert not (agent_dir / "output.json").exists()
    record = json.loads((agent_dir / "preset.json").read_text())
    assert record["exit_code"] is None and "stopped" in record["cli"] and record["answer"] is None, record
    assert silent_model.log.requests, "the CLI never reached the model server"
    record_file = run / "gateway" / "model-calls.jsonl"
    wait_for(lambda: bool(record_file.read_text().strip()), 10, "the proxy to record the cut call")
    calls = [json.loads(line) for line in record_file.read_text().splitlines()]
    assert calls and all(c["status"] == "error" for c in calls), calls  # cut when the agent ended
    assert not cli_processes()


def test_a_spent_token_budget_is_refused_and_the_cli_stops(tmp_path: Path, preset: str, prices: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """budget.tokens: the first call spends more than the cap, so the proxy refuses the next one in the vendor's
    error shape; the CLI takes it as an account that cannot pay and ends by itself, well before the deadline."""
    budget = 90
    agent_dir = bare_run(tmp_path, {"wallClockSeconds": budget, "tokens": 10})
    with ScriptedModel([Shell("echo one"), Shell("echo two"), Say("done")], follow_all=True) as model:
        for key, value in vendor_env(preset, model, prices).items():
            monkeypatch.setenv(key, value)
        start = time.monotonic()
        result = run_command_agent(Choice(PRESETS[preset], "scripted-model").command, agent_dir, "r", budget + 20,
                                   lambda: False, lambda pid: None)
        elapsed = time.monotonic() - start
        served = len(model.log.usages)
    record = json.loads((agent_dir / "preset.json").read_text())
    assert record["exit_code"] is not None, (record, elapsed)  # the CLI ended by itself, not at the deadline
    calls = [json.loads(line) for line in (agent_dir.parent / "gateway" / "model-calls.jsonl").read_text()
             .splitlines()]
    forwarded = [c for c in calls if c["status"] != "refused"]
    refused = [c for c in calls if c["status"] == "refused"]
    assert len(forwarded) == served >= 1 and refused, calls  # nothing past the cap reached the server
    assert all(c["budget"] == "tokens" and c["input_tokens"] == 0 for c in refused)
    assert model_usage(agent_dir.parent / "gateway" / "model-calls.jsonl")["model_budget"] == "tokens"
    assert result.status in ("exited", "crashed") and elapsed < budget, (result, elapsed)
    assert not cli_processes()
    print(f"{preset}: stopped {elapsed:.1f}s in after {len(refused)} refused call(s)")
