"""A preset inside the sandbox: ``python -m orchestrator.agents.presets.run NAME --model MODEL``.

Started by the agent step like any command agent (``resolve`` turns ``--agent NAME`` into this command), it
writes the CLI's own MCP configuration in the private HOME, builds the prompt from the manifest, runs the CLI
headless in the workspace until a little before the deadline, and then takes the answer: the ``answer.json`` the
prompt asked for, else a JSON document in the CLI's final message. A JSON object goes to ``$OPSBENCH_OUTPUT`` (the
evaluators score it, ``malformed`` when it breaks the schema); no answer leaves no output (``no_submission``). Why,
and what the CLI did, is in ``<agent dir>/preset.json`` (exit code, time, schema problems) and ``cli.jsonl`` (the
CLI's own event stream).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import jsonschema

from orchestrator.agents.gateway_client import open_session
from orchestrator.agents.presets import PRESETS, Preset, claude_code, codex, gemini_cli, opencode
from orchestrator.agents.presets.prompt import ANSWER, build
from orchestrator.agents.presets.runtime import Context, Launch

LAUNCHERS = {"claude-code": (claude_code.launch, claude_code.final_text), "codex": (codex.launch, codex.final_text),
             "gemini-cli": (gemini_cli.launch, gemini_cli.final_text),
             "opencode": (opencode.launch, opencode.final_text)}
MARGIN = 10.0  # seconds kept before the deadline to take the answer


def json_objects(text: str) -> list[dict[str, Any]]:
    """JSON objects in free text (fenced or bare), last first: a CLI that printed its answer instead of writing it."""
    found = []
    decoder = json.JSONDecoder()
    for match in re.finditer(r"\{", text):
        try:
            obj, _ = decoder.raw_decode(text[match.start():])
        except ValueError:
            continue
        if isinstance(obj, dict):
            found.append(obj)
    return list(reversed(found))


def schema_problems(answer: dict[str, Any], schema_files: dict[str, str]) -> list[str]:
    problems = []
    for kind, path in sorted(schema_files.items()):
        schema = json.loads(Path(path).read_text())
        for error in list(jsonschema.Draft202012Validator(schema).iter_errors(answer))[:5]:
            problems.append(f"{kind}: {'/'.join(map(str, error.absolute_path)) or '$'}: {error.message[:200]}")
    return problems


def take_answer(workspace: Path, final: str) -> tuple[dict[str, Any] | None, str]:
    """(the answer, where it came from or why there is none)."""
    file = workspace / ANSWER
    if file.is_file() and not file.is_symlink():
        try:
            doc = json.loads(file.read_text())
        except (OSError, ValueError) as exc:
            return None, f"{ANSWER} is not JSON: {exc}"
        return (doc, ANSWER) if isinstance(doc, dict) else (None, f"{ANSWER} is not a JSON object")
    candidates = [o for o in json_objects(final) if "schema" in o] or json_objects(final)
    if candidates:
        return candidates[0], "the CLI's final message"
    return None, f"the CLI wrote no {ANSWER} and its final message holds no JSON object"


def private_dirs(home: Path) -> dict[str, str]:
    """The XDG base directories inside the private HOME: a caller's own (``make`` sets ``XDG_CACHE_HOME`` under the
    project) are read-only in the sandbox, and OpenCode stops when it cannot create its cache."""
    return {"XDG_CACHE_HOME": str(home / ".cache"), "XDG_CONFIG_HOME": str(home / ".config"),
            "XDG_DATA_HOME": str(home / ".local" / "share"), "XDG_STATE_HOME": str(home / ".local" / "state")}


def run_cli(launch: Launch, workspace: Path, transcript: Path, errors: Path, timeout: float) -> tuple[int | None, str]:
    """Run the CLI in its own process group; (exit code or None when stopped, what happened)."""
    env = {**os.environ, **private_dirs(Path(os.environ.get("HOME") or "/tmp")), **launch.env}
    with transcript.open("wb") as out, errors.open("wb") as err:
        proc = subprocess.Popen(launch.argv, cwd=workspace, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=err, start_new_session=True)
        try:
            code = proc.wait(max(1.0, timeout))
            return code, f"exited {code}"
        except subprocess.TimeoutExpired:
            for sig in (signal.SIGTERM, signal.SIGKILL):
                try:
                    os.killpg(proc.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    proc.wait(3)
                    break
                except subprocess.TimeoutExpired:
                    continue
            return None, f"still running {timeout:.0f}s in, {MARGIN:.0f}s before the deadline: stopped"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m orchestrator.agents.presets.run",
                                     description=(__doc__ or "").split("\n")[0])
    parser.add_argument("preset", choices=sorted(PRESETS))
    parser.add_argument("--model", required=True)
    args = parser.parse_args(argv)
    preset: Preset = PRESETS[args.preset]
    session = open_session()
    agent_dir = session.output.parent
    workspace = Path.cwd()
    home = Path(os.environ.get("HOME") or "/tmp")
    if not session.mcp_url:
        print("the manifest names no MCP endpoint (tools.mcp_url): presets talk to the gateway over MCP",
              file=sys.stderr)
        return 2
    launch_fn, final_fn = LAUNCHERS[preset.name]
    ctx = Context(binary=preset.path, model=args.model, base_url=os.environ.get(preset.url_env, ""),
                  mcp_url=session.mcp_url, token=session.token, prompt=build(session.manifest), home=home,
                  workspace=workspace)
    launch = launch_fn(ctx)
    deadline = session.manifest.get("deadline")
    budget = float(session.manifest.get("budget", {}).get("wallClockSeconds", 600))
    left = (float(deadline) - time.time()) if isinstance(deadline, int | float) else budget
    margin = min(MARGIN, max(2.0, left * 0.1))
    start = time.monotonic()
    code, what = run_cli(launch, workspace, agent_dir / "cli.jsonl", agent_dir / "cli-stderr.log", left - margin)
    final = final_fn(launch.last if launch.last else agent_dir / "cli.jsonl")
    answer, source = take_answer(workspace, final)
    record: dict[str, Any] = {"preset": preset.name, "package": f"{preset.package}@{preset.version}",
                              "model": args.model, "cli": what, "exit_code": code,
                              "elapsed": round(time.monotonic() - start, 2), "answer": source if answer else None,
                              "prompt": ctx.prompt}
    if answer is None:
        record["no_answer"] = source
        print(f"{preset.name}: no answer: {source} (CLI {what}; see cli.jsonl and cli-stderr.log)", file=sys.stderr)
    else:
        record["schema_problems"] = schema_problems(answer, session.manifest["output"].get("schemas") or {})
        session.write(answer)
        if record["schema_problems"]:
            print(f"{preset.name}: the answer breaks its schema (scored malformed): "
                  + "; ".join(record["schema_problems"][:3]), file=sys.stderr)
    (agent_dir / "preset.json").write_text(json.dumps(record, indent=2) + "\n")
    return 0 if answer is not None else 1


if __name__ == "__main__":
    sys.exit(main())
