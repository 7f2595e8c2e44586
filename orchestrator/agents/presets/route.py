"""The orchestrator's side of a preset run: the model traffic routed through the recording proxy.

For a preset command (``presets.from_command``) ``model_route`` starts a ``ModelProxy`` in front of the vendor's
base URL and gives the agent the proxy instead: the vendor's base URL variable points at the proxy (on the host's
loopback, which the sandbox rewrites to its own address for the agent), the key variable holds a per-run token
the proxy accepts, and every vendor key is kept out of the agent's environment. The sandbox allows the proxy's
port (``OPSBENCH_AGENT_ALLOW``) and no longer the upstream's, so the proxy is the one model endpoint the agent can
reach on the host; the CLI directory under ``.agents/`` is shown to it read-only (``OPSBENCH_AGENT_VISIBLE``).
For any other command it changes nothing.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import socket
import urllib.parse
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from orchestrator.agents import presets
from orchestrator.agents.presets import VENDOR_KEYS, PresetError, from_command, problems
from orchestrator.modelproxy import Caps, ModelProxy, prices

# Beside the gateway's trajectory: hidden from the agent, moved with a trial's files, copied into its artifacts.
CALLS = "model-calls.jsonl"


@dataclass
class Route:
    """What the agent step changes for a preset: the agent's variables, the sandbox's settings, hidden names."""

    env: dict[str, str] = field(default_factory=dict)
    sandbox_environ: Mapping[str, str] | None = None
    hide: frozenset[str] = frozenset()
    proxy: ModelProxy | None = None

    def record(self) -> dict[str, object]:
        """For the run's isolation record: where the model traffic went (no key, no token)."""
        if self.proxy is None:
            return {}
        up = self.proxy.upstream
        found: dict[str, object] = {"proxy": f"127.0.0.1:{self.proxy.port}",
                                    "upstream": f"{up.scheme}://{up.netloc}{up.path}", "calls": len(self.proxy.calls),
                                    "record": str(self.proxy.record)}
        caps = self.proxy.caps
        if caps.tokens is not None or caps.cost_usd is not None:
            found["caps"] = {"tokens": caps.tokens, "cost_usd": caps.cost_usd}
        return found


def _without_upstream(allow: str, upstream: str) -> str:
    """``OPSBENCH_AGENT_ALLOW`` less the entries that name the upstream model server."""
    parts = urllib.parse.urlsplit(upstream)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        address = socket.gethostbyname(parts.hostname or "")
    except OSError:
        address = parts.hostname or ""
    kept = []
    for entry in filter(None, (e.strip() for e in allow.split(","))):
        host, _, entry_port = entry.rpartition(":")
        try:
            same = entry_port == str(port) and socket.gethostbyname(host) == address
        except OSError:
            same = False
        if not same:
            kept.append(entry)
    return ",".join(kept)


def caps(agent_dir: Path) -> Caps:
    """The model budget of the manifest the handover wrote (``budget.tokens``, ``budget.costUsd``)."""
    try:
        manifest = json.loads((agent_dir / "manifest.json").read_text())
    except (OSError, ValueError):
        return Caps()
    budget = manifest.get("budget") if isinstance(manifest, dict) else None
    return Caps.of(budget) if isinstance(budget, dict) else Caps()


@contextlib.contextmanager
def model_route(command: str, agent_dir: Path, environ: Mapping[str, str]) -> Iterator[Route]:
    """The route for ``command``'s agent run (a no-op ``Route`` for an ordinary command). Raises ``PresetError``
    when a preset cannot run (checked again here: a campaign or an AWX step may run long after it was resolved)."""
    choice = from_command(command)
    if choice is None:
        yield Route()
        return
    found = problems(choice, environ)
    if found:
        raise PresetError(f"agent preset {choice.preset.name} cannot run: " + "; ".join(found))
    preset = choice.preset
    table, _ = prices.load(environ)
    upstream = environ[preset.url_env].strip()
    token = "opsbench-" + secrets.token_urlsafe(24)
    proxy = ModelProxy(upstream, environ[preset.key_env].strip(), token, agent_dir.parent / "gateway" / CALLS, table,
                       key_header=preset.key_header, caps=caps(agent_dir))
    with proxy:
        allow = ",".join(filter(None, [_without_upstream(environ.get("OPSBENCH_AGENT_ALLOW", ""), upstream),
                                       f"127.0.0.1:{proxy.port}"]))
        visible = ":".join(filter(None, [environ.get("OPSBENCH_AGENT_VISIBLE", ""), str(presets.PREFIX)]))
        env = {preset.url_env: proxy.base_url, preset.key_env: token, "OPSBENCH_AGENTS_DIR": str(presets.PREFIX),
               "OPSBENCH_AGENT_ALLOW": allow}
        yield Route(env, {**environ, "OPSBENCH_AGENT_ALLOW": allow, "OPSBENCH_AGENT_VISIBLE": visible},
                    frozenset(VENDOR_KEYS - {preset.key_env}), proxy)
