"""Agent presets without the CLIs (orchestrator/agents/presets): resolving `--agent NAME`, the one error a preset
that cannot run gives before anything deploys, the prompt, each CLI's own configuration, the answer taken from
what the CLI left, and the route that keeps the vendor key out of the agent's environment. The real CLIs run in
tests/e2e/test_agent_presets.py (`make test-agents`)."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from orchestrator import paths
from orchestrator import store as store_mod
from orchestrator.agents import presets
from orchestrator.agents.presets import claude_code, codex, gemini_cli, opencode, prompt, route, run
from orchestrator.agents.presets.runtime import Context
from orchestrator.cli import main as opsbench

SCHEMA = paths.PROJECT_ROOT / "orchestrator" / "schemas" / "diagnosis_output.schema.json"
READY = {"ANTHROPIC_API_KEY": "sk-a", "ANTHROPIC_BASE_URL": "http://127.0.0.1:8000",
         "OPENAI_API_KEY": "sk-o", "OPENAI_BASE_URL": "http://127.0.0.1:8001/v1",
         "GEMINI_API_KEY": "sk-g", "GOOGLE_GEMINI_BASE_URL": "http://127.0.0.1:8002"}


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A prefix that looks like `make agents` ran (package.json at the pinned versions, the binaries' links)."""
    prefix = tmp_path / "agents"
    for p in presets.PRESETS.values():
        pkg = prefix / "node_modules" / p.package
        pkg.mkdir(parents=True)
        (pkg / "package.json").write_text(json.dumps({"name": p.package, "version": p.version}))
        (prefix / "node_modules" / ".bin").mkdir(exist_ok=True)
        (prefix / "node_modules" / ".bin" / p.binary).write_text("#!/bin/sh\n")
    monkeypatch.setattr(presets, "PREFIX", prefix)
    return prefix


def manifest(tmp_path: Path) -> dict[str, Any]:
    return {"manifest_version": "opsbench/manifest/v1", "run": "r",
            "tasks": [{"id": "t1", "kind": "diagnose", "goal": "Users see errors. Find the root cause."}],
            "alerts": [{"labels": {"alertname": "ServiceDown", "service": "cart", "severity": "critical"},
                        "annotations": {"summary": "cart-1 does not answer"}}],
            "budget": {"wallClockSeconds": 300, "steps": 40}, "deadline": 1000.0 + 240,
            "tools": {"url": "http://127.0.0.1:7000", "mcp_url": "http://127.0.0.1:7000/mcp"},
            "token_file": str(tmp_path / "token"),
            "output": {"path": str(tmp_path / "output.json"), "schemas": {"diagnose": str(SCHEMA)}}}


def test_an_ordinary_command_passes_through() -> None:
    assert presets.resolve("python my_agent.py --model x", {}) == "python my_agent.py --model x"
    assert presets.resolve(None, {}) is None
    assert presets.from_command("python -m orchestrator.agents.heuristic") is None


def test_a_ready_preset_resolves_to_its_runner(installed: Path) -> None:
    command = presets.resolve("codex --model gpt-5", READY)
    assert command is not None
    assert presets.from_command(command) == presets.Choice(presets.PRESETS["codex"], "gpt-5")
    default = presets.resolve("claude-code", {**READY, "ANTHROPIC_MODEL": "claude-haiku-4-5"})
    assert default is not None and default.endswith("claude-code --model claude-haiku-4-5")
    assert store_mod.agent_identity(default) == ("claude-code", "claude-haiku-4-5")  # the leaderboard's label


def test_every_problem_is_one_error(installed: Path, tmp_path: Path) -> None:
    (installed / "node_modules" / ".bin" / "claude").unlink()
    with pytest.raises(presets.PresetError) as info:
        presets.resolve("claude-code --model unpriced-model", {"ANTHROPIC_BASE_URL": "ftp://x"})
    message = str(info.value)
    for expected in ("claude-code is not installed", "run `make agents`", "needs ANTHROPIC_API_KEY",
                     "ANTHROPIC_BASE_URL='ftp://x' is not an http(s) URL", "'unpriced-model' has no price"):
        assert expected in message, message
    with pytest.raises(presets.PresetError, match="takes only --model"):
        presets.resolve("codex --yolo", READY)


def test_an_old_install_is_refused(installed: Path) -> None:
    (installed / "node_modules" / "@openai" / "codex" / "package.json").write_text(json.dumps({"version": "0.1.0"}))
    with pytest.raises(presets.PresetError, match=r"holds @openai/codex@0\.1\.0, this OpsBench pins"):
        presets.resolve("codex", READY)


