"""Agent presets: agent CLIs people already use (Claude Code, Codex CLI, Gemini CLI, OpenCode), run unchanged on
OpsBench.

``--agent claude-code`` (or ``"codex --model gpt-5"``) on run, campaign and replay is resolved here into the
command ``python -m orchestrator.agents.presets.run NAME --model MODEL``, after the checks that must fail before
anything deploys: the CLI installed by ``make agents``, the vendor's key and base URL in the environment, the model
priced. The pieces:

- this module: the presets (package pin, vendor variables, protocol) and ``resolve``;
- ``route.py`` (orchestrator side): the recording model proxy for the agent's run and the environment it gets;
- ``run.py`` (inside the sandbox): the CLI's own MCP configuration, the prompt, the headless run, the answer;
- ``claude_code.py``, ``codex.py``, ``gemini_cli.py``, ``opencode.py``: what differs per CLI;
- ``prompt.py``: the prompt from the manifest;
- ``install.py``: ``make agents``.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from orchestrator import paths
from orchestrator.errors import OpsBenchError

# Where `make agents` installs the CLIs (OPSBENCH_AGENTS_DIR: another prefix, e.g. one shared by checkouts).
PREFIX = Path(os.environ.get("OPSBENCH_AGENTS_DIR") or paths.PROJECT_ROOT / ".agents").resolve()
RUN_MODULE = "orchestrator.agents.presets.run"


@dataclass(frozen=True)
class Preset:
    """One agent CLI: its npm package pinned, the binary it installs, the vendor variables it reads."""

    name: str
    package: str
    version: str
    binary: str
    vendor: str
    protocol: str
    key_env: str  # the vendor's API key variable (the proxy holds it; the CLI gets the run's proxy token)
    url_env: str  # the vendor's base URL variable (the upstream; the CLI gets the proxy's URL)
    model_env: str  # the model when --model is not given
    default_model: str
    key_header: str  # how the upstream takes the key
    headless: str  # the CLI's documented non-interactive mode, for `opsbench agents`

    @property
    def path(self) -> Path:
        return PREFIX / "node_modules" / ".bin" / self.binary

    def installed_version(self) -> str | None:
        """The version under .agents/ (None when absent)."""
        manifest = PREFIX / "node_modules" / self.package / "package.json"
        if not self.path.exists() or not manifest.is_file():
            return None
        try:
            return str(json.loads(manifest.read_text()).get("version"))
        except (OSError, ValueError):
            return None

    def model(self, environ: Mapping[str, str], given: str | None = None) -> str:
        return given or environ.get(self.model_env, "").strip() or self.default_model


PRESETS: dict[str, Preset] = {p.name: p for p in (
    Preset("claude-code", "@anthropic-ai/claude-code", "2.1.332", "claude", "anthropic",
           "Anthropic Messages (streaming, tool use)", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "ANTHROPIC_MODEL",
           "claude-sonnet-4-5", "x-api-key", "claude -p PROMPT --output-format stream-json --mcp-config FILE"),
    Preset("codex", "@openai/codex", "0.171.0", "codex", "openai",
           "OpenAI Responses (streaming, function calls)", "OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL",
           "gpt-5-codex", "authorization", "codex exec --json PROMPT (config.toml in CODEX_HOME)"),
    Preset("gemini-cli", "@google/gemini-cli", "0.61.0", "gemini", "google",
           "Gemini generateContent (streaming, function calls)", "GEMINI_API_KEY", "GOOGLE_GEMINI_BASE_URL",
           "GEMINI_MODEL", "gemini-2.5-pro", "x-goog-api-key",
           "gemini -p PROMPT --output-format stream-json --yolo (settings.json in ~/.gemini)"),
    Preset("opencode", "opencode-ai", "1.18.33", "opencode", "openai",
           "OpenAI Chat Completions (streaming, tool calls)", "OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL",
           "gpt-5", "authorization", "opencode run --format json PROMPT (opencode.json via OPENCODE_CONFIG)"),
)}
VENDOR_KEYS = frozenset(p.key_env for p in PRESETS.values()) | {"ANTHROPIC_AUTH_TOKEN", "GOOGLE_API_KEY"}


class PresetError(OpsBenchError):
    """A preset that cannot run here: not installed, its vendor variables missing, its model unpriced."""


@dataclass(frozen=True)
class Choice:
    """A preset named on the command line: which, and its model."""

    preset: Preset
    model: str

    @property
    def command(self) -> str:
        return shlex.join([sys.executable, "-m", RUN_MODULE, self.preset.name, "--model", self.model])


def parse(agent: str | None, environ: Mapping[str, str] = os.environ) -> Choice | None:
    """The preset ``agent`` names (``claude-code``, ``codex --model gpt-5``), or None for an ordinary command."""
    if not agent:
        return None
    try:
        words = shlex.split(agent)
    except ValueError:
        return None
    if not words or words[0] not in PRESETS:
        return None
    model = None
    rest = words[1:]
    while rest:
        word = rest.pop(0)
        if word == "--model" and rest:
            model = rest.pop(0)
        elif word.startswith("--model="):
            model = word.split("=", 1)[1]
        else:
            raise PresetError(f"--agent {agent!r}: preset {words[0]} takes only --model MODEL, not {word!r}")
    preset = PRESETS[words[0]]
    return Choice(preset, preset.model(environ, model))


def from_command(command: str) -> Choice | None:
    """The preset a resolved command runs (``python -m orchestrator.agents.presets.run NAME --model M``), else None."""
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    if len(words) < 6 or words[1:3] != ["-m", RUN_MODULE] or words[3] not in PRESETS or words[4] != "--model":
        return None
    return Choice(PRESETS[words[3]], words[5])


def problems(choice: Choice, environ: Mapping[str, str] = os.environ) -> list[str]:
    """What keeps ``choice`` from running here, each with what to do (empty: it can run)."""
    from orchestrator.modelproxy import prices

    preset, found = choice.preset, []
    if preset.installed_version() is None:
        found.append(f"{preset.name} is not installed ({preset.package}@{preset.version} under {PREFIX}): "
                     "run `make agents`")
    elif preset.installed_version() != preset.version:
        found.append(f"{preset.name}: {PREFIX} holds {preset.package}@{preset.installed_version()}, this OpsBench "
                     f"pins {preset.version}: run `make agents`")
    for var, what in ((preset.key_env, "the API key"), (preset.url_env, "the model server's base URL")):
        if not environ.get(var, "").strip():
            found.append(f"{preset.name} needs {var} ({what}; the model comes from your environment, see "
                         "docs/agents.md 'Bring your agent')")
    url = environ.get(preset.url_env, "").strip()
    if url and not url.startswith(("http://", "https://")):
        found.append(f"{preset.url_env}={url!r} is not an http(s) URL")
    try:
        table, source = prices.load(environ)
        prices.require(table, source, choice.model)
    except prices.PriceError as exc:
        found.append(str(exc))
    return found


def resolve(agent: str | None, environ: Mapping[str, str] = os.environ) -> str | None:
    """``agent`` as the command to run: a preset becomes its runner's command, after every check that must pass
    before a deploy (one error listing what is missing); anything else is returned as it is."""
    choice = parse(agent, environ)
    if choice is None:
        return agent
    found = problems(choice, environ)
    if found:
        raise PresetError(f"agent preset {choice.preset.name} cannot run: " + "; ".join(found))
    return choice.command