def test_bad_input_stops_run_replay_and_campaign_before_anything_deploys(home: Path, installed: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    for var in READY:
        monkeypatch.delenv(var, raising=False)
    snapshot = next((paths.PROJECT_ROOT / "tests" / "data" / "snapshots").glob("shop-cart-down-*.tar.gz"))
    for args in (["run", "shop-cart-down", "--agent", "claude-code"],
                 ["replay", str(snapshot), "--agent", "codex"],
                 ["campaign", "shop-cart-down", "--agent", "claude-code", "--name", "p"],
                 ["campaign", "--snapshots", str(snapshot.parent), "--agent", "codex", "--name", "q"]):
        result = CliRunner().invoke(opsbench, args)
        assert result.exit_code == 2, (args, result.output)
        assert "cannot run" in result.output and "needs" in result.output, result.output
        assert "Traceback" not in result.output
    assert not (home / "runs").exists() or not any((home / "runs").iterdir())


def test_agents_lists_presets_and_what_they_need(installed: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for var, value in READY.items():
        monkeypatch.setenv(var, value)
    monkeypatch.delenv("OPENAI_API_KEY")
    result = CliRunner().invoke(opsbench, ["agents", "--json"])
    rows = {r["name"]: r for r in json.loads(result.output)}
    assert rows["claude-code"]["ready"] and rows["claude-code"]["installed"] == "2.1.332"
    assert not rows["codex"]["ready"] and rows["codex"]["set"] == {"OPENAI_API_KEY": False, "OPENAI_BASE_URL": True}
    assert "sk-a" not in result.output  # whether a key is set, never its value
    text = CliRunner().invoke(opsbench, ["agents"]).output
    assert "OPENAI_API_KEY (missing)" in text and "not ready" in text


def test_the_prompt_comes_from_the_manifest(tmp_path: Path) -> None:
    text = prompt.build(manifest(tmp_path), now=1000.0)
    for expected in ("Users see errors. Find the root cause.", "ServiceDown", "cart-1 does not answer",
                     "about 240 seconds and 40 tool calls", 'MCP server "opsbench"', "answer.json",
                     "opsbench/diagnosis/v1", "get_topology"):
        assert expected in text, expected


def context(tmp_path: Path) -> Context:
    return Context(binary=Path("/x/bin/cli"), model="m1", base_url="http://10.0.2.2:5000/v1",
                   mcp_url="http://10.0.2.2:7000/mcp", token="gw-token", prompt="PROMPT", home=tmp_path / "home",
                   workspace=tmp_path)


def test_claude_code_gets_its_own_mcp_config(tmp_path: Path) -> None:
    launch = claude_code.launch(context(tmp_path))
    config = Path(launch.argv[launch.argv.index("--mcp-config") + 1])
    assert config.is_relative_to(tmp_path / "home") and config.stat().st_mode & 0o077 == 0
    assert json.loads(config.read_text()) == {"mcpServers": {"opsbench": {
        "type": "http", "url": "http://10.0.2.2:7000/mcp", "headers": {"Authorization": "Bearer gw-token"}}}}
    assert launch.argv[:3] == ["/x/bin/cli", "-p", "PROMPT"] and "--strict-mcp-config" in launch.argv
    assert "gw-token" not in " ".join(launch.argv)
    assert launch.env["ANTHROPIC_SMALL_FAST_MODEL"] == "m1" and launch.env["ENABLE_TOOL_SEARCH"] == "false"


def test_codex_gets_its_own_config_toml(tmp_path: Path) -> None:
    launch = codex.launch(context(tmp_path))
    config = tomllib.loads((tmp_path / "home" / ".codex" / "config.toml").read_text())
    assert config["model"] == "m1" and config["model_provider"] == "opsbench"
    assert config["model_providers"]["opsbench"] == {"name": "OpsBench model proxy",
                                                     "base_url": "http://10.0.2.2:5000/v1",
                                                     "env_key": "OPENAI_API_KEY", "wire_api": "responses"}
    assert config["mcp_servers"]["opsbench"]["url"] == "http://10.0.2.2:7000/mcp"
    assert config["mcp_servers"]["opsbench"]["bearer_token_env_var"] == "OPSBENCH_MCP_TOKEN"
    assert launch.env["OPSBENCH_MCP_TOKEN"] == "gw-token" and launch.argv[1:3] == ["exec", "--json"]
    assert "gw-token" not in (tmp_path / "home" / ".codex" / "config.toml").read_text()


def test_gemini_cli_gets_its_own_settings_json(tmp_path: Path) -> None:
    launch = gemini_cli.launch(context(tmp_path))
    config = tmp_path / "home" / ".gemini" / "settings.json"
    assert config.stat().st_mode & 0o077 == 0
    settings = json.loads(config.read_text())
    assert settings["mcpServers"] == {"opsbench": {"httpUrl": "http://10.0.2.2:7000/mcp", "timeout": 120000,
                                                   "headers": {"Authorization": "Bearer gw-token"}, "trust": True}}
    assert settings["security"]["auth"]["selectedType"] == "gemini-api-key"
    assert settings["telemetry"]["enabled"] is False and settings["privacy"]["usageStatisticsEnabled"] is False
    assert launch.argv[:5] == ["/x/bin/cli", "-p", "PROMPT", "-m", "m1"] and "--yolo" in launch.argv
    assert launch.argv[-2:] == ["--allowed-mcp-server-names", "opsbench"] and "gw-token" not in " ".join(launch.argv)
    transcript = tmp_path / "cli.jsonl"
    transcript.write_text("\n".join(json.dumps(e) for e in [
        {"type": "message", "role": "assistant", "content": "looking", "delta": True},
        {"type": "tool_use", "tool_name": "mcp_opsbench_get_alerts"},
        {"type": "message", "role": "assistant", "content": '{"entities": ', "delta": True},
        {"type": "message", "role": "assistant", "content": "[]}", "delta": True}, {"type": "result"}]))
    assert gemini_cli.final_text(transcript) == '{"entities": []}'


def test_opencode_gets_its_own_config_with_the_token_from_the_environment(tmp_path: Path) -> None:
    launch = opencode.launch(context(tmp_path))
    config = json.loads(Path(launch.env["OPENCODE_CONFIG"]).read_text())
    assert Path(launch.env["OPENCODE_CONFIG"]).is_relative_to(tmp_path / "home")
    assert config["provider"]["opsbench"]["npm"] == "@ai-sdk/openai-compatible"  # Chat Completions, bundled
    assert config["provider"]["opsbench"]["options"] == {"baseURL": "http://10.0.2.2:5000/v1",
                                                         "apiKey": "{env:OPENAI_API_KEY}"}
    assert config["model"] == config["small_model"] == "opsbench/m1"  # its title calls are priced too
    assert config["mcp"]["opsbench"]["headers"] == {"Authorization": "Bearer {env:OPSBENCH_MCP_TOKEN}"}
    assert config["permission"]["webfetch"] == "deny" and launch.env["OPSBENCH_MCP_TOKEN"] == "gw-token"
    assert launch.env["OPENCODE_DISABLE_MODELS_FETCH"] == launch.env["OPENCODE_DISABLE_PROJECT_CONFIG"] == "1"
    assert launch.argv[1:6] == ["run", "--format", "json", "-m", "opsbench/m1"] and launch.argv[-1] == "PROMPT"
    assert "gw-token" not in Path(launch.env["OPENCODE_CONFIG"]).read_text()
    transcript = tmp_path / "cli.jsonl"
    transcript.write_text("\n".join(json.dumps(e) for e in [
        {"type": "text", "part": {"type": "text", "text": "first"}}, {"type": "tool_use", "part": {}},
        {"type": "text", "part": {"type": "text", "text": "the answer"}}]))
    assert opencode.final_text(transcript) == "the answer"


def test_the_route_caps_the_proxy_with_the_manifest_budget(tmp_path: Path, installed: Path) -> None:
    agent_dir = tmp_path / "run" / "agent"
    agent_dir.mkdir(parents=True)
    (agent_dir / "manifest.json").write_text(json.dumps({"budget": {"wallClockSeconds": 60, "tokens": 5000,
                                                                    "costUsd": 0.5}}))
    choice = presets.Choice(presets.PRESETS["gemini-cli"], "gemini-2.5-pro")
    with route.model_route(choice.command, agent_dir, READY) as r:
        assert r.proxy is not None and (r.proxy.caps.tokens, r.proxy.caps.cost_usd) == (5000, 0.5)
        assert r.env["GOOGLE_GEMINI_BASE_URL"] == f"http://127.0.0.1:{r.proxy.port}"
        assert r.env["GEMINI_API_KEY"].startswith("opsbench-") and r.proxy.key_header == "x-goog-api-key"
        assert {"ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GOOGLE_API_KEY"} <= r.hide
        assert r.record()["caps"] == {"tokens": 5000, "cost_usd": 0.5}
    text = prompt.build({**manifest(tmp_path), "budget": {"wallClockSeconds": 300, "steps": 40, "tokens": 5000,
                                                          "costUsd": 0.5}}, now=1000.0)
    assert "40 tool calls, 5000 model tokens and $0.5 of model use" in text


def test_a_scenario_budget_may_cap_tokens_and_cost() -> None:
    import jsonschema

    from orchestrator.schemacheck import load_schema

    for name in ("scenario", "manifest"):
        budget = jsonschema.Draft202012Validator(load_schema(name)["properties"]["budget"])
        assert budget.is_valid({"wallClockSeconds": 60, "steps": 10, "tokens": 20000, "costUsd": 0.25})
    scenario = jsonschema.Draft202012Validator(load_schema("scenario")["properties"]["budget"])
    for bad in ({"tokens": 0}, {"tokens": 1.5}, {"costUsd": 0}, {"costUsd": "1"}, {"dollars": 1}):
        assert not scenario.is_valid({"wallClockSeconds": 60, **bad}), bad


def test_the_answer_file_wins_then_the_final_message(tmp_path: Path) -> None:
    assert run.take_answer(tmp_path, "")[0] is None
    final = 'Here it is:\n```json\n{"schema": "opsbench/diagnosis/v1", "entities": []}\n```\nand {"x": 1}'
    answer, source = run.take_answer(tmp_path, final)
    assert answer == {"schema": "opsbench/diagnosis/v1", "entities": []} and source == "the CLI's final message"
    (tmp_path / "answer.json").write_text('{"entities": [{"id": "cart-1"}]}')
    assert run.take_answer(tmp_path, final) == ({"entities": [{"id": "cart-1"}]}, "answer.json")
    (tmp_path / "answer.json").write_text("{broken")
    answer, why = run.take_answer(tmp_path, final)
    assert answer is None and "not JSON" in why
    assert run.schema_problems({"entities": "no"}, {"diagnose": str(SCHEMA)})[0].startswith("diagnose: entities")


def test_the_route_keeps_the_key_out_and_allows_only_the_proxy(tmp_path: Path, installed: Path) -> None:
    agent_dir = tmp_path / "run" / "agent"
    agent_dir.mkdir(parents=True)
    choice = presets.Choice(presets.PRESETS["claude-code"], "claude-sonnet-4-5")
    environ = {**READY, "OPSBENCH_AGENT_ALLOW": "127.0.0.1:8000,10.1.2.3:9000"}
    with route.model_route(choice.command, agent_dir, environ) as r:
        assert r.proxy is not None
        port = r.proxy.port
        assert r.env["ANTHROPIC_BASE_URL"] == f"http://127.0.0.1:{port}" and r.env["ANTHROPIC_API_KEY"] != "sk-a"
        assert r.env["ANTHROPIC_API_KEY"].startswith("opsbench-") and "OPENAI_API_KEY" in r.hide
        assert r.sandbox_environ is not None
        assert r.sandbox_environ["OPSBENCH_AGENT_ALLOW"] == f"10.1.2.3:9000,127.0.0.1:{port}"  # upstream dropped
        assert str(installed) in r.sandbox_environ["OPSBENCH_AGENT_VISIBLE"]
        assert r.record()["upstream"] == "http://127.0.0.1:8000" and "sk-a" not in json.dumps(r.record())
    assert (tmp_path / "run" / "gateway" / "model-calls.jsonl").exists()
    with route.model_route("python -m orchestrator.agents.heuristic", agent_dir, environ) as plain:
        assert plain.proxy is None and plain.env == {} and plain.sandbox_environ is None


def test_the_leaderboard_shows_turns_tokens_and_cost_when_counted() -> None:
    from orchestrator import results

    base = {"agent": "claude-code (m) [replay]", "scenarios": 1, "trials": 2, "pass_at_k": 1.0, "pass_at_k_se": 0.0,
            "ntam_fl": 1.0, "ntam_fl_se": 0.0, "ntam_fpc": 1.0, "ntam_fpc_se": 0.0, "no_submission_rate": 0.0,
            "malformed_rate": 0.0, "mttd": 4.0, "mttd_se": 0.1, "mttr": None, "mttr_se": None, "excluded": 0}
    counted = {**base, "model_calls": 5.0, "input_tokens": 6000.0, "output_tokens": 160.0, "cost_usd": 0.0087}
    plain = {**base, "agent": "heuristic [replay]", "model_calls": None}
    text = results.render_leaderboard([counted, plain])
    assert "TURNS" in text and "COST ($/TRIAL)" in text
    assert "5.0    6000/160       0.0087" in text.splitlines()[1]
    assert text.splitlines()[2].rstrip().endswith("—      —              —")
    assert "TURNS" not in results.render_leaderboard([plain])  # no counted agent: Table 4's columns only


def test_claude_codes_answer_is_its_last_result_event(tmp_path: Path) -> None:
    from orchestrator.agents.presets import claude_code

    transcript = tmp_path / "cli.jsonl"
    transcript.write_text('not json\n[1, 2]\n{"type": "result", "result": "first"}\n'
                          '{"type": "assistant"}\n{"type": "result", "result": "last"}\n')
    assert claude_code.final_text(transcript) == "last"
    assert claude_code.final_text(tmp_path / "missing.jsonl") == ""
